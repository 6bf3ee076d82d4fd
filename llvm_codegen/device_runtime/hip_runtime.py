"""AMD GPUs through ctypes on the HIP runtime library `libamdhip64` (ROCm).

The device code is the HSA code object that `ld.lld` linked for the device's gfx target.
`HipRuntime()` raises `DriverUnavailable` without ROCm or a device. Memory, stream and
copies: `driver_base`. The grid is a fixed
`max_threads` (grid-stride loops cover any range), since the device attribute numbering
differs between ROCm releases.
"""
from __future__ import annotations

import ctypes

from . import DriverUnavailable
from .driver_base import GpuDriverRuntime


class HipRuntime(GpuDriverRuntime):
    kind = "HIP"
    LIBS = ("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5")
    API = {"malloc": "hipMalloc", "malloc_managed": "hipMallocManaged", "free": "hipFree",
           "memset_async": "hipMemsetAsync", "htod_async": "hipMemcpyHtoDAsync",
           "dtoh": "hipMemcpyDtoH", "stream_create": "hipStreamCreateWithFlags",
           "stream_sync": "hipStreamSynchronize", "event_create": "hipEventCreateWithFlags",
           "event_record": "hipEventRecord", "stream_wait_event": "hipStreamWaitEvent",
           "event_destroy": "hipEventDestroy", "module_load": "hipModuleLoadData",
           "module_function": "hipModuleGetFunction", "launch": "hipModuleLaunchKernel"}

    def _error_string(self, status, msg):
        self.lib.hipGetErrorString.restype = ctypes.c_char_p
        msg.value = self.lib.hipGetErrorString(ctypes.c_int(status))

    def _host_alloc(self, ptr_ref, nbytes):
        return self.lib.hipHostMalloc(ctypes.byref(ptr_ref), ctypes.c_size_t(nbytes),
                                      ctypes.c_uint(0))

    def _host_free_fn(self):
        return self.lib.hipHostFree

    def _memset_value(self, byte):
        return ctypes.c_int(byte)

    def _setup(self):
        lib = self.lib
        st = lib.hipInit(0)
        if st != 0:
            raise DriverUnavailable(f"hipInit failed with error {st} (no AMD GPU?)")
        n = ctypes.c_int()
        if lib.hipGetDeviceCount(ctypes.byref(n)) != 0 or n.value < 1:
            raise DriverUnavailable("HIP sees no device")
        self.check(lib.hipSetDevice(0), "hipSetDevice")
        self.max_threads = 256 * 1024
        self.gfx = None  # the code object for every target is loaded until one succeeds
        self.name = "HIP device 0"
