"""AMDGPU backend (`sd.amdgpu`): the LLVM side module's AMDGPU lowering (`llvm_gpu`), HSA code
objects linked for gfx90a and gfx1100, launched through the HIP runtime; `SPIRAD_AMDGPU_EMULATE=1`
runs the same lowering on the CPU (docs/gpu.md)."""
from __future__ import annotations

from .llvm_gpu import LlvmGpuBackend


class AmdgpuBackend(LlvmGpuBackend):
    name = "amdgpu"
    EMULATE_ENV = "SPIRAD_AMDGPU_EMULATE"
    DLPACK_DEVICE = 10    # kDLROCM
    DEFAULT_STREAM = 0    # DLPack: None means the null stream

    @classmethod
    def runtime_class(cls):
        from llvm_codegen.device_runtime.hip_runtime import HipRuntime
        return HipRuntime

    def load_device_code(self, codes, symbols):
        """The first code object the device accepts (HIP rejects another gfx's)."""
        errors = []
        for name, code in codes.items():
            try:
                return self.rt.load(code.image, symbols)
            except RuntimeError as e:
                errors.append(f"{name}: {e}")
        raise RuntimeError("no AMDGPU code object loads on this device: " + "; ".join(errors))


Backend = AmdgpuBackend
