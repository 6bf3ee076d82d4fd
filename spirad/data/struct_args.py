"""Dataclass-typed kernel parameters (Quadrants): `def k(state: SimState)` where `SimState` is a
`dataclasses.dataclass` whose members are fields, ndarrays, nested dataclasses and plain values.

The argument is flattened at each call: every ndarray inside it (at any depth) becomes a hidden
ndarray argument of the launch, appended after the declared parameters; fields and plain values
stay compile-time values, as a `template()` argument's would. In the kernel, `state.x` reads the
member: an ndarray member is that hidden argument (so a kernel compiled for one instance runs
with any other instance of the same structure: same dtypes, ranks, element shapes, gradients, and
the same fields and plain values), anything else is the Python value. @func parameters receive
the same view (`StructView`) and pass it on.

Why flattening rather than binding the ndarrays as compile-time constants: Genesis' default
"ndarray mode" exists so that a rebuilt scene (new arrays, other sizes) reuses every compiled
kernel; ndarray identities and shapes must therefore stay out of the compiled program.
"""
from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from kernel_ir import dtypes as T

from .struct import Struct


def is_struct_annotation(ann) -> bool:
    """A dataclass type, or a texture annotation (`spirad.texture`: a Texture is a dataclass)."""
    return (isinstance(ann, type) and dataclasses.is_dataclass(ann)
            or getattr(ann, "_texture_annotation", False))


def _members(obj):
    return [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]


_LEAVES: dict = {}  # id(frozen dataclass) -> (obj, leaves): members of a frozen one never change


def ndarray_leaves(obj, prefix=()):
    """[(path, Ndarray)] of every ndarray inside dataclass `obj`, depth first in member order
    (cached for frozen dataclasses: a launch with the same argument walks nothing)."""
    if not prefix:
        hit = _LEAVES.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        leaves = _walk(obj, ())
        params = getattr(type(obj), "__dataclass_params__", None)
        if params is not None and params.frozen:
            if len(_LEAVES) > 4096:
                _LEAVES.clear()
                _ARRAYS.clear()
            _LEAVES[id(obj)] = (obj, leaves)
        return leaves
    return _walk(obj, prefix)


def leaf_arrays(obj) -> tuple:
    """The ndarrays of `ndarray_leaves(obj)` as a tuple (the hidden launch arguments), cached
    with them."""
    hit = _ARRAYS.get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    arrays = tuple(nd for _, nd in ndarray_leaves(obj))
    if id(obj) in _LEAVES:  # frozen: cache
        _ARRAYS[id(obj)] = (obj, arrays)
    return arrays


_ARRAYS: dict = {}


def _walk(obj, prefix):
    from .ndarray import Ndarray
    out = []
    for name, v in _members(obj):
        if isinstance(v, Ndarray):
            out.append((prefix + (name,), v))
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            out.extend(_walk(v, prefix + (name,)))
    return out


def struct_key(obj):
    """The compile-cache key of a dataclass argument: its structure, the ndarrays by signature
    (not identity), fields and other objects by identity, numbers by value."""
    from .ndarray import Ndarray
    parts = [type(obj).__qualname__, id(type(obj))]
    for name, v in _members(obj):
        if isinstance(v, Ndarray):
            parts.append((name, "nd", v.dtype, len(v.shape), v.comp_shape, v.needs_grad,
                          v.needs_dual, v.layout))
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            parts.append((name, struct_key(v)))
        elif isinstance(v, (bool, numbers.Number, str, T.DType)) or v is None:
            parts.append((name, "value", type(v), v))
        elif isinstance(v, np.ndarray):  # a vector value (argpacks): by value
            parts.append((name, "array", v.dtype.str, v.shape, v.tobytes()))
        elif isinstance(v, Struct):  # a struct value (argpacks): by value
            parts.append((name, "struct value", repr(v.to_dict())))
        else:
            parts.append((name, "id", id(v)))
    return tuple(parts)


class StructView:
    """What a dataclass parameter is inside a kernel: members read through, ndarray members
    replaced by their hidden arguments (`arrays`: path -> NdarrayArg)."""

    __slots__ = ("_obj", "_arrays", "_prefix")

    def __init__(self, obj, arrays: dict, prefix=()):
        self._obj, self._arrays, self._prefix = obj, arrays, prefix

    def __getattr__(self, name):
        path = self._prefix + (name,)
        if path in self._arrays:
            return self._arrays[path]
        v = getattr(self._obj, name)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return StructView(v, self._arrays, path)
        if getattr(v, "obj", None) is self._obj and hasattr(v, "func"):  # an @sd.func method
            return type(v)(v.func, self)  # bound to the view: `self.x` reads the hidden arrays
        return v

    def is_a(self, cls) -> bool:
        """Whether the viewed dataclass instance is a `cls` (`sd.linalg.SparseMatrixBuilder`
        parameters index differently)."""
        return isinstance(self._obj, cls)

    def __repr__(self):
        return f"StructView({type(self._obj).__name__})"
