"""What a kernel's compiled code depends on in Python, by value: its source and where it stands,
the functions it calls (`@sd.func`s and plain Python helpers, transitively, with their default
arguments), and every value the frontend can read while compiling it — globals, closure cells,
attributes of modules, classes and objects (`Params.scale`, `cfg.sub.N`), elements of lists,
tuples and dicts, and the template arguments.

Why: the offline compile cache (`spirad.compile.offline_cache`) keys a program on this, so a second
process can load the program before compiling it; a value that changed must change the key.

How: a value is described by its type and content. Numbers, strings, dtypes and numpy arrays by
value; fields by their ids (and their gradient's and dual's: the program binds them by id) and
layout — a field of a previous `sd.init()` makes the kernel uncacheable, so compiling raises the
error it raises without the cache; functions by their file, first line, source, bytecode,
defaults and the values of the names they use; modules, classes and objects by the attributes
whose names any described code mentions (`names`, the union over all code reached: a helper
that reads `p.scale` of an object the kernel passes it names `scale`). Since describing a
function can add names, the description is repeated until the set of names stops growing. A
value that cannot be described stably across processes (a C object known only by its address)
makes the kernel uncacheable (`describe` returns None) rather than risk loading a program
compiled for other values. The file and first line of every function are in the key, so an
error raised by a cached program names the current file and line.
"""
from __future__ import annotations

import enum
import linecache
import numbers
import types

import numpy as np

from kernel_ir.dtypes import DType

# classes from these packages are named, not described (their attributes are library code)
# (`quadrants`: the re-export module `spirad/compat/quadrants_shim`, spirad under other names)
_LIBRARY_ROOTS = frozenset(("builtins", "numpy", "spirad", "kernel_ir", "passes", "torch", "typing", "enum",
                            "math", "collections", "dataclasses", "abc", "functools", "numbers",
                            "types", "operator", "itertools", "quadrants"))
# protocols through which the frontend may evaluate an object (bool(), len(), iteration, ...)
_PROTOCOLS = ("__bool__", "__len__", "__iter__", "__getitem__", "__index__", "__int__",
              "__float__", "__call__", "__contains__", "__eq__", "__hash__")


class _Uncacheable(Exception):
    pass


# the attribute lookups that run no user code: object's, type's and the module type's own
_DEFAULT_GETATTRIBUTE = tuple(t.__dict__["__getattribute__"]
                              for t in (object, type, types.ModuleType))


def _lookup_keys(obj):
    """Every name Python's default attribute lookup can find on `obj` (its `__dict__`, the
    `__dict__`s of its type's MRO and, for a class, of its own MRO), or None where a lookup may
    run other code and find more (`__getattr__` on the type or a module, an overridden
    `__getattribute__`)."""
    tp = type(obj)
    for c in tp.__mro__:
        d = c.__dict__
        if "__getattr__" in d:
            return None
        g = d.get("__getattribute__")
        if g is not None and not any(g is x for x in _DEFAULT_GETATTRIBUTE):
            return None
    keys = set()
    for c in tp.__mro__:
        keys.update(c.__dict__)
    if isinstance(obj, type):
        for c in obj.__mro__:
            keys.update(c.__dict__)
        return keys
    try:
        own = object.__getattribute__(obj, "__dict__")
    except AttributeError:  # __slots__ only: its members are descriptors of the class
        return keys
    if isinstance(obj, types.ModuleType) and "__getattr__" in own:
        return None  # a module-level __getattr__ (PEP 562) may answer any name
    keys.update(own)
    return keys


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


def _library(v) -> bool:
    """A module, class or function of a library (named in a key, not described)."""
    mod = v.__name__ if isinstance(v, types.ModuleType) else getattr(v, "__module__", None)
    return (mod or "builtins").split(".")[0] in _LIBRARY_ROOTS


def _generated(fn):
    """The description of a method `dataclasses` generated (`__eq__`, `__hash__`: no source
    file; its code follows from the class's fields, named with it), else None."""
    code = getattr(fn, "__code__", None)
    if code is None or code.co_filename != "<string>":
        return None
    owner = fn.__qualname__.rpartition(".")[0]
    return ("generated", owner, fn.__name__, _code_key(code))


