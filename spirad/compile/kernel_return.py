"""Kernel return values: `def k(...) -> sd.f32:` (a dtype, `float` / `int` / `bool`, a
`sd.types.vector` / `sd.types.matrix` type, or a tuple of those: `-> (sd.i32, sd.f32)` or
`-> tuple[sd.i32, sd.f32]`).

Why internal fields: a returned value is lowered onto what every backend has — each value gets a
0-d internal field (`field.internal_field`) that the kernel's `return` stores to, like any
field store — so no backend needs return-value support. After the launch the host reads the
fields back through the backend (`read`, which syncs: a kernel that returns a value waits for
its result, as in Taichi). Scalars come back as Python numbers (cast to the declared type),
vectors / matrices as numpy arrays of their shape, tuples as tuples.
"""
from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass

import numpy as np

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradTypeError

from ..types import MatrixType, VectorType


@dataclass(frozen=True, eq=False)
class KernelReturn:
    fields: tuple       # one internal 0-d field per returned value (its dtype and comp shape)
    is_tuple: bool      # `-> (a, b)`: the kernel returns a tuple

    def read(self, backend):
        vals = []
        for f in self.fields:
            raw = backend.read(f._storage(), int(np.prod(f.comp_shape, dtype=np.int64)) * f.dtype.nbytes)
            a = np.frombuffer(raw.tobytes(), f.dtype.np).reshape(f.comp_shape)
            if f.dtype == T.u1:
                a = a.astype(bool)
            vals.append(a.copy() if f.comp_shape else a.reshape(()).item())
        return tuple(vals) if self.is_tuple else vals[0]


def return_spec(kernel, state):
    """The KernelReturn of `kernel` (fresh internal fields), or None without a return type."""
    ann = inspect.signature(kernel.fn).return_annotation
    if ann is inspect.Signature.empty or ann is None:
        return None
    ann = kernel._resolve_annotation(ann)
    if ann is None:
        return None
    from ..data.field import internal_field
    is_tuple = isinstance(ann, tuple) or typing.get_origin(ann) is tuple
    items = (ann if isinstance(ann, tuple) else typing.get_args(ann)) if is_tuple else (ann,)
    name = kernel.fn.__name__
    fields = tuple(internal_field(_element_type(t, state, name), (), f"{name}.return{k}")
                   for k, t in enumerate(items))
    return KernelReturn(fields, is_tuple)


def _element_type(t, state, name):
    t = T.from_python(t, state.default_fp, state.default_ip)
    if isinstance(t, (T.DType, VectorType, MatrixType)):
        return t
    raise SpiradTypeError(f"kernel {name} has return type {t!r}; use a dtype (sd.f32, int, ...), "
                          f"sd.types.vector(n, dtype), sd.types.matrix(n, m, dtype) or a tuple of "
                          f"those")
