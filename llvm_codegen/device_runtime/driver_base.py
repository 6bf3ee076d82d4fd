"""What the CUDA and HIP runtimes share: a driver library opened with ctypes, device memory,
one stream, asynchronous copies and launches (the interface: `device_runtime/__init__.py`).

A subclass names the library and its entry points (`API`, role -> symbol; the roles whose
argument lists differ between CUDA and HIP are wrapped by the subclass); every call's status is
checked and turned into a RuntimeError with the driver's own message.

* Memory: `alloc` is device memory (`cuMemAlloc` / `hipMalloc`), zeroed by an asynchronous
  memset on the stream; `alloc_managed` is managed memory with a host view (only where a user
  asks for it). Freed memory goes to a list that `synchronize` frees once the stream has run
  the work queued before, so no queued launch ever reads freed memory.
* The stream: one per runtime, created *blocking* (flags 0): the legacy default stream, where
  PyTorch runs unless told otherwise, orders itself after our work and ours after its work
  without any event. Other streams are ordered with events (`wait_for`, `signal`).
* Uploads: small ones are copied into a pinned staging ring and queued from there (the ring is
  reused after the next synchronize); large ones are queued from pageable memory on CUDA (the
  driver stages them before returning) and from a pinned copy on HIP.
* Downloads: wait for the stream, then a plain copy.
"""
from __future__ import annotations

import ctypes
import weakref

import numpy as np

from . import DeviceBuffer, DriverUnavailable

STAGING_BYTES = 1 << 22       # pinned staging ring for small uploads
DIRECT_UPLOAD = 1 << 20       # uploads at least this large bypass the ring
EVENT_DISABLE_TIMING = 2      # CU_EVENT_DISABLE_TIMING == hipEventDisableTiming


