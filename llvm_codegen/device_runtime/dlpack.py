"""DLPack capsules made and read with ctypes (standard library only: the device check script
loads this file by path on a machine without numpy).

DLPack (https://dmlc.github.io/dlpack) hands a tensor between libraries as a PyCapsule holding
a `DLManagedTensor` (capsule name "dltensor") or, from version 1.0, a `DLManagedTensorVersioned`
("dltensor_versioned"). The consumer renames the capsule to "used_dltensor[_versioned]" and
calls the tensor's `deleter` when it no longer needs the memory; a capsule that nobody consumed
calls the deleter from its own destructor. numpy makes and reads host (kDLCPU) capsules only, so
GPU memory needs this module:

    export(ptr, shape, dtype, device, owner, versioned=False) -> capsule
        a capsule over `ptr` (C-contiguous, `shape`, `dtype` = (code, bits)) on `device` =
        (device type, id); `owner` is kept alive until the consumer's deleter runs
    consume(capsule) -> Imported
        the tensor of a capsule (data pointer with its byte offset applied, shape, strides or
        None, dtype, device, read-only flag); the capsule is marked used and `Imported.release()`
        (also run when the Imported is collected) calls its deleter

Device types: `CPU` 1, `CUDA` 2, `CUDA_HOST` 3, `ROCM` 10, `CUDA_MANAGED` 13. Type codes:
`INT` 0, `UINT` 1, `FLOAT` 2, `BOOL` 6.
"""
from __future__ import annotations

import ctypes
import threading

CPU, CUDA, CUDA_HOST, ROCM, CUDA_MANAGED = 1, 2, 3, 10, 13
INT, UINT, FLOAT, BOOL = 0, 1, 2, 6
FLAG_READ_ONLY, FLAG_IS_COPIED = 1, 2

_NAME = b"dltensor"
_USED = b"used_dltensor"
_NAME_V = b"dltensor_versioned"
_USED_V = b"used_dltensor_versioned"


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DELETER_V = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", DELETER_V), ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]

_api = ctypes.pythonapi
_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = (ctypes.c_void_p, ctypes.c_char_p, _DESTRUCTOR)
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = (ctypes.c_void_p, ctypes.c_char_p)
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = (ctypes.c_void_p, ctypes.c_char_p)
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = (ctypes.c_void_p, ctypes.c_char_p)

_lock = threading.Lock()
_live: dict = {}   # address of an exported managed tensor -> what it keeps alive


def _release_export(addr: int) -> None:
    with _lock:
        _live.pop(addr, None)


@DELETER
def _deleter(mt):
    _release_export(ctypes.cast(mt, ctypes.c_void_p).value)


@DELETER_V
def _deleter_v(mt):
    _release_export(ctypes.cast(mt, ctypes.c_void_p).value)


@_DESTRUCTOR
def _capsule_destructor(cap):
    """An unconsumed capsule: release what it exported (a consumed one is renamed)."""
    for name in (_NAME, _NAME_V):
        if _api.PyCapsule_IsValid(cap, name):
            _release_export(_api.PyCapsule_GetPointer(cap, name))


def export(ptr: int, shape, dtype, device, owner=None, versioned: bool = False,
           read_only: bool = False):
    """A DLPack capsule over `ptr` (see the module docstring)."""
    shape = [int(s) for s in shape]
    shp = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    mt = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    t = mt.dl_tensor
    t.data = ctypes.c_void_p(int(ptr))
    t.device = DLDevice(int(device[0]), int(device[1]))
    t.ndim = len(shape)
    t.dtype = DLDataType(int(dtype[0]), int(dtype[1]), 1)
    t.shape = ctypes.cast(shp, ctypes.POINTER(ctypes.c_int64))
    t.strides = None   # compact row-major
    t.byte_offset = 0
    if versioned:
        mt.version = DLPackVersion(1, 0)
        mt.deleter = _deleter_v
        mt.flags = FLAG_READ_ONLY if read_only else 0
    else:
        mt.deleter = _deleter
    addr = ctypes.addressof(mt)
    with _lock:
        _live[addr] = (mt, shp, owner)
    return _api.PyCapsule_New(addr, _NAME_V if versioned else _NAME, _capsule_destructor)


def exported_count() -> int:
    """Capsules exported whose memory no consumer has released yet (tests)."""
    return len(_live)


class Imported:
    """A consumed capsule's tensor; `release()` (once) calls the producer's deleter."""

    def __init__(self, mt_ptr, versioned: bool):
        self._mt = mt_ptr
        self._versioned = versioned
        mt = mt_ptr.contents
        t = mt.dl_tensor
        self.ptr = (t.data or 0) + int(t.byte_offset)
        self.device = (int(t.device.device_type), int(t.device.device_id))
        self.dtype = (int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes))
        self.shape = tuple(int(t.shape[k]) for k in range(t.ndim))
        self.strides = (tuple(int(t.strides[k]) for k in range(t.ndim)) if t.strides else None)
        self.read_only = bool(versioned and mt.flags & FLAG_READ_ONLY)
        self._lock = threading.Lock()

    def is_c_contiguous(self) -> bool:
        """Row-major and compact (strides in elements; size-1 axes may have any stride)."""
        if self.strides is None:
            return True
        want = 1
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != want:
                return False
            want *= n
        return True

    def release(self) -> None:
        with self._lock:
            mt, self._mt = self._mt, None
        if mt is not None and mt.contents.deleter:
            mt.contents.deleter(mt)

    def __del__(self):
        try:
            self.release()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def consume(capsule) -> Imported:
    """The tensor of a DLPack capsule, marking the capsule used (see the module docstring)."""
    if not isinstance(capsule, object) or type(capsule).__name__ != "PyCapsule":
        raise TypeError(f"expected a DLPack capsule, got {type(capsule).__name__}")
    cap = id(capsule)  # the capsule object's address (CPython); `capsule` keeps it alive here
    for name, used, mtype, versioned in ((_NAME_V, _USED_V, DLManagedTensorVersioned, True),
                                         (_NAME, _USED, DLManagedTensor, False)):
        if _api.PyCapsule_IsValid(cap, name):
            addr = _api.PyCapsule_GetPointer(cap, name)
            if versioned:
                mt = ctypes.cast(addr, ctypes.POINTER(DLManagedTensorVersioned))
                if mt.contents.version.major != 1:
                    raise BufferError(f"DLPack version {mt.contents.version.major}."
                                      f"{mt.contents.version.minor} is not supported (1.x is)")
            else:
                mt = ctypes.cast(addr, ctypes.POINTER(mtype))
            _api.PyCapsule_SetName(cap, used)
            return Imported(mt, versioned)
    raise BufferError("not a DLPack capsule, or one already consumed")
