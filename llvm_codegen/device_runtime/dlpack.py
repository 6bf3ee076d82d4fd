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

# private prototypes (setting argtypes on `ctypes.pythonapi`'s shared functions would change
# them for every other user in the process)
_PY = ctypes.pythonapi
_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_void_p)(("PyCapsule_New", _PY))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _PY))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _PY))
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_SetName", _PY))

_lock = threading.Lock()
_live: dict = {}   # address of an exported managed tensor -> (structs, owner, released flag)
MANAGER_CTX_OFFSET = DLManagedTensor.manager_ctx.offset
MANAGER_CTX_OFFSET_V = DLManagedTensorVersioned.manager_ctx.offset

# A consumer calls the deleter, and a capsule nobody consumed calls its destructor, possibly
# while a Python exception is set (numpy refusing a GPU capsule drops it right after raising):
# Python code must not run then. So each export's `manager_ctx` points at a flag word; the
# deleter only sets it, and `sweep` (at every export) drops the flagged exports. Native
# deleter / destructor functions (`use_native`; spirad compiles them with llvmlite:
# `dlpack_native`) are safe everywhere; the ctypes callbacks below are the stdlib fallback,
# right wherever the consumer drops the capsule without an exception set.
_native = None  # (destructor, deleter, versioned deleter) addresses


def use_native(destructor: int, deleter: int, deleter_v: int) -> None:
    """Install native deleter / destructor functions (see above) for later exports."""
    global _native
    _native = (int(destructor), int(deleter), int(deleter_v))


def _set_flag(ctx) -> None:
    if ctx:
        ctypes.c_int32.from_address(ctx).value = 1


@DELETER
def _deleter(mt):
    _set_flag(mt.contents.manager_ctx)


@DELETER_V
def _deleter_v(mt):
    _set_flag(mt.contents.manager_ctx)


@_DESTRUCTOR
def _capsule_destructor(cap):
    """An unconsumed capsule releases its export (a consumed one was renamed)."""
    if _capsule_is_valid(cap, _NAME):
        _deleter(ctypes.cast(_capsule_pointer(cap, _NAME), ctypes.POINTER(DLManagedTensor)))
    elif _capsule_is_valid(cap, _NAME_V):
        _deleter_v(ctypes.cast(_capsule_pointer(cap, _NAME_V),
                               ctypes.POINTER(DLManagedTensorVersioned)))


def sweep() -> None:
    """Drop the exports whose consumer has released them (their owners may be freed now)."""
    with _lock:
        done = [a for a, e in _live.items() if e[3].value]
        for a in done:
            del _live[a]


def export(ptr: int, shape, dtype, device, owner=None, versioned: bool = False,
           read_only: bool = False, strides=None):
    """A DLPack capsule over `ptr` (see the module docstring); `strides` (in elements, per
    axis): a strided view, None: compact row-major."""
    sweep()
    shape = [int(s) for s in shape]
    shp = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    std = None if strides is None else (ctypes.c_int64 * max(len(shape), 1))(*strides)
    flag = ctypes.c_int32(0)
    mt = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    t = mt.dl_tensor
    t.data = ctypes.c_void_p(int(ptr))
    t.device = DLDevice(int(device[0]), int(device[1]))
    t.ndim = len(shape)
    t.dtype = DLDataType(int(dtype[0]), int(dtype[1]), 1)
    t.shape = ctypes.cast(shp, ctypes.POINTER(ctypes.c_int64))
    t.strides = None if std is None else ctypes.cast(std, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    mt.manager_ctx = ctypes.addressof(flag)
    if versioned:
        mt.version = DLPackVersion(1, 0)
        mt.flags = FLAG_READ_ONLY if read_only else 0
    if _native is not None:
        destructor = _native[0]
        mt.deleter = ctypes.cast(_native[2 if versioned else 1], DELETER_V if versioned else DELETER)
    else:
        destructor = ctypes.cast(_capsule_destructor, ctypes.c_void_p).value
        mt.deleter = _deleter_v if versioned else _deleter
    addr = ctypes.addressof(mt)
    with _lock:
        _live[addr] = (mt, shp, owner, flag, std)
    return _capsule_new(addr, _NAME_V if versioned else _NAME, destructor)


def exported_count() -> int:
    """Capsules exported whose memory no consumer has released yet (tests)."""
    return len(exported())


def exported() -> set:
    """Addresses of the managed tensors of those capsules (tests)."""
    sweep()
    with _lock:
        return set(_live)


class Imported:
    """A consumed capsule's tensor; `release()` (once) calls the producer's deleter."""

    def __init__(self, mt_ptr, versioned: bool):
        self._mt = mt_ptr
        self._versioned = versioned
        self.address = ctypes.cast(mt_ptr, ctypes.c_void_p).value  # of the managed tensor
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
    if type(capsule).__name__ != "PyCapsule":
        raise TypeError(f"expected a DLPack capsule, got {type(capsule).__name__}")
    cap = id(capsule)  # the capsule object's address (CPython); `capsule` keeps it alive here
    for name, used, mtype, versioned in ((_NAME_V, _USED_V, DLManagedTensorVersioned, True),
                                         (_NAME, _USED, DLManagedTensor, False)):
        if _capsule_is_valid(cap, name):
            addr = _capsule_pointer(cap, name)
            if versioned:
                mt = ctypes.cast(addr, ctypes.POINTER(DLManagedTensorVersioned))
                if mt.contents.version.major != 1:
                    raise BufferError(f"DLPack version {mt.contents.version.major}."
                                      f"{mt.contents.version.minor} is not supported (1.x is)")
            else:
                mt = ctypes.cast(addr, ctypes.POINTER(mtype))
            _capsule_set_name(cap, used)
            return Imported(mt, versioned)
    raise BufferError("not a DLPack capsule, or one already consumed")
