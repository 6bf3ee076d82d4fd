"""Without a driver, arch=cuda / arch=amdgpu are a clear SpiradArchError (unless emulated), and
sd.gpu never picks an emulation."""
import pytest

import spirad as sd
from spirad.backends import GPU_ORDER, backend_class, resolve_arch

EMULATE = {"cuda": "SPIRAD_CUDA_EMULATE", "amdgpu": "SPIRAD_AMDGPU_EMULATE"}


@pytest.mark.parametrize("arch", ["cuda", "amdgpu"])
def test_no_driver_is_an_arch_error(arch, monkeypatch):
    monkeypatch.delenv(EMULATE[arch], raising=False)
    cls = backend_class(arch)
    if cls.device_runtime() is not None:
        pytest.skip(f"a {arch} device is present")
    assert not cls.is_available()
    with pytest.raises(sd.SpiradArchError, match=f"arch={arch} is not available.*{EMULATE[arch]}=1"):
        sd.init(arch=arch)


@pytest.mark.parametrize("arch", ["cuda", "amdgpu"])
def test_runtime_without_driver_raises_driver_unavailable(arch):
    from llvm_codegen.device_runtime import DriverUnavailable
    cls = backend_class(arch)
    if cls.device_runtime() is not None:
        pytest.skip(f"a {arch} device is present")
    with pytest.raises(DriverUnavailable):
        cls.runtime_class()()


def test_gpu_order_and_emulations_are_not_picked(monkeypatch):
    assert GPU_ORDER == ("cuda", "amdgpu", "metal", "vulkan")
    for arch, var in EMULATE.items():
        monkeypatch.setenv(var, "1")
    for arch in EMULATE:
        if backend_class(arch).device_runtime() is not None:
            pytest.skip(f"a {arch} device is present")
    try:
        picked = resolve_arch("gpu")
    except sd.SpiradArchError:
        picked = None
    assert picked not in ("cuda", "amdgpu")
