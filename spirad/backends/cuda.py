"""CUDA backend (`sd.cuda`): the LLVM side module's NVPTX lowering (`llvm_gpu`), PTX assembled
for sm_80 and sm_90, launched through libcuda; `SPIRAD_CUDA_EMULATE=1` runs the same lowering on
the CPU (docs/gpu.md)."""
from __future__ import annotations

from .llvm_gpu import LlvmGpuBackend


class CudaBackend(LlvmGpuBackend):
    name = "cuda"
    EMULATE_ENV = "SPIRAD_CUDA_EMULATE"
    DLPACK_DEVICE = 2     # kDLCUDA
    DEFAULT_STREAM = 1    # DLPack: None means the legacy default stream (CU_STREAM_LEGACY)

    @classmethod
    def runtime_class(cls):
        from llvm_codegen.device_runtime.cuda_runtime import CudaRuntime
        return CudaRuntime

    def load_device_code(self, codes, symbols):
        """The cubin assembled for the device's own arch, else the PTX of the newest target the
        device can run (the driver JIT-compiles it)."""
        sm = self.rt.sm
        code = codes.get(sm)
        if code is not None and code.cubin:
            return self.rt.load(code.cubin, symbols)
        ok = [c for name, c in codes.items() if int(name[3:]) <= int(sm[3:])] or list(codes.values())
        return self.rt.load(ok[-1].image, symbols)


Backend = CudaBackend
