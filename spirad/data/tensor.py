"""Quadrants' unified tensor API: `sd.tensor(dtype, shape, backend=sd.Backend.FIELD |
NDARRAY)`, `sd.Vector.tensor`, `sd.Matrix.tensor`, and the type names `sd.Tensor`,
`sd.VectorTensor`, `sd.MatrixTensor`, `sd.Field`, `sd.Ndarray`.

Quadrants wraps each allocation in a `qd.Tensor` object; spirad returns the field or ndarray
itself and makes `Tensor` a type that every field and ndarray is an instance of (and
`VectorTensor` / `MatrixTensor` those with vector / matrix elements), so the code that checks
`isinstance(x, qd.Tensor)` or calls `x._unwrap()` works and kernels see no wrapper. As a kernel
parameter annotation `sd.Tensor` accepts either kind: a field is bound at compile time (like
`template()`), an ndarray is a launch argument (like `types.ndarray()`).

`layout=` (the physical axis order, outermost first: Genesis lays its constraint solver's
`(rows, envs)` tensors out `(1, 0)`, environment first, where a serial loop over environments
reads them) is validated; a field is stored in that order (placed as Taichi's `order=` places
it, with `Layout.per_axis`: kernels index the storage with the indices permuted, each checked
against its own axis as in any field; host reads and `to_torch(copy=False)` see the logical
array, a strided view), which gives the same values with each environment's rows together in
memory (docs/performance.md, "Quadrants' tensor layouts"); an ndarray is stored in that
order too (`spirad.data.ndarray`: the layout is part of its kernel argument's type).
`TensorSurface` holds the host-side methods Quadrants adds to both kinds (`element_shape`,
`has_grad`, `_unwrap`, zero-copy `to_torch(copy=False)` / `to_dlpack`; module
`tensor_surface`, which fields import without importing this module).
"""
from __future__ import annotations

from enum import IntEnum

from kernel_ir.errors import SpiradTypeError


class Backend(IntEnum):
    """Which storage `sd.tensor` allocates: a field (bound into kernels at compile time) or an
    ndarray (a launch argument: kernels are reused across sizes)."""
    FIELD = 0
    NDARRAY = 1


class Layout(IntEnum):
    """Quadrants' struct-field layouts (`qd.Layout.SOA / AOS`): accepted, storage is per member."""
    AOS = 0
    SOA = 1


class _TensorMeta(type):
    def __instancecheck__(cls, obj):
        host = _HOST_ARRAY[0]  # `isinstance(x, qd.Tensor)`: Genesis asks at every step
        if host is None:
            from .field import _HostArray
            host = _HOST_ARRAY[0] = _HostArray
        return isinstance(obj, host) and cls._rank in (None, len(obj.comp_shape))

    def __subclasscheck__(cls, sub):
        from .field import _HostArray
        return type.__subclasscheck__(cls, sub) or (cls._rank is None and isinstance(sub, type)
                                                     and issubclass(sub, _HostArray))


_HOST_ARRAY = [None]  # field._HostArray, imported at the first isinstance (field imports this module)


class Tensor(metaclass=_TensorMeta):
    """Every field and ndarray is a `Tensor` (see the module docstring)."""
    _rank = None


class VectorTensor(Tensor):
    """Every field and ndarray with vector elements is a `VectorTensor`."""
    _rank = 1


class MatrixTensor(Tensor):
    """Every field and ndarray with matrix elements is a `MatrixTensor`."""
    _rank = 2


def _check_layout(shape, layout):
    if layout is None or layout in (Layout.AOS, Layout.SOA):
        return
    from .snode_layout import check_order
    check_order(len(shape), tuple(layout))


def _field_order(shape, layout):
    """Taichi's `order=` string of a field whose `layout` permutes its axes (None: C order)."""
    if layout is None or layout in (Layout.AOS, Layout.SOA):
        return None
    layout = tuple(layout)
    if layout == tuple(range(len(shape))):
        return None
    return "".join("ijklmnop"[a] for a in layout)


def _shape(shape):
    return (shape,) if isinstance(shape, int) else tuple(shape)


def tensor(dtype, shape, *, backend=Backend.NDARRAY, layout=None, needs_grad=False):
    """A field (`backend=sd.Backend.FIELD`) or an ndarray (the default, as in Quadrants)."""
    from .field import field
    from .ndarray import ndarray
    shape = _shape(shape)
    _check_layout(shape, layout)
    if Backend(backend) == Backend.FIELD:
        order = _field_order(shape, layout)
        if order is not None:
            from .field import placed_field
            return placed_field(dtype, shape, needs_grad, "", False, None, order, soa=False,
                                per_axis=True)
        return field(dtype, shape=shape, needs_grad=needs_grad)
    permutes = _field_order(shape, layout) is not None
    return ndarray(dtype, shape=shape, needs_grad=needs_grad,
                   layout=tuple(layout) if permutes else None)


def vector_tensor(n, dtype, shape, *, backend=Backend.NDARRAY, needs_grad=False, layout=None):
    from ..types import VectorType
    return tensor(VectorType(n, dtype), shape, backend=backend, needs_grad=needs_grad, layout=layout)


def matrix_tensor(n, m, dtype, shape, *, backend=Backend.NDARRAY, needs_grad=False, layout=None):
    from ..types import MatrixType
    return tensor(MatrixType(n, m, dtype), shape, backend=backend, needs_grad=needs_grad,
                  layout=layout)


def wrap(impl):
    """Quadrants' `qd.wrap(impl)`: spirad's fields and ndarrays need no wrapper."""
    if not isinstance(impl, Tensor):
        raise SpiradTypeError(f"wrap() needs a field or ndarray, got {type(impl).__name__}")
    return impl
