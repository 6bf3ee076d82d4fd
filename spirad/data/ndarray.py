"""Ndarrays: arrays passed to kernels as arguments (`types.ndarray()`), shape known at run time.

`needs_grad=True` gives an ndarray a `.grad` (reverse mode), `needs_dual=True` a `.dual` (forward
mode, `sd.ad.FwdMode`): companion ndarrays of the same shape bound with the argument.

`layout=` (Quadrants' `sd.tensor(..., backend=NDARRAY, layout=perm)`: the axes in storage
order, outermost first) stores the ndarray as the C-order array of its permuted shape (Genesis
puts the environment axis first, so a serial loop over environments reads each environment's
rows together). `shape` stays canonical: host reads and writes go through the permutation
(`_perm`, `spirad.data.snode_layout.per_axis`), `to_torch(copy=False)` / `to_dlpack` are
strided views of the live memory. Kernels take the permutation as part of the argument's type
(`signature`: another layout compiles another program, in memory and in the offline cache);
the frontend indexes the storage with the indices permuted and reads `x.shape[k]` from the
storage's axis of k (`frontend.values.NdarrayArg.order`), so every pass after it sees plain
accesses, each index checked against its own axis. A launch binds the storage's extents
(`storage_shape`); `.grad` / `.dual` share the layout.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ..runtime import guard as _guard
from ..runtime import state as _state
from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradShapeError, SpiradTypeError
from .field import _HostArray, check_elements, normalize_shape, resolve_dtype
from ..tracebacks import api, api_class


def _check_f64(dtype, what: str = "sd.ndarray") -> None:
    """An f64 ndarray on a backend without 64-bit floats (Metal) is refused where it is created:
    no kernel could take it. (A float64 numpy array / torch tensor passed to a kernel is
    converted to float32 at launch instead: `spirad.interop.arrays`.)"""
    be = _state.backend()
    if be.capabilities().get("f64", True):
        return
    why = "Metal has no 64-bit floats" if be.name == "metal" else \
        f"the {be.name} device has no 64-bit floats"
    raise SpiradTypeError(f"{what} of dtype {dtype} on {be.name}: {why}; use sd.f32 (a float64 "
                          f"numpy array or torch tensor passed to a kernel is converted to "
                          f"float32 at launch)")


@api_class
@dataclass(frozen=True)
class TensorType:
    """The element type of a vector / matrix ndarray as Taichi reports it (its C++ TensorType:
    `nd.element_type.element_type()` is the scalar dtype, `.shape()` the element shape)."""
    comp_shape: tuple
    dtype: object

    def element_type(self):
        return self.dtype

    def shape(self) -> list:
        return list(self.comp_shape)

    def __str__(self):
        return f"[Tensor ({', '.join(str(c) for c in self.comp_shape)}) {self.dtype}]"


class Ndarray(_HostArray):
    """An array passed to kernels as an argument (`sd.types.ndarray()` parameters); its shape is
    known only at launch. Host access as for fields; `.grad` / `.dual` exist with
    `needs_grad=True` / `needs_dual=True`. DLPack: `torch.from_dlpack(nd)` /
    `np.from_dlpack(nd)`."""
    _kind = "ndarray"
    _foreign = False  # an alias of a user's numpy array / torch tensor (spirad.interop.arrays)

    _layout = None  # the storage order of the axes where it is not canonical (module docstring)
    _span = None  # (first, last + 1) address of its storage in host memory, or False: not host
                  # memory (cached by `data.storage_spans`; the storage is fixed at creation)

    def __init__(self, dtype, shape, needs_grad=False, _is_grad=False, needs_dual=False,
                 layout=None):
        self.dtype, self.comp_shape = resolve_dtype(dtype)
        if self.dtype == T.f64:
            _check_f64(dtype)
        st = _state.current()
        self.id = st.new_id()
        self.epoch = st.epoch
        self.shape = normalize_shape(_integer_extents(shape))
        check_elements(self.shape, self.comp_shape, "sd.ndarray", ndarray=True)
        if layout is not None and tuple(layout) != tuple(range(len(self.shape))):
            from .snode_layout import check_order
            check_order(len(self.shape), tuple(layout))
            self._layout = tuple(int(a) for a in layout)
        self.generation = 0
        nbytes = int(np.prod(self.full_shape, dtype=np.int64)) * self.dtype.nbytes
        with _guard.LOCK:
            self._buf = _state.backend().allocate_ndarray(nbytes)
        self.grad = None
        self.dual = None
        for flag, what in ((needs_grad, "grad"), (needs_dual, "dual")):
            if flag and not _is_grad:
                if not self.dtype.is_float:
                    raise SpiradTypeError(f"needs_{what}=True requires a float dtype, got {self.dtype}")
                setattr(self, what, Ndarray(dtype, shape, _is_grad=True, layout=self._layout))

    @classmethod
    def _alias(cls, storage, dtype, shape, comp_shape=None, layout=None) -> "Ndarray":
        """Internal: an ndarray over existing backend memory `storage` (no allocation, no grad),
        e.g. a field's buffer read as int32 words by the GPU sizer kernel. `shape` must fit in
        the storage; the alias never owns or frees it. `comp_shape` overrides the element
        shape of `dtype` (a scalar dtype): a foreign array's alias (`spirad.interop.arrays`);
        `layout`: the storage's axis order (an ndarray's own, where the alias views it)."""
        self = cls.__new__(cls)
        self.dtype, self.comp_shape = resolve_dtype(dtype)
        if comp_shape is not None:
            self.comp_shape = tuple(comp_shape)
            self._foreign = True
        st = _state.current()
        self.id = st.new_id()
        self.epoch = st.epoch
        self.shape = normalize_shape(shape)
        self._layout = layout
        self.generation = 0
        self._buf = storage
        self.grad = None
        self.dual = None
        return self

    @property
    def needs_grad(self) -> bool:
        """Whether the ndarray has a gradient (`nd.grad`)."""
        return self.grad is not None

    @property
    def needs_dual(self) -> bool:
        """Whether the ndarray has a forward-mode dual (`nd.dual`)."""
        return self.dual is not None

    def _get_element_size(self) -> int:
        """Taichi's: the bytes of one element (a vector / matrix element: all its components)."""
        return int(np.prod(self.comp_shape, dtype=np.int64)) * self.dtype.nbytes

    def _get_nelement(self) -> int:
        """Taichi's: the number of elements (the product of the shape)."""
        return int(np.prod(self.shape, dtype=np.int64))

    def _storage(self):
        return self._buf

    @property
    def layout(self):
        """Quadrants' `layout`: the axes in storage order (outermost first), None: canonical."""
        return self._layout

    def _axis_order(self):
        return self._layout

    def _perm(self):
        """The storage element of each element (C order over `full_shape`) where `layout=`
        permutes the axes, else None (host reads and writes go through it: field._HostArray)."""
        if self._layout is None:
            return None
        cached = self.__dict__.get("_layout_perm")
        if cached is None and 0 in self.shape:  # no element: nothing to permute
            cached = self._layout_perm = np.zeros(self.full_shape, np.int64)
        if cached is None:
            from .snode_layout import per_axis
            cached = self._layout_perm = per_axis(self.shape, self.comp_shape,
                                                  self._layout).permutation()
        return cached

    @property
    def storage_shape(self) -> tuple:
        """The full shape of the storage: `full_shape` with the axes in `layout` order (what a
        launch binds: kernels index the storage)."""
        if self._layout is None:
            return self.full_shape
        return tuple(self.shape[a] for a in self._layout) + tuple(self.comp_shape)

    def _element_strides(self):
        """The storage's strides (in elements) of `full_shape`'s axes where `layout=` permutes
        them (DLPack's and `__cuda_array_interface__`'s strided views), else None (C order)."""
        if self._layout is None:
            return None
        stored = self.storage_shape
        c_order = [int(np.prod(stored[k + 1:], dtype=np.int64)) for k in range(len(stored))]
        axes = [self._layout.index(a) for a in range(len(self._layout))]  # storage axis of each
        return tuple(c_order[k] for k in axes) + tuple(c_order[len(axes):])

    @property
    def element_type(self):
        """Taichi's `nd.element_type`: the scalar dtype of a scalar ndarray, else the element's
        tensor type (`.element_type()` its dtype, `.shape()` its shape as a list)."""
        return TensorType(tuple(self.comp_shape), self.dtype) if self.comp_shape else self.dtype

    def _element_type(self):
        """The dtype this ndarray was made with: a scalar dtype, or a vector / matrix type."""
        from ..types import MatrixType, VectorType
        cs = self.comp_shape
        if len(cs) == 1:
            return VectorType(cs[0], self.dtype)
        if len(cs) == 2:
            return MatrixType(cs[0], cs[1], self.dtype)
        return self.dtype

    def __deepcopy__(self, memo):
        """A new ndarray with this one's element type, shape and values, and copies of its
        `.grad` / `.dual` where it has them (Taichi's deep copy copies the values; its ndarrays
        keep no gradient to lose). Written out because the backend's buffer (a device allocation
        on GPUs) cannot be copied by `copy`, and a copy must not share this ndarray's id (launch
        plans and caches key on it)."""
        self._check_live()
        out = Ndarray(self._element_type(), self.shape, needs_grad=self.grad is not None,
                      needs_dual=self.dual is not None, layout=self._layout)
        out.copy_from(self)
        for mine, theirs in ((self.grad, out.grad), (self.dual, out.dual)):
            if mine is not None:
                theirs.copy_from(mine)
        memo[id(self)] = out
        return out

    # -- DLPack and __cuda_array_interface__ (spirad.data.dlpack_export) -----------------------
    # host-memory backends: the live memory (CPU) or a host copy (Vulkan, Metal); CUDA / AMDGPU:
    # the device memory itself, ordered after the work launched so far
    @_guard.locked
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self._check_live()
        from .dlpack_export import export_dlpack
        return export_dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self):
        from .dlpack_export import dlpack_device
        return dlpack_device(self)

    @property
    @_guard.locked
    def __cuda_array_interface__(self):
        self._check_live()
        from .dlpack_export import cuda_array_interface
        return cuda_array_interface(self)

    def __repr__(self):
        return f"<spirad ndarray {self.dtype} shape={self.shape}>"


