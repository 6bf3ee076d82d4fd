"""GPU runtimes for the LLVM side module's device code; they never import `kernel_ir`.

All three offer the same small interface (`spirad.backends.llvm_gpu` drives it). Everything
that touches the device is *stream ordered*: it is queued on the runtime's one stream and runs
after everything queued before it; only `download` and `synchronize` wait for the device.

    rt.alloc(nbytes) -> DeviceBuffer          device memory, zero-filled in stream order; the
                                              host cannot address it (`host` is None)
    rt.alloc_managed(nbytes) -> DeviceBuffer  managed (unified) memory with a host view `host`
                                              (valid to touch only while the device is idle)
    rt.upload(ptr, data)                      copy a uint8 numpy array to device memory at
                                              `ptr`, in stream order; `data` may be reused as
                                              soon as this returns (the runtime stages it)
    rt.download(ptr, nbytes) -> numpy uint8   wait for the stream, then the bytes at `ptr`
    rt.memset(ptr, byte, nbytes)              fill, in stream order
    rt.wrap(ptr, nbytes, owner) -> DeviceBuffer  another library's device memory, `owner` kept
                                              alive until the work queued with it has run
    rt.load(code) -> module; module.function(symbol) -> fn
    rt.launch(fn, bufs_addr, args_addr, begin, end, nthreads, block)   in stream order
    rt.synchronize()                          wait for everything queued
    rt.stream                                 the stream's handle (an int), what DLPack /
                                              `__cuda_array_interface__` name
    rt.wait_for(stream) / rt.signal(stream)   order our stream after another one's work so far /
                                              another one after ours (events; no host wait)
    rt.max_threads, rt.block                  the grid a launch may use, the block size
    rt.waits                                  how often the host waited for the device (tests,
                                              benchmarks: a launch path that never waits keeps
                                              it unchanged)

    cuda_runtime.CudaRuntime   ctypes on libcuda (cuMemAlloc, cuMemcpy*Async, cuLaunchKernel)
    hip_runtime.HipRuntime     ctypes on libamdhip64 (hipMalloc, hipMemcpy*Async, ...)
    emu_runtime.EmuRuntime     the GPU lowering JIT-compiled for the CPU, with a queue for the
                               stream and device memory the host reaches only through copies

Memory a `DeviceBuffer` owns is released once it is unreachable *and* the stream has run what
was queued before (freed at the next synchronize), so queued work never touches freed memory.
`DriverUnavailable` (a RuntimeError) says that no driver or device is present.
"""


class DriverUnavailable(RuntimeError):
    """No GPU driver / device: the message says what is missing."""


class DeviceBuffer:
    """A block of device memory: `ptr` (its device address), `nbytes`, `host` (a numpy uint8
    array over the same memory for managed memory, else None) and `owner` (what keeps foreign
    memory alive: a tensor, a DLPack capsule)."""
    __slots__ = ("ptr", "nbytes", "host", "owner", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, host=None, owner=None):
        self.ptr, self.nbytes, self.host, self.owner = int(ptr), int(nbytes), host, owner

    def __repr__(self):
        kind = "managed" if self.host is not None else ("foreign" if self.owner is not None
                                                         else "device")
        return f"<DeviceBuffer {kind} {self.nbytes} B at {self.ptr:#x}>"
