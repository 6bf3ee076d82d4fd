"""Ndarrays: arrays passed to kernels as arguments (`types.ndarray()`), shape known at run time.

`needs_grad=True` gives an ndarray a `.grad` (reverse mode), `needs_dual=True` a `.dual` (forward
mode, `sd.ad.FwdMode`): companion ndarrays of the same shape bound with the argument.
"""
from __future__ import annotations

import numpy as np

from . import guard as _guard
from . import state as _state
from kernel_ir.errors import SpiradTypeError
from .field import _HostArray, check_elements, normalize_shape, resolve_dtype
from .tracebacks import api, api_class


@api_class
class Ndarray(_HostArray):
    """An array passed to kernels as an argument (`sd.types.ndarray()` parameters); its shape is
    known only at launch. Host access as for fields; `.grad` / `.dual` exist with
    `needs_grad=True` / `needs_dual=True`. DLPack: `torch.from_dlpack(nd)` /
    `np.from_dlpack(nd)`."""
    _kind = "ndarray"

    def __init__(self, dtype, shape, needs_grad=False, _is_grad=False, needs_dual=False):
        self.dtype, self.comp_shape = resolve_dtype(dtype)
        st = _state.current()
        self.id = st.new_id()
        self.epoch = st.epoch
        self.shape = normalize_shape(shape)
        check_elements(self.shape, self.comp_shape, "sd.ndarray", ndarray=True)
        self.generation = 0
        nbytes = int(np.prod(self.full_shape, dtype=np.int64)) * self.dtype.nbytes
        with _guard.LOCK:
            self._buf = _state.backend().allocate(nbytes)
        self.grad = None
        self.dual = None
        for flag, what in ((needs_grad, "grad"), (needs_dual, "dual")):
            if flag and not _is_grad:
                if not self.dtype.is_float:
                    raise SpiradTypeError(f"needs_{what}=True requires a float dtype, got {self.dtype}")
                setattr(self, what, Ndarray(dtype, shape, _is_grad=True))

    @classmethod
    def _alias(cls, storage, dtype, shape, comp_shape=None) -> "Ndarray":
        """Internal: an ndarray over existing backend memory `storage` (no allocation, no grad),
        e.g. a field's buffer read as int32 words by the GPU sizer kernel. `shape` must fit in
        the storage; the alias never owns or frees it. `comp_shape` overrides the element
        shape of `dtype` (a scalar dtype): a foreign array's alias (`spirad.interop.arrays`)."""
        self = cls.__new__(cls)
        self.dtype, self.comp_shape = resolve_dtype(dtype)
        if comp_shape is not None:
            self.comp_shape = tuple(comp_shape)
        st = _state.current()
        self.id = st.new_id()
        self.epoch = st.epoch
        self.shape = normalize_shape(shape)
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

    def _storage(self):
        return self._buf

    # -- DLPack (spirad.interop.arrays): zero-copy on host-memory backends, else a host copy --------
    @_guard.locked
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self._check_live()
        return _to_dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU: host memory (the live buffer, or a copy of a GPU buffer)

    def __repr__(self):
        return f"<spirad ndarray {self.dtype} shape={self.shape}>"


def _to_dlpack(nd, stream=None, max_version=None, dl_device=None, copy=None):
    """`Ndarray.__dlpack__`: the live memory on host-memory backends (zero-copy), else a host
    copy (GPU memory is not exported); `copy=False` on a GPU backend raises BufferError."""
    be = _state.backend()
    if be.host_storage(nd._storage()) is not None:
        view = nd._view()
    elif copy is False:
        raise BufferError(f"this sd.ndarray lives in {be.name} device memory, which DLPack cannot "
                          f"export without a copy; pass copy=None (or call to_numpy())")
    else:
        if copy is None:  # not asked for: say so
            from .tracebacks import warn_user
            warn_user(f"this sd.ndarray lives in {be.name} device memory: DLPack exported a "
                      f"host copy (later kernel writes do not reach it; on the CPU backend "
                      f"DLPack shares the memory)")
        view, copy = nd.to_numpy(), None
    kw = {"stream": stream}
    if max_version is not None:
        kw["max_version"] = max_version
    if dl_device is not None:
        kw["dl_device"] = dl_device
    if copy is not None:
        kw["copy"] = copy
    return view.__dlpack__(**kw)


@api
def ndarray(dtype, shape, needs_grad=False, needs_dual=False) -> Ndarray:
    """An ndarray of `dtype` and `shape` (kernel arguments whose shape may change between launches;
    fields have a fixed shape). `needs_grad` / `needs_dual` create `.grad` / `.dual`."""
    return Ndarray(dtype, shape, needs_grad, needs_dual=needs_dual)
