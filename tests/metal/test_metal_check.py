"""The Metal-profile checker finds each construct naga rejects or panics on (synthetic modules),
and every module the Metal backend makes is clean while the Vulkan profile's are not."""
import math

import numpy as np
import pytest

import spirad as sd
from spirv_codegen import metal_check
from spirv_codegen.module import Module
from tests.support.archs import arch_or_skip


def _module(build) -> bytes:
    m = Module()
    build(m)
    return m.to_bytes()


def test_clean_module_has_no_violations():
    assert metal_check.violations(_module(lambda m: m.const_float(32, 1.5))) == []


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_nan_and_inf_constants_are_found(value):
    bad = metal_check.violations(_module(lambda m: m.const_float(32, value)))
    assert len(bad) == 1 and "NaN / Inf OpConstant" in bad[0]


def test_f64_type_is_found():
    bad = metal_check.violations(_module(lambda m: m.t_float(64)))
    assert any("64-bit float" in b for b in bad)


def test_binding_count_is_checked():
    assert metal_check.violations(_module(lambda m: None), max_bindings=8, num_bindings=9)
    assert not metal_check.violations(_module(lambda m: None), max_bindings=8, num_bindings=8)


def test_check_names_the_kernel():
    with pytest.raises(RuntimeError, match="kernel my_kernel breaks the Metal profile"):
        metal_check.check(_module(lambda m: m.const_float(32, math.nan)), "my_kernel")


def _modules_of(arch, monkeypatch, body):
    """SPIR-V modules the backend of `arch` hands to its runtime while `body` runs."""
    arch_or_skip(arch)
    from spirad.backends import backend_class
    cls = backend_class(arch)
    seen = []
    orig = cls._pipeline

    def spy(self, mod, *args, **kwargs):
        seen.append(mod)
        return orig(self, mod, *args, **kwargs)
    monkeypatch.setattr(cls, "_pipeline", spy)
    sd.init(arch=arch, debug=True)
    body()
    return seen


def _workload():
    """NaN/Inf results, an i64 scalar argument, atomics, bounds-check status writes, adstacks."""
    x = sd.field(sd.f32, 8, needs_grad=True)
    n = sd.field(sd.i32, 8)
    y = sd.field(sd.f32, (), needs_grad=True)
    big = sd.field(sd.i64, 2)

    @sd.kernel
    def k(off: sd.i64):
        for i in x:
            v = x[i]
            for j in range(n[i]):
                v = sd.sin(v) * 0.9 + sd.log(x[i] + 1.0)
            y[None] += v
        big[0] = off + 1

    x.from_numpy(np.linspace(0.1, 0.8, 8).astype(np.float32))
    n.from_numpy(np.arange(8, dtype=np.int32))
    with sd.ad.Tape(loss=y):
        k(1 << 40)
    assert big.to_numpy()[0] == (1 << 40) + 1
    assert np.isfinite(x.grad.to_numpy()).all()


def test_metal_modules_are_clean(monkeypatch):
    mods = _modules_of("metal", monkeypatch, _workload)
    assert mods and any(m.adstacks for m in mods)
    for m in mods:
        assert metal_check.violations(m.words, 8, m.num_bindings - len(m.uniform_bindings),
                                      m.uniform_bindings) == []


def test_vulkan_modules_break_the_metal_profile(monkeypatch):
    """The checker is not vacuous: the Vulkan profile's status writes use compare-exchange."""
    mods = _modules_of("vulkan", monkeypatch, _workload)
    found = [b for m in mods for b in metal_check.violations(m.words, 64)]
    assert any("OpAtomicCompareExchange" in b for b in found)
