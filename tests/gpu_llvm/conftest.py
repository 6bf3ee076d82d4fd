"""These tests run the LLVM GPU archs through their emulation (a device, when present, is left
to the arch-parametrised suite): SPIRAD_CUDA_EMULATE / SPIRAD_AMDGPU_EMULATE are set here."""
import pytest

from tests.support.archs import arch_or_skip

EMULATE = {"cuda": "SPIRAD_CUDA_EMULATE", "amdgpu": "SPIRAD_AMDGPU_EMULATE"}


@pytest.fixture(params=["cuda", "amdgpu"], ids=["arch=cuda", "arch=amdgpu"])
def gpu_arch(request, monkeypatch):
    monkeypatch.setenv(EMULATE[request.param], "1")
    arch_or_skip(request.param)
    return request.param
