"""Every IR op on every dtype: the module validates, and on Vulkan it matches the interpreter."""
from __future__ import annotations

import numpy as np
import pytest

import spv_harness as H
import spv_kit as K
from spv_op_cases import all_cases, case_id, tolerance
from kernel_ir.abi import kernel_abi
from spirv_codegen import SpirvCaps, compile_tasks, validate

CASES = all_cases()
CAPS_VARIANTS = {
    "full": SpirvCaps(True, True, True, True, True, None),
    "cas": SpirvCaps(True, True, True, False, False, 65535),
}


@pytest.mark.parametrize("caps", list(CAPS_VARIANTS.values()), ids=list(CAPS_VARIANTS))
@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_op_validates(case, caps):
    op, ins, out, inputs = case
    tl, _, _ = K.elementwise(op, ins, out, inputs)
    for t in compile_tasks(tl, kernel_abi(tl), caps):
        validate(t.words)


def test_f64_requires_capability():
    tl, _, _ = K.elementwise(K.Op.SIN, (K.f64,), K.f64, [np.zeros(3)])
    with pytest.raises(RuntimeError, match="shaderFloat64"):
        compile_tasks(tl, kernel_abi(tl), SpirvCaps())


@pytest.mark.vulkan_driver
@pytest.mark.xdist_group("spirv_vulkan")
@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_op_on_vulkan(vk, case):
    op, ins, out, inputs = case
    caps = H.device_caps(vk)
    if (K.f64 in ins + (out,) and not caps.has_f64) or \
            (K.i64 in ins + (out,) and not caps.has_i64):
        pytest.skip("device lacks f64/i64")
    tl, arrays, scalars = K.elementwise(op, ins, out, inputs)
    want = H.run_reference(tl, arrays, scalars)
    got = H.run_vulkan(vk, tl, arrays, scalars, caps)
    key = ("ndarray", len(ins), False)
    w, g = want[key], got.arrays[key]
    if w.dtype.kind == "f":
        rtol, atol = tolerance(op, out if out.kind == "f" else ins[0])
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=f"inputs={inputs}")
        # signs of zeros and infinities must agree too where exact
        if rtol == 0:
            fin = np.isfinite(w) & (w == 0)
            np.testing.assert_array_equal(np.signbit(g[fin]), np.signbit(w[fin]))
    else:
        np.testing.assert_array_equal(g, w, err_msg=f"inputs={inputs}")
