"""The CPU target (llvm_codegen/cpu_target.py, SPIRAD_CPU_TARGET): which CPU the CPU backend
compiles for, its ISA and vector width, and the lanes that follow from it. Forcing a narrower
target than the host's runs the code a user of that target gets (CI: x86-64-v3, AVX2 only, on
an AVX-512 machine); a wider one is refused before anything is compiled."""
from __future__ import annotations

import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradValueError
from llvm_codegen import cpu_target
from llvm_codegen.cpu_target import Isa, host_isa, isa_of, parse, resolve

X86 = "x86_64-unknown-linux-gnu"
x86_only = pytest.mark.skipif(host_isa().name not in ("SSE", "AVX", "AVX2", "AVX-512"),
                              reason="an x86-64 host")


def test_parse():
    assert parse(None) == (None, {})
    assert parse("x86-64-v3") == ("x86-64-v3", {})
    assert parse("-avx512f") == (None, {"avx512f": False})
    assert parse(" znver3 , -avx2,+fma ") == ("znver3", {"avx2": False, "fma": True})
    with pytest.raises(ValueError, match="two CPU names"):
        parse("znver3,skylake")
    with pytest.raises(ValueError, match="needs a name"):
        parse("znver3,-")


@pytest.mark.parametrize("cpu,want", [("x86-64", Isa("SSE", 128)),
                                      ("x86-64-v2", Isa("SSE", 128)),
                                      ("sandybridge", Isa("AVX", 256)),
                                      ("x86-64-v3", Isa("AVX2", 256)),
                                      ("x86-64-v4", Isa("AVX-512", 512))])
def test_probed_x86_isas(cpu, want):
    """LLVM's x86-64 levels and an AVX-only CPU, probed from their assembly."""
    assert isa_of(X86, cpu, "") == want
    assert want.lanes("f32") == want.bits // 32 and want.lanes("f64") == want.bits // 64


@x86_only
def test_host_features_turned_off():
    """Features alone change the host's: `-avx512f,-avx2,-avx` leaves SSE."""
    cpu, feats = resolve("-avx512f,-avx2,-avx")
    import llvmlite.binding as llvm
    assert cpu == llvm.get_host_cpu_name()
    assert "-avx2" in feats.split(",") and "+avx2" not in feats.split(",")
    assert cpu_target.isa("-avx512f,-avx2,-avx") == Isa("SSE", 128)
    assert cpu_target.isa(None) == host_isa()


@x86_only
def test_a_wider_target_than_the_host_is_refused(monkeypatch):
    if host_isa().bits >= 512:
        pytest.skip("no x86 target is wider than AVX-512")
    monkeypatch.setenv("SPIRAD_CPU_TARGET", "x86-64-v4")
    with pytest.raises(SpiradValueError, match="cannot run"):
        sd.init(arch=sd.cpu, offline_cache=False)


@x86_only
@pytest.mark.parametrize("spec", ["x86-64", "x86-64-v3"])
def test_forced_target_sets_lanes_and_machine_code(monkeypatch, capfd, spec):
    """SPMD lanes follow the forced target (two registers a 32-bit value: 8 with SSE, 16 with
    AVX2), the runtime compiles for it (its CPU name keys the offline cache), results agree."""
    if host_isa().bits < cpu_target.isa(spec).bits:
        pytest.skip(f"this CPU cannot run {spec}")
    monkeypatch.setenv("SPIRAD_CPU_TARGET", spec)
    monkeypatch.delenv("SPIRAD_CPU_SPMD_LANES", raising=False)
    monkeypatch.setenv("SPIRAD_DEBUG_CPU", "1")
    sd.init(arch=sd.cpu, offline_cache=False)
    import spirad.runtime.state as st
    be = st.backend()
    assert be.rt.target_key[1] == spec
    assert spec in str(be.cache_features())
    x = sd.field(sd.f32, shape=1000)

    @sd.kernel
    def k():
        for i in range(1000):
            x[i] = sd.sin(i * 0.01) * 2.0

    capfd.readouterr()
    k()
    lanes = 2 * cpu_target.isa(spec).lanes("f32")
    assert f": SPMD, {lanes} lanes" in capfd.readouterr().err
    np.testing.assert_allclose(x.to_numpy(), 2 * np.sin(np.arange(1000) * 0.01), atol=2e-6)
