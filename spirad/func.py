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
    check_string_annotations(fn, "func")
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
def check_string_annotations(fn, what: str) -> None:
    """Taichi reads a kernel's or func's parameter annotations when it is decorated and refuses
    one it cannot use there; a string annotation (a forward reference) that names nothing
    defined by then is that mistake, so it is refused at the decoration too, quoting the
    parameter. Under `from __future__ import annotations` every annotation is a string and is
    evaluated at the first launch instead (names defined after the kernel work there)."""
    import __future__
    import inspect
    code = getattr(fn, "__code__", None)
    if code is None or code.co_flags & __future__.annotations.compiler_flag:
        return
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return
    scope = None
    for k, p in enumerate(params):
        if not isinstance(p.annotation, str):
            continue
        if scope is None:
            scope = dict(fn.__globals__)
            for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
                try:
                    scope[name] = cell.cell_contents
                except ValueError:
                    pass
        try:
            eval(p.annotation, scope)  # noqa: S307 - the user's own annotation expression
        except Exception as e:
            msg = (f"Invalid type annotation (argument {k}) of {what} {fn.__name__}: "
                   f"{p.annotation!r} cannot be evaluated here ({type(e).__name__}: {e}); "
                   f"annotate with a type (sd.f32, sd.template(), sd.types.ndarray(), ...) "
                   f"defined before the {what}")
            from kernel_ir.source import user_error
            try:  # the parameter, quoted (no source, e.g. typed at the prompt: the text alone)
                src = SourceInfo(fn)
                loc = src.loc(src.func_def.args.args[k])
            except Exception:
                loc = None
            raise user_error(SpiradSyntaxError, msg, loc) from None


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
