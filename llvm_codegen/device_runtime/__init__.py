"""GPU runtimes for the LLVM side module's device code; they never import `kernel_ir`.

All three offer the same small interface (`spirad.backends.llvm_gpu` drives it):

    rt.alloc(nbytes) -> numpy uint8 array     zero-filled, host-addressable memory the device
                                              reads and writes (managed memory on a GPU); its
                                              address is the device pointer
    rt.load(code) -> module; module.function(symbol) -> fn
    rt.launch(fn, bufs_addr, args_addr, begin, end, nthreads, block)   enqueue (emu: run now)
    rt.synchronize()                          wait for everything enqueued
    rt.max_threads, rt.block                  the grid a launch may use, the block size

    cuda_runtime.CudaRuntime   ctypes on libcuda (cuModuleLoadData, cuLaunchKernel)
    hip_runtime.HipRuntime     ctypes on libamdhip64 (hipModuleLoadData, hipModuleLaunchKernel)
    emu_runtime.EmuRuntime     the GPU lowering JIT-compiled for the CPU: the same kernel entry,
                               thread-to-heap-row mapping and grid stride, the grid's threads
                               split over CPU worker threads

`DriverUnavailable` (a RuntimeError) says that no driver or device is present.
"""


class DriverUnavailable(RuntimeError):
    """No GPU driver / device: the message says what is missing."""
