"""Every program of the kernel set (plain, grad with heap adstacks, bounds-checked) is emitted
for all four device targets and assembled: PTX by ptxas for sm_80 and sm_90, AMDGPU objects
linked by `ld.lld --no-undefined` for gfx90a and gfx1100 (a failure raises, so fails the test).
Checked here: each target's image exists and exports every task's kernel."""
import pytest

import spirad as sd
from llvm_codegen.target import ARCH_TARGETS
from tests.gpu_llvm import kernels


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "bounds_checked"])
def test_kernel_set_assembles_for_every_target(gpu_arch, debug):
    sd.init(arch=gpu_arch, debug=debug, default_fp=sd.f64, default_ad_stack_size=16)
    with kernels.capture() as progs:
        kernels.run_forward(sd.f32)
        kernels.run_forward(sd.f64)
        kernels.run_grads(sd.f64)
    assert len(progs) >= 11  # 8 forward programs + 3 adjoints (plus helpers)
    assert any(s for p in progs for s in p.stacks)  # adstacks were among them
    for p in progs:
        assert sorted(p.device_code) == sorted(ARCH_TARGETS[gpu_arch])
        symbols = [p.device_code[t].symbols for t in p.device_code][0]
        for name, code in p.device_code.items():
            if gpu_arch == "cuda":
                ptx = code.image.decode().rstrip("\0")
                assert f".target {name}" in ptx
                assert ".extern .func" not in ptx  # every math call resolved in libdevice
                for s in symbols:
                    assert f".visible .entry {s}(" in ptx
                assert code.cubin[:4] == b"\x7fELF"
            else:
                assert code.kind == "hsaco" and code.image[:4] == b"\x7fELF"
                for s in symbols:
                    assert f"{s}.kd".encode() in code.image
