"""The Python functions spirad compiles: `@sd.func` here, `@sd.kernel` in `spirad.kernel`.

Both wrap a Python function whose source is parsed on first use (`PyFunction.source`). A func is
inlined into the kernel (or func) that calls it; calling it from Python is an error. The
frontend tells the two apart by class: a `Func` is inlined, any other `PyFunction` (a kernel)
cannot be called from kernel code.
"""
from __future__ import annotations

import functools

from kernel_ir.errors import SpiradSyntaxError

from .source import SourceInfo
from .tracebacks import api


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
    """A function inlined into the kernels that call it (`@sd.func`); it may return a value."""
    @api
    def __call__(self, *args, **kwargs):
        raise SpiradSyntaxError(f"@sd.func {self.fn.__name__} can only be called from a kernel "
                                f"or func")

    def __get__(self, obj, objtype=None):
        """`self.f(...)` in a kernel method: `obj` becomes the func's first argument."""
        return self if obj is None else BoundFunc(self, obj)


class BoundFunc:
    """A func looked up on an object: inlined with the object as its first argument."""

    def __init__(self, func, obj):
        self.func, self.obj = func, obj


def func(fn) -> Func:
    """Decorator: a function callable from kernels and funcs, inlined at each call (Taichi's
    `@ti.func`). Recursion is an error."""
    return Func(fn)


class PyFunc(Func):
    """`@sd.pyfunc` (Taichi's `@ti.pyfunc`): inlined into kernels as an @sd.func, and called as
    the plain Python function in Python scope."""

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def pyfunc(fn) -> PyFunc:
    """Decorator: a function callable both from kernels (inlined, as `@sd.func`) and from
    Python (Taichi's `@ti.pyfunc`)."""
    return PyFunc(fn)


class PlainFunc(Func):
    """A plain Python function or lambda called from a kernel: inlined like an @sd.func (Taichi
    does the same). Lambdas are read from their file (`LambdaSourceInfo`)."""

    def source(self) -> SourceInfo:
        if self._src is None:
            if self.fn.__name__ == "<lambda>":
                from .source import LambdaSourceInfo
                self._src = LambdaSourceInfo(self.fn)
            else:
                self._src = SourceInfo(self.fn)
        return self._src


_plain: dict = {}  # id(function) -> (function, PlainFunc): parsed once per function object


def plain_func(fn) -> PlainFunc:
    """The inlinable wrapper of a plain Python function (cached per function object)."""
    hit = _plain.get(id(fn))
    if hit is None or hit[0] is not fn:
        hit = _plain[id(fn)] = (fn, PlainFunc(fn))
    return hit[1]


def is_plain_python_function(fn) -> bool:
    """A user's Python function (def or lambda), not spirad's or numpy's own helpers (except
    those marked `_kernel_inline`: `taichi.lang.ops`' operator functions)."""
    import types
    if not isinstance(fn, types.FunctionType):
        return False
    if getattr(fn, "_kernel_inline", False):
        return True
    mod = getattr(fn, "__module__", "") or ""
    return not (mod == "numpy" or mod.startswith(("numpy.", "spirad.", "kernel_ir.")) or mod == "spirad")
