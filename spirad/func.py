"""The Python functions spirad compiles: `@sd.func` here, `@sd.kernel` in `spirad.kernel`.

Both wrap a Python function whose source is parsed on first use (`PyFunction.source`). A func is
inlined into the kernel (or func) that calls it; calling it from Python is an error. The
frontend tells the two apart by class: a `Func` is inlined, any other `PyFunction` (a kernel)
cannot be called from kernel code.
"""
from __future__ import annotations

import functools

from kernel_ir.errors import SpiradSyntaxError

from .frontend.source import SourceInfo


class PyFunction:
    """A Python function with its source, read and parsed once."""

    def __init__(self, fn):
        self.fn = fn
        self._src = None
        functools.update_wrapper(self, fn)

    def source(self) -> SourceInfo:
        if self._src is None:
            self._src = SourceInfo(self.fn)
        return self._src


class Func(PyFunction):
    def __call__(self, *args, **kwargs):
        raise SpiradSyntaxError(f"@sd.func {self.fn.__name__} can only be called from a kernel "
                                f"or func")


def func(fn) -> Func:
    return Func(fn)
