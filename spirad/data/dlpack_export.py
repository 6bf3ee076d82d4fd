"""DLPack and `__cuda_array_interface__` out of `sd.ndarray` (`Ndarray.__dlpack__`,
`__dlpack_device__`, `__cuda_array_interface__` call these; nothing here imports `Ndarray`).

On CUDA / AMDGPU the export is the device memory itself, with DLPack's CUDA / ROCm device type,
after ordering the consumer's stream after the work launched so far (no host wait); a host copy
where the consumer asks for one (`dl_device=(1, 0)`, e.g. `np.from_dlpack(nd, device="cpu")`).
Host-memory backends export host memory: zero-copy on the CPU, a host copy on Vulkan / Metal
(`copy=False` then raises BufferError). `__cuda_array_interface__` exists on arch=cuda only.
"""
from __future__ import annotations

import numpy as np

from llvm_codegen.device_runtime import dlpack as DL

from ..runtime import state as _state

DL_TO_NP = {(DL.FLOAT, 32): np.float32, (DL.FLOAT, 64): np.float64, (DL.INT, 32): np.int32,
            (DL.INT, 64): np.int64, (DL.UINT, 32): np.uint32, (DL.INT, 8): np.int8,
            (DL.UINT, 8): np.uint8, (DL.BOOL, 8): np.bool_, (DL.FLOAT, 16): np.float16,
            (DL.INT, 16): np.int16}
_NP_TO_DL = {np.dtype(v): k for k, v in DL_TO_NP.items()}
_NATIVE = []


def _native_dlpack():
    """Native deleter / destructor for the capsules we make (`dlpack_native`), once."""
    if not _NATIVE:
        from llvm_codegen.device_runtime import dlpack_native
        _NATIVE.append(dlpack_native.install())


def dlpack_device(nd) -> tuple:
    """`Ndarray.__dlpack_device__`: the backend's device (host memory: (1, 0))."""
    return tuple(_state.backend().dlpack_device())


def export_dlpack(nd, stream=None, max_version=None, dl_device=None, copy=None):
    """`Ndarray.__dlpack__`: the live memory on host-memory backends (zero-copy), a host copy on
    other host-exporting backends (`copy=False` then raises BufferError), the device memory
    itself on CUDA / AMDGPU (a host copy where `dl_device=(1, 0)` asks for one)."""
    be = _state.backend()
    dev = tuple(be.dlpack_device())
    want = None if dl_device is None else (int(dl_device[0]), int(dl_device[1]))
    if dev[0] == DL.CPU or want == (DL.CPU, 0):
        return _host_dlpack(nd, be, stream, max_version, want, copy)
    if want is not None and want != dev:
        raise BufferError(f"this sd.ndarray lives on DLPack device {dev}; it cannot be exported "
                          f"to {want}")
    code = _NP_TO_DL.get(np.dtype(nd.dtype.np))
    if code is None:
        raise BufferError(f"dtype {nd.dtype} has no DLPack equivalent")
    storage = nd._storage()
    if copy:  # a new buffer with the same contents (a host round trip: rare)
        fresh = be.allocate(storage.nbytes)
        be.write(fresh, be.read(storage, storage.nbytes))
        storage = fresh
    if stream != -1:
        be.order_before(stream)
    versioned = max_version is not None and tuple(max_version) >= (1, 0)
    _native_dlpack()
    return DL.export(storage.ptr, nd.full_shape, code, dev, owner=storage, versioned=versioned,
                     read_only=False, strides=nd._element_strides())


def _host_dlpack(nd, be, stream, max_version, dl_device, copy):
    if be.host_storage(nd._storage()) is not None:
        view = nd._zero_copy_view() if nd.layout is not None else None  # `layout=`: strided
        view = nd._view() if view is None else view
    elif copy is False:
        raise BufferError(f"this sd.ndarray lives in {be.name} device memory, which DLPack cannot "
                          f"export to the host without a copy; pass copy=None (or call "
                          f"to_numpy())")
    else:
        if copy is None and dl_device is None:  # not asked for: say so
            from ..tracebacks import warn_user
            warn_user(f"this sd.ndarray lives in {be.name} device memory: DLPack exported a "
                      f"host copy (later kernel writes do not reach it; on the CPU backend "
                      f"DLPack shares the memory)")
        view, copy = nd.to_numpy(), None
    kw = {"stream": None if dl_device is not None else stream}
    if max_version is not None:
        kw["max_version"] = max_version
    if dl_device is not None:
        kw["dl_device"] = dl_device
    if copy is not None:
        kw["copy"] = copy
    return view.__dlpack__(**kw)


def cuda_array_interface(nd) -> dict:
    """`Ndarray.__cuda_array_interface__` (version 3) on arch=cuda: the device memory, with our
    stream, which a consumer orders itself after; AttributeError elsewhere (so `hasattr` is
    False)."""
    be = _state.backend()
    if be.dlpack_device()[0] != DL.CUDA:
        raise AttributeError(f"__cuda_array_interface__: this sd.ndarray lives in {be.name} "
                             f"memory, not CUDA device memory")
    stream = be.dlpack_stream()
    be.order_before(stream)  # emulated: consumers are host code, so the queue runs
    strides = nd._element_strides()
    return {"shape": tuple(nd.full_shape), "typestr": np.dtype(nd.dtype.np).str,
            "data": (nd._storage().ptr, False), "version": 3,
            "strides": None if strides is None else tuple(s * nd.dtype.nbytes for s in strides),
            "stream": stream}