class GpuDriverRuntime:
    LIBS: tuple = ()
    API: dict = {}  # role -> symbol: malloc, malloc_managed, free, memset_async, htod_async,
    #                  dtoh, stream_create, stream_sync, event_create, event_record,
    #                  stream_wait_event, event_destroy, module_load, module_function, launch
    kind = ""
    PAGEABLE_ASYNC_UPLOAD = False  # the driver stages pageable memory in an async copy (CUDA)

    def __init__(self):
        self.lib = self._open()
        self._modules = []
        self.block = 256
        self.waits = 0
        self._released = []      # (free function, pointer, bytes) of memory unreachable since the last sync
        self.released_bytes = 0  # their bytes: the backend syncs past a limit (llvm_gpu.allocate)
        self._keep = []          # pinned copies of large uploads, until the next sync
        self._queued = False     # work queued since the last synchronize
        self._setup()
        s = ctypes.c_void_p()
        self.check(self._fn("stream_create")(ctypes.byref(s), ctypes.c_uint(0)), "stream create")
        self._stream = s
        self.stream = int(s.value or 0)
        self._ring = self._pinned(STAGING_BYTES)
        self._ring_used = 0

    @classmethod
    def _open(cls):
        errors = []
        for name in cls.LIBS:
            try:
                return ctypes.CDLL(name)
            except OSError as e:
                errors.append(str(e))
        raise DriverUnavailable(f"no {cls.kind} driver library ({', '.join(cls.LIBS)}): "
                                f"{'; '.join(errors)}")

    def _fn(self, role):
        return getattr(self.lib, self.API[role])

    def check(self, status, what):
        if status != 0:
            msg = ctypes.c_char_p()
            try:
                self._error_string(status, msg)
                text = msg.value.decode() if msg.value else ""
            except Exception:  # noqa: BLE001 - the message is best effort
                text = ""
            raise RuntimeError(f"{self.kind} {what} failed with error {status} {text}".strip())

    def _error_string(self, status, msg):
        raise NotImplementedError

    def _setup(self):
        raise NotImplementedError

    def _host_alloc(self, ptr_ref, nbytes: int) -> int:
        """Allocate `nbytes` of pinned host memory into `ptr_ref` (the subclass' call)."""
        raise NotImplementedError

    def _host_free_fn(self):
        raise NotImplementedError

    # -- memory -----------------------------------------------------------------------------------
    def _release_later(self, free, ptr, nbytes: int = 0):
        self._released.append((free, ptr, nbytes))
        self.released_bytes += nbytes

    def alloc(self, nbytes: int) -> DeviceBuffer:
        n = max(int(nbytes), 8)
        ptr = ctypes.c_void_p()
        self.check(self._fn("malloc")(ctypes.byref(ptr), ctypes.c_size_t(n)), "device allocation")
        buf = DeviceBuffer(ptr.value, n)
        weakref.finalize(buf, self._release_later, self._fn("free"), ctypes.c_void_p(ptr.value), n)
        self.memset(buf.ptr, 0, n)
        return buf

    def alloc_managed(self, nbytes: int) -> DeviceBuffer:
        n = max(int(nbytes), 8)
        ptr = ctypes.c_void_p()
        self.check(self._fn("malloc_managed")(ctypes.byref(ptr), ctypes.c_size_t(n),
                                             ctypes.c_uint(1)), "managed allocation")
        self.memset(ptr.value, 0, n)
        self.synchronize()
        host = np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(ptr.value))
        buf = DeviceBuffer(ptr.value, n, host=host)
        weakref.finalize(buf, self._release_later, self._fn("free"), ctypes.c_void_p(ptr.value), n)
        return buf

    def wrap(self, ptr: int, nbytes: int, owner) -> DeviceBuffer:
        """Another library's memory (`owner` keeps it alive, then until queued work has run)."""
        buf = DeviceBuffer(ptr, nbytes, owner=owner)
        weakref.finalize(buf, self._release_later, None, owner)
        return buf

    def _pinned(self, nbytes: int) -> np.ndarray:
        ptr = ctypes.c_void_p()
        self.check(self._host_alloc(ptr, nbytes), "pinned host allocation")
        arr = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(ptr.value))
        weakref.finalize(arr, self._release_later, self._host_free_fn(), ctypes.c_void_p(ptr.value))
        return arr

    def memset(self, ptr: int, byte: int, nbytes: int) -> None:
        self._queued = True
        self.check(self._fn("memset_async")(ctypes.c_void_p(ptr), self._memset_value(byte),
                                           ctypes.c_size_t(nbytes), self._stream), "memset")

    def _memset_value(self, byte):
        return ctypes.c_ubyte(byte)

    def upload(self, ptr: int, data) -> None:
        src = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        n = src.nbytes
        if not n:
            return
        if n >= DIRECT_UPLOAD or n > self._ring.nbytes - self._ring_used:
            if self.PAGEABLE_ASYNC_UPLOAD:
                staged = src  # the driver stages pageable memory before the call returns
            else:
                staged = self._pinned(n)
                staged[:] = src
                self._keep.append(staged)
        else:
            off = self._ring_used
            staged = self._ring[off:off + n]
            staged[:] = src
            self._ring_used = (off + n + 255) & ~255
        self._queued = True
        self.check(self._fn("htod_async")(ctypes.c_void_p(ptr), ctypes.c_void_p(staged.ctypes.data),
                                         ctypes.c_size_t(n), self._stream), "upload")

    def download(self, ptr: int, nbytes: int) -> np.ndarray:
        self.synchronize()
        out = np.empty(int(nbytes), np.uint8)
        if nbytes:
            self.check(self._fn("dtoh")(ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(ptr),
                                        ctypes.c_size_t(int(nbytes))), "download")
        return out

    # -- code -------------------------------------------------------------------------------------
    def load(self, image: bytes, symbols):
        mod = ctypes.c_void_p()
        buf = ctypes.create_string_buffer(image, len(image))
        self.check(self._fn("module_load")(ctypes.byref(mod), buf), "module load")
        self._modules.append(mod)
        fns = {}
        for s in symbols:
            f = ctypes.c_void_p()
            self.check(self._fn("module_function")(ctypes.byref(f), mod, s.encode()),
                       f"function lookup {s}")
            fns[s] = f
        return _Module(fns)

    def launch(self, fn, bufs_addr, args_addr, begin, end, nthreads, block):
        vals = (ctypes.c_void_p(bufs_addr), ctypes.c_void_p(args_addr), ctypes.c_int32(begin),
                ctypes.c_int32(end), ctypes.c_int32(nthreads), ctypes.c_int32(block))
        params = (ctypes.c_void_p * 6)(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p)
                                         for v in vals])
        grid = -(-nthreads // block)
        self._queued = True
        self.check(self._fn("launch")(fn, ctypes.c_uint(grid), ctypes.c_uint(1), ctypes.c_uint(1),
                                      ctypes.c_uint(block), ctypes.c_uint(1), ctypes.c_uint(1),
                                      ctypes.c_uint(0), self._stream, params, None),
                   "kernel launch")
        # the driver copies the parameter values at launch time: `vals` may go now

    # -- the stream -------------------------------------------------------------------------------
    def synchronize(self):
        if not self._queued and not self._released:  # nothing since the last wait: idle
            return
        self._queued = False
        self.waits += 1
        freeable = len(self._released)
        self.check(self._fn("stream_sync")(self._stream), "synchronize")
        self._ring_used = 0
        self._keep.clear()
        done, self._released[:freeable] = self._released[:freeable], []
        for free, ptr, nbytes in done:
            self.released_bytes -= nbytes
            if free is not None:  # else a foreign owner: dropping it is enough
                free(ptr)

    def _event_between(self, first, then):
        """Make stream `then` wait for what stream `first` has queued so far (no host wait)."""
        ev = ctypes.c_void_p()
        self.check(self._fn("event_create")(ctypes.byref(ev), ctypes.c_uint(EVENT_DISABLE_TIMING)),
                   "event create")
        try:
            self.check(self._fn("event_record")(ev, first), "event record")
            self.check(self._fn("stream_wait_event")(then, ev, ctypes.c_uint(0)), "stream wait")
        finally:
            self._fn("event_destroy")(ev)  # released by the driver once it has completed

    def wait_for(self, stream: int) -> None:
        if int(stream) != self.stream:
            self._queued = True
            self._event_between(ctypes.c_void_p(int(stream) or None), self._stream)

    def signal(self, stream: int) -> None:
        if int(stream) != self.stream:
            self._event_between(self._stream, ctypes.c_void_p(int(stream) or None))

    def close(self):
        pass


class _Module:
    def __init__(self, fns):
        self._fns = fns

    def function(self, symbol):
        return self._fns[symbol]