_state.ALIAS_ARRAY = Ndarray._alias  # the runtime's internal buffers (spirad.runtime.state)


@api
def ndarray(dtype, shape, needs_grad=False, needs_dual=False, layout=None) -> Ndarray:
    """An ndarray of `dtype` and `shape` (kernel arguments whose shape may change between launches;
    fields have a fixed shape). `needs_grad` / `needs_dual` create `.grad` / `.dual`; `layout`:
    the axes in storage order (the module docstring)."""
    return Ndarray(dtype, shape, needs_grad, needs_dual=needs_dual, layout=layout)


def signature(a: Ndarray) -> tuple:
    """The type of ndarray argument `a` in a kernel's signature (compile and offline-cache key,
    `frontend.transformer`'s argument spec): the layout is part of it, so an ndarray of
    another layout compiles another program."""
    return ("ndarray", a.dtype, len(a.shape), a.comp_shape, a.needs_grad, a.needs_dual,
            a._layout)


def _integer_extents(shape):
    """`shape` when every extent is an integer (numpy's included); a float extent (`(1, 0.5)`)
    is refused, as Taichi refuses it, instead of being truncated to another shape."""
    extents = (shape,) if not isinstance(shape, (tuple, list)) else shape
    if not all(isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in extents):
        raise SpiradShapeError(f"{shape!r} is not a valid shape for ndarray: its extents must be "
                               f"non-negative integers")
    if any(s < 0 for s in extents):
        raise SpiradShapeError(f"{shape!r} is not a valid shape for ndarray: it has a negative "
                               f"extent")
    return shape
