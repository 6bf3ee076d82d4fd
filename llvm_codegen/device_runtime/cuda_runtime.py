"""CUDA through ctypes on the driver library `libcuda` (no toolkit needed at run time).

The device code is PTX (the driver JIT-compiles it for the device) or, when the device's
compute capability is one spirad assembled for, the cubin from `ptxas`. `CudaRuntime()` raises
`DriverUnavailable` without a driver or a device. Memory, stream and copies: `driver_base`.
"""
from __future__ import annotations

import ctypes

from . import DriverUnavailable
from .driver_base import GpuDriverRuntime

CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


class CudaRuntime(GpuDriverRuntime):
    kind = "CUDA"
    LIBS = ("libcuda.so.1", "libcuda.so")
    API = {"malloc": "cuMemAlloc_v2", "malloc_managed": "cuMemAllocManaged",
           "free": "cuMemFree_v2", "memset_async": "cuMemsetD8Async",
           "htod_async": "cuMemcpyHtoDAsync_v2", "dtoh": "cuMemcpyDtoH_v2",
           "stream_create": "cuStreamCreate", "stream_sync": "cuStreamSynchronize",
           "event_create": "cuEventCreate", "event_record": "cuEventRecord",
           "stream_wait_event": "cuStreamWaitEvent", "event_destroy": "cuEventDestroy_v2",
           "module_load": "cuModuleLoadData", "module_function": "cuModuleGetFunction",
           "launch": "cuLaunchKernel"}
    PAGEABLE_ASYNC_UPLOAD = True  # "host memory is copied to a staging buffer immediately"

    def _error_string(self, status, msg):
        self.lib.cuGetErrorString(ctypes.c_int(status), ctypes.byref(msg))

    def _host_alloc(self, ptr_ref, nbytes):
        return self.lib.cuMemAllocHost_v2(ctypes.byref(ptr_ref), ctypes.c_size_t(nbytes))

    def _host_free_fn(self):
        return self.lib.cuMemFreeHost

    def _setup(self):
        lib = self.lib
        st = lib.cuInit(0)
        if st != 0:
            raise DriverUnavailable(f"cuInit failed with error {st} (no CUDA device?)")
        n = ctypes.c_int()
        self.check(lib.cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
        if n.value < 1:
            raise DriverUnavailable("the CUDA driver sees no device")
        dev = ctypes.c_int()
        self.check(lib.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        self.ctx = ctypes.c_void_p()
        self.check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev), "context")
        self.check(lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

        def attr(a):
            v = ctypes.c_int()
            self.check(lib.cuDeviceGetAttribute(ctypes.byref(v), a, dev), "attribute")
            return v.value
        self.sms = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        self.max_threads = self.sms * attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)
        self.sm = f"sm_{attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)}" \
                  f"{attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)}"
        name = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName(name, 256, dev)
        self.name = name.value.decode(errors="replace")
