"""Kernel return values: `def k(...) -> sd.f32:` (a dtype, `float` / `int` / `bool`, a
`sd.types.vector` / `sd.types.matrix` type, a tuple of those: `-> (sd.i32, sd.f32)` or
`-> tuple[sd.i32, sd.f32]`, or a struct type of those, returned as a struct value, also as a
tuple's item).

Why internal fields: a returned value is lowered onto what every backend has — each value gets a
0-d internal field (`field.internal_field`) that the kernel's `return` stores to, like any
field store — so no backend needs return-value support. After the launch the host reads the
fields back through the backend (`read`, which syncs: a kernel that returns a value waits for
its result, as in Taichi). Scalars come back as Python numbers (cast to the declared type),
vectors / matrices as vector values (`MatrixValue`, numpy arrays of their shape whose `==`
answers for the whole value, as Taichi's vectors do), tuples as tuples.
"""
from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass

import numpy as np

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradTypeError

from ..data.matrix import MatrixValue
from ..types import MatrixType, VectorType


@dataclass(frozen=True, eq=False)
class KernelReturn:
    fields: tuple       # one internal 0-d field per returned value (its dtype and comp shape)
    is_tuple: bool      # `-> (a, b)`: the kernel returns a tuple
    items: tuple        # the returned types (one, or a tuple's items); a struct type among
                        # them has one field per member (struct_leaves), read back as a value

    def read(self, backend):
        vals = []
        for f in self.fields:
            raw = backend.read(f._storage(), int(np.prod(f.comp_shape, dtype=np.int64)) * f.dtype.nbytes)
            a = np.frombuffer(raw.tobytes(), f.dtype.np).reshape(f.comp_shape)
            if f.dtype == T.u1:
                a = a.astype(bool)
            vals.append(a.copy().view(MatrixValue) if f.comp_shape else a.reshape(()).item())
        it = iter(vals)
        out = tuple(_rebuild(t, it) if _is_struct(t) else next(it) for t in self.items)
        return out if self.is_tuple else out[0]


def return_spec(kernel, state):
    """The KernelReturn of `kernel` (fresh internal fields), or None without a return type."""
    ann = inspect.signature(kernel.fn).return_annotation
    if ann is inspect.Signature.empty or ann is None:
        return None
    ann = kernel._resolve_annotation(ann)
    if ann is None:
        return None
    from ..data.field import internal_field
    name = kernel.fn.__name__
    is_tuple = isinstance(ann, tuple) or typing.get_origin(ann) is tuple
    items = (ann if isinstance(ann, tuple) else typing.get_args(ann)) if is_tuple else (ann,)
    items = tuple(kernel._resolve_annotation(t) for t in items) if is_tuple else items
    fields = []
    for k, t in enumerate(items):
        where = f"{name}.return{k if is_tuple else ''}"
        if _is_struct(t):  # one field per member, nested structs flattened
            fields.extend(internal_field(_element_type(e, state, name), (), f"{where}.{m}")
                          for m, e in struct_leaves(t))
        else:
            fields.append(internal_field(_element_type(t, state, name), (), where))
    return KernelReturn(tuple(fields), is_tuple, items)


def _is_struct(t) -> bool:
    from ..data.struct import StructType
    return isinstance(t, StructType)


def _element_type(t, state, name):
    t = T.from_python(t, state.default_fp, state.default_ip)
    if isinstance(t, (T.DType, VectorType, MatrixType)):
        return t
    raise SpiradTypeError(f"kernel {name} has return type {t!r}; use a dtype (sd.f32, int, ...), "
                          f"sd.types.vector(n, dtype), sd.types.matrix(n, m, dtype) or a tuple of "
                          f"those")


def struct_leaves(stype, prefix=""):
    """[(dotted member path, element type)] of a struct type, nested structs flattened in
    member order (the return fields of `-> stype`)."""
    from ..data.struct import StructType
    out = []
    for m, t in stype.members.items():
        if isinstance(t, StructType):
            out.extend(struct_leaves(t, f"{prefix}{m}."))
        else:
            out.append((prefix + m, t))
    return out


def _rebuild(stype, vals):
    """The struct value of `stype` from its leaf values in `struct_leaves` order."""
    from ..data.struct import StructType
    return stype(**{m: _rebuild(t, vals) if isinstance(t, StructType) else next(vals)
                    for m, t in stype.members.items()})