class _Describer:
    """One description pass with a fixed set of attribute `names`; collects the names of the
    code it reaches (`found`) and the ids of the fields it describes (`field_ids`)."""

    def __init__(self, names: frozenset, state):
        self.names = names
        self.found = set(names)
        self.state = state
        self.field_ids: set = set()
        self.memo: dict = {}  # id(object) -> index: a cycle or a repeat is named by its index
        self.keep: list = []  # objects in memo stay alive during the pass (ids stay unique)
        self.plain = frozenset(n for n in names if not n.startswith("__"))  # `attrs` reads these
        self.plain_sorted = sorted(self.plain)

    def value(self, v):
        from ..data.field import Field
        from ..func import PyFunction
        from ..types import MatrixType, NdarrayType, Template, VectorType
        if v is None or isinstance(v, (bool, str, bytes)):
            return (type(v).__name__, v)
        if isinstance(v, (numbers.Number, np.generic)) and not isinstance(v, np.ndarray):
            return (type(v).__name__, repr(v))  # numpy scalars too (np.bool_ is no Number)
        if isinstance(v, DType):
            return ("dtype", v.name)
        if isinstance(v, (VectorType, MatrixType, NdarrayType, Template)):
            return ("type", repr(v))
        if isinstance(v, enum.Enum):
            return ("enum", type(v).__module__, type(v).__qualname__, v.name)
        if isinstance(v, np.ndarray):
            import hashlib
            return ("array", v.dtype.str, v.shape,
                    hashlib.sha256(np.ascontiguousarray(v)).hexdigest())
        if isinstance(v, Field):
            return self.field(v)
        from ..data.struct import Struct
        if isinstance(v, Struct):  # a struct value: its members by value (a kernel constant)
            return ("struct value", self.value(v.to_dict()))
        if isinstance(v, (tuple, list)):
            return (type(v).__name__,) + tuple(self.value(x) for x in v)
        if isinstance(v, dict):
            return ("dict",) + tuple(sorted((repr(self.value(k)), self.value(x))
                                            for k, x in v.items()))
        if isinstance(v, (set, frozenset)):
            return ("set",) + tuple(sorted(repr(self.value(x)) for x in v))
        if isinstance(v, (types.ModuleType, type, types.FunctionType)) and _library(v):
            return ("named", getattr(v, "__module__", None) or v.__name__,
                    getattr(v, "__qualname__", v.__name__))
        if isinstance(v, (types.BuiltinFunctionType, np.ufunc)) or (
                callable(v) and _library(type(v)) and hasattr(v, "__qualname__")
                and not isinstance(v, (PyFunction, types.MethodType, type, types.FunctionType,
                                       staticmethod, classmethod))):
            return ("named", getattr(v, "__module__", "") or "", getattr(v, "__qualname__", ""))
        seen = self.memo.get(id(v))  # functions, modules, classes, objects: maybe cyclic
        if seen is not None:
            return ("seen", seen)
        self.memo[id(v)] = len(self.memo)
        self.keep.append(v)
        if isinstance(v, PyFunction):
            return ("func", type(v).__name__, self.function(v.fn))
        if isinstance(v, types.ModuleType):
            return ("module", v.__name__, self.attrs(v))
        if isinstance(v, types.FunctionType):
            return ("pyfn", self.function(v))
        if isinstance(v, types.MethodType):
            return ("method", self.value(v.__self__), self.value(v.__func__))
        if isinstance(v, (staticmethod, classmethod)):
            return (type(v).__name__, self.value(v.__func__))
        if isinstance(v, property):  # read through on an object; on a class, the accessors
            return ("property", self.value(v.fget), self.value(v.fset), self.value(v.fdel))
        if isinstance(v, type):
            bases = tuple(self.value(b) for b in v.__mro__[1:] if b is not object)
            return ("class", v.__module__, v.__qualname__, bases, self.attrs(v, v.__dict__))
        if not _library(type(v)) and (hasattr(v, "__dict__") or hasattr(type(v), "__slots__")):
            return ("object", self.value(type(v)), self.attrs(v))  # the attributes code names
        # anything else (C objects, tensors, library instances) may hold state a repr would
        # not show: not cacheable
        raise _Uncacheable(type(v).__qualname__)

    def struct(self, obj) -> tuple:
        """A dataclass kernel argument (`struct_args`): its class, every ndarray inside it by
        signature (the program takes them as hidden arguments: their identities and shapes stay
        out of it), nested dataclasses likewise, and the other members the described code names
        (fields by id and layout, plain values by value: the program reads them as constants)."""
        import dataclasses

        from ..data.ndarray import Ndarray
        out = []
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            if isinstance(v, Ndarray):
                out.append((f.name, "nd", v.dtype.name, len(v.shape), v.comp_shape, v.needs_grad,
                            v.needs_dual, v.layout))
            elif dataclasses.is_dataclass(v) and not isinstance(v, type):
                out.append((f.name, self.struct(v)))
            elif f.name in self.names:
                out.append((f.name, self.value(v)))
        return ("struct", self.value(type(obj)), tuple(f.name for f in dataclasses.fields(obj)),
                tuple(out))

    def field(self, f):
        if f.epoch != self.state.epoch:  # compiling raises the stale-field error: not cached
            raise _Uncacheable(f"field {f.name} of a previous init()")
        from ..data.sparse_layout import extents_of, levels_of
        ids = [f.id] + [g.id for g in (f._grad, f._dual) if g is not None]
        levels = levels_of(f)  # a sparse field's writes and struct-fors use its masks
        ids += [lv.mask.id for lv in levels] + [lv.at_launch.id for lv in levels]
        self.field_ids.update(ids)
        sparse = (extents_of(f), tuple((lv.kind, lv.depth, lv.axis, lv.capacity)
                                       for lv in levels)) if levels else None
        from ..data.snode_layout import layout_of
        layout = layout_of(f)  # Taichi's address arithmetic is compiled into every access
        return ("field", tuple(ids), f.dtype.name, f.shape, f.comp_shape, f.needs_grad,
                f.needs_dual, f.offset, sparse,  # the offset is compiled into every index
                layout.key() if layout is not None else None)

    def _readable(self, obj) -> list:
        """The names of `plain` that `getattr(obj, name)` may find, sorted. Trying every name
        on every object was most of a warm Genesis build (thousands of names times thousands
        of objects, nearly every try an AttributeError); where attribute lookup is Python's
        default (`_lookup_keys`), a name in none of the dicts it searches cannot be found, so
        only the others are tried: the same attributes, so the same description. Any other
        object tries every name, as before."""
        keys = _lookup_keys(obj)
        if keys is None:
            return self.plain_sorted
        return sorted(self.plain.intersection(keys))

    def attrs(self, obj, own=None) -> tuple:
        """(name, description) of every attribute of `obj` that some described code names; a
        class also gives the protocol methods it defines itself (`own`)."""
        out = []
        for n in self._readable(obj):
            try:
                v = getattr(obj, n)
            except Exception:  # noqa: BLE001 - absent (or a property that raises): not read
                continue
            out.append((n, self.value(v)))
        if own is not None:
            out.extend((n, _generated(own[n]) or self.value(own[n])) for n in _PROTOCOLS
                       if n in own)
        return tuple(out)

    def function(self, fn) -> tuple:
        """Where `fn` stands, its source, bytecode and defaults, and the values of its names."""
        code = fn.__code__
        names = _names(code)
        self.found |= names
        scope = _scope(fn)
        refs = tuple((n, self.value(scope[n])) for n in sorted(names) if n in scope)
        defaults = tuple(self.value(d) for d in fn.__defaults__ or ())
        kwdefaults = tuple(sorted((k, self.value(d)) for k, d in (fn.__kwdefaults__ or {}).items()))
        return (fn.__module__, fn.__qualname__, code.co_filename, code.co_firstlineno,
                _source_text(fn), _code_key(code), defaults, kwdefaults, refs)


def describe(kernel, template_args=(), state=None, struct_args=()):
    """(description, field ids) of `kernel`, its template arguments and its dataclass arguments
    (`struct_args`), or None if uncacheable. The field ids are those of every field (and gradient
    / dual) the description names: a program loaded for this description may bind only those
    (and spirad's internal fields)."""
    from ..runtime import state as _state
    state = state or _state.current()
    names = frozenset()
    try:
        for _ in range(16):
            d = _Describer(names, state)
            desc = (d.value(kernel), tuple(d.value(a) for a in template_args),
                    tuple(d.struct(a) for a in struct_args))
            if d.found <= names:
                return desc, frozenset(d.field_ids)
            names = frozenset(d.found)
    except (_Uncacheable, RecursionError):
        return None
    return None  # names kept growing: not cached
