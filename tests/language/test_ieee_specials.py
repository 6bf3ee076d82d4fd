"""NaN, Inf and -0 behave the same on every backend (architecture §5, §8): SPIR-V modules declare the
float controls the device has (SignedZeroInfNanPreserve), and where a driver would still fold
(`x * 0.0`, `x + 0.0`) or cannot preserve at all (Metal through naga) the arithmetic is emitted
in a form it cannot fold. The expected values are IEEE 754's, as the CPU computes them; min / max
with one NaN operand give the other operand (the CPU's and Taichi's choice)."""
from __future__ import annotations

import math

import numpy as np

import spirad as sd
from tests.support.archs import exactly, test_archs

NAN = float("nan")
EXPECTED = [NAN, NAN, -0.0, -math.inf, 0.0, 1.0, 1.0, 1.0, 1.0, NAN, -0.0, 0.0, -0.0, NAN, 1.0,
            NAN]
FLAGS = [1, 0, 1, 1, 1, 0]


def _check(dtype):
    a = sd.field(dtype, 4)
    out = sd.field(dtype, 16)
    flag = sd.field(sd.i32, 6)

    @sd.kernel
    def specials():
        for _ in range(1):
            x = a[0]    # inf
            n = a[1]    # nan
            z = a[2]    # -0.0
            one = a[3]  # 1.0
            out[0] = x - x
            out[1] = n * 0.0
            out[2] = z * 1.0
            out[3] = 1.0 / z
            out[4] = z + 0.0
            out[5] = sd.min(n, one)
            out[6] = sd.max(n, one)
            out[7] = sd.min(one, n)
            out[8] = sd.max(one, n)
            out[9] = x * 0.0
            out[10] = 0.0 * z
            out[11] = -z
            out[12] = z - 0.0
            out[13] = x + (-x)
            out[14] = x / x * 0.0 + one if x != x else one   # inf / inf: NaN, so the else
            out[15] = 0.0 / (z * 0.0 + z - z)                # 0 / 0: NaN
            flag[0] = 1 if n != n else 0
            flag[1] = 1 if n == n else 0
            flag[2] = 1 if x == x + 1.0 else 0
            flag[3] = 1 if (x - x) != (x - x) else 0
            flag[4] = 1 if z == 0.0 else 0
            flag[5] = 1 if n < 1.0 or n >= 1.0 else 0

    a.from_numpy(np.array([np.inf, np.nan, -0.0, 1.0], dtype.np))
    specials()
    got = out.to_numpy().tolist()
    for k, (g, w) in enumerate(zip(got, EXPECTED)):
        same = (math.isnan(g) and math.isnan(w)) or (g == w and math.copysign(1, g) ==
                                                     math.copysign(1, w))
        assert same, (k, g, w, got)
    assert flag.to_numpy().tolist() == FLAGS


@test_archs()
def test_nan_inf_signed_zero_f32(arch):
    _check(sd.f32)


@test_archs(require=("f64",))
def test_nan_inf_signed_zero_f64(arch):
    _check(sd.f64)


@test_archs(archs=exactly("vulkan"), require=("f64",))
def test_vulkan_device_without_float_controls(arch, monkeypatch):
    """A Vulkan device that does not preserve specials for a width (float controls hidden
    here): the module declares nothing and every operand goes through the bit identity, f64
    included (its low word; was folded: `inf - inf` gave 0)."""
    import dataclasses

    from spirv_codegen import SpirvCaps
    real = SpirvCaps.from_device.__func__
    monkeypatch.setattr(SpirvCaps, "from_device", classmethod(
        lambda cls, dc, profile=None: dataclasses.replace(real(cls, dc, profile),
                                                          preserve_float_bits=())))
    sd.init(arch=sd.vulkan, offline_cache=False)
    assert sd._state.backend().spirv_caps.preserve_float_bits == ()
    _check(sd.f32)
    _check(sd.f64)


def test_spirv_declares_float_controls_where_the_device_has_them():
    from spirv_codegen import SpirvCaps, compile_tasks, disassemble
    from kernel_ir.abi import kernel_abi
    sd.init(arch=sd.cpu)
    x = sd.field(sd.f32, 4)

    @sd.kernel
    def k():
        for i in x:
            x[i] = x[i] * 0.0 + (x[i] - x[i])

    tl = k.compile(()).tl
    with_fc = compile_tasks(tl, kernel_abi(tl), SpirvCaps(preserve_float_bits=(32, 64)))[0]
    text = disassemble(with_fc.words)
    assert "OpExecutionMode %main SignedZeroInfNanPreserve 32" in text
    assert "OpConvertUToF" in text  # the 0.0 operand is not a constant the driver can fold
    without = disassemble(compile_tasks(tl, kernel_abi(tl), SpirvCaps())[0].words)
    assert "SignedZeroInfNanPreserve" not in without and "OpBitwiseOr" in without
