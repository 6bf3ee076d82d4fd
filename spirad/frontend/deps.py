"""What a kernel's compiled code depends on in Python: its source, the sources of the `@sd.func`s
it calls (transitively), and the values it reads from globals and closures, which the frontend
folds into the program (fields by identity and layout, numbers by value).

Why: the offline compile cache (`spirad.offline_cache`) keys a program on this, so a second
process can load the program before compiling it. The description is conservative: every name
the code (or a nested code object) mentions is looked up; a value that cannot be described
stably across processes (an object known only by its address) makes the kernel uncacheable
(`describe` returns None) rather than risk loading a program compiled for other values.
"""
from __future__ import annotations

import enum
import linecache
import numbers
import types

import numpy as np

from kernel_ir.dtypes import DType

UNCACHEABLE = object()


class _Uncacheable(Exception):
    pass


def _names(code) -> set:
    out = set(code.co_names) | set(code.co_freevars)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names(c)
    return out


def _scope(fn) -> dict:
    scope = dict(fn.__globals__)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                scope[name] = cell.cell_contents
            except ValueError:  # an empty cell: not yet assigned
                pass
    return scope


def _code_key(code) -> tuple:
    consts = tuple(_code_key(c) if isinstance(c, types.CodeType) else repr(c)
                   for c in code.co_consts)
    return (code.co_code.hex(), consts, code.co_names)


def value_key(v, names=(), depth=0, seen=None):
    """A process-independent description of value `v` (raises _Uncacheable). Fields by id,
    dtype and shape: the same program order creates the same ids in every process."""
    from ..field import Field
    from ..func import PyFunction
    from ..types import MatrixType, NdarrayType, Template, VectorType
    seen = {} if seen is None else seen
    if v is None or isinstance(v, (bool, str, bytes)):
        return (type(v).__name__, v)
    if isinstance(v, numbers.Number) and not isinstance(v, np.ndarray):
        return (type(v).__name__, repr(v))
    if isinstance(v, DType):
        return ("dtype", v.name)
    if isinstance(v, (VectorType, MatrixType, NdarrayType, Template)):
        return ("type", repr(v))
    if isinstance(v, Field):
        return ("field", v.id, v.dtype.name, v.shape, v.comp_shape, v.needs_grad,
                v.dual is not None)
    if isinstance(v, PyFunction):
        return ("func", _function(v, seen))
    if isinstance(v, (tuple, list)):
        return (type(v).__name__,) + tuple(value_key(x, names, depth, seen) for x in v)
    if isinstance(v, dict):
        return ("dict",) + tuple(sorted((repr(value_key(k, names, depth, seen)),
                                         value_key(x, names, depth, seen)) for k, x in v.items()))
    if isinstance(v, (set, frozenset)):
        return ("set",) + tuple(sorted(repr(value_key(x, names, depth, seen)) for x in v))
    if isinstance(v, enum.Enum):
        return ("enum", type(v).__module__, type(v).__qualname__, v.name)
    if isinstance(v, np.ndarray):
        import hashlib
        return ("array", v.dtype.str, v.shape, hashlib.sha256(np.ascontiguousarray(v)).hexdigest())
    if isinstance(v, types.ModuleType):
        if depth > 0:
            return ("module", v.__name__)
        attrs = tuple((n, _module_attr(getattr(v, n), names, seen))
                      for n in sorted(names) if not n.startswith("__") and hasattr(v, n))
        return ("module", v.__name__, attrs)
    if isinstance(v, types.FunctionType):
        return ("pyfn", v.__module__, v.__qualname__, _code_key(v.__code__))
    if isinstance(v, types.MethodType):
        return ("method", value_key(v.__self__, names, depth, seen), v.__func__.__qualname__)
    if isinstance(v, (types.BuiltinFunctionType, type)):
        return ("named", getattr(v, "__module__", ""), v.__qualname__)
    if callable(v) and hasattr(v, "__qualname__") and hasattr(v, "__module__"):
        return ("named", v.__module__, v.__qualname__)
    # Anything else (class instances, ndarrays used as globals, ...) may hold fields or values
    # whose identity a repr would not show: not cacheable.
    raise _Uncacheable(type(v).__qualname__)


def _module_attr(v, names, seen):
    """A module attribute the code may read (`mod.N`): `names` over-approximates what is read,
    so an attribute that cannot be described is only named by its type."""
    try:
        return value_key(v, names, 1, seen)
    except _Uncacheable:
        return ("opaque", type(v).__qualname__)


def _codes(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


def _source_text(fn) -> str:
    """The source lines of `fn` (decorators to its last line), read through linecache: no
    tokenizing, unlike `inspect.getsource` (the first tokenize in a process costs ~25 ms)."""
    code = fn.__code__
    linecache.checkcache(code.co_filename)  # a file rewritten in this process is read again
    lines = linecache.getlines(code.co_filename)
    ends = [ln for c in _codes(code) for _, _, ln in c.co_lines() if ln is not None]
    if not lines or not ends:
        raise _Uncacheable(f"no source for {fn.__qualname__}")
    return "".join(lines[code.co_firstlineno - 1:max(ends)])


def _function(pf, seen) -> tuple:
    """Source and referenced values of an `sd.func` / kernel, recursing into funcs it calls."""
    fn = pf.fn
    key = (fn.__module__, fn.__qualname__)
    if key in seen:
        return ("seen",) + key
    seen[key] = True
    src = _source_text(fn)
    names = _names(fn.__code__)
    scope = _scope(fn)
    refs = tuple((n, value_key(scope[n], names, 0, seen)) for n in sorted(names) if n in scope)
    return key + (src, _code_key(fn.__code__), refs)  # source and bytecode


def describe(kernel, template_args=()) -> tuple | None:
    """The dependencies of `kernel` and its template arguments, or None if uncacheable."""
    try:
        seen = {}
        return (_function(kernel, seen), tuple(value_key(a, (), 0, seen) for a in template_args))
    except _Uncacheable:
        return None
