"""What the CUDA and HIP runtimes share: a driver library opened with ctypes, managed memory as
numpy arrays, modules, asynchronous launches on the default stream.

A subclass names the library and its entry points (`_API`); every call's status is checked and
turned into a RuntimeError with the driver's own message. Memory is managed (unified) memory:
the host reads and writes it directly once the device is idle, so a numpy array over it is a
field's storage on both sides; it is freed when the last numpy view of it goes away.
"""
from __future__ import annotations

import ctypes
import weakref

import numpy as np

from . import DriverUnavailable



class GpuDriverRuntime:
    LIBS: tuple = ()
    PREFIX = ""
    API: dict = {}  # role -> symbol: init, malloc_managed, memset, free, module_load,
    #                  module_function, launch, synchronize, error_string
    kind = ""

    def __init__(self):
        self.lib = self._open()
        self._modules = []
        self.block = 256
        self._setup()

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

    # -- memory -----------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> np.ndarray:
        n = max(int(nbytes), 8)
        ptr = ctypes.c_void_p()
        self.check(self._fn("malloc_managed")(ctypes.byref(ptr), ctypes.c_size_t(n),
                                             ctypes.c_uint(1)), "managed allocation")
        self.check(self._fn("memset")(ptr, ctypes.c_int(0), ctypes.c_size_t(n))
                   if self.kind == "HIP" else
                   self._fn("memset")(ptr, ctypes.c_ubyte(0), ctypes.c_size_t(n)), "memset")
        self.synchronize()
        raw = (ctypes.c_uint8 * n).from_address(ptr.value)
        weakref.finalize(raw, self._fn("free"), ctypes.c_void_p(ptr.value))
        return np.ctypeslib.as_array(raw)

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
        self.check(self._fn("launch")(fn, ctypes.c_uint(grid), ctypes.c_uint(1), ctypes.c_uint(1),
                                      ctypes.c_uint(block), ctypes.c_uint(1), ctypes.c_uint(1),
                                      ctypes.c_uint(0), None, params, None), "kernel launch")
        # the driver copies the parameter values at launch time: `vals` may go now

    def synchronize(self):
        self.check(self._fn("synchronize")(), "synchronize")

    def close(self):
        pass


class _Module:
    def __init__(self, fns):
        self._fns = fns

    def function(self, symbol):
        return self._fns[symbol]
