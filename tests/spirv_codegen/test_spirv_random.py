"""The random kernel corpus (tests/support/random_kernels.py): every seed compiles to valid
SPIR-V under several capability sets, and runs on Vulkan matching the interpreter.

SPIRAD_SPIRV_RANDOM_SEEDS=N changes the corpus size (default 250).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import spv_harness as H
from kernel_ir.abi import kernel_abi
from kernel_ir.dtypes import f32, f64
from spirv_codegen import SpirvCaps, compile_tasks, validate

try:
    from tests.support.random_kernels import generate
except Exception:  # pragma: no cover - generator not written yet
    generate = None

SEEDS = range(int(os.environ.get("SPIRAD_SPIRV_RANDOM_SEEDS", "250")))
pytestmark = pytest.mark.skipif(generate is None, reason="tests/support/random_kernels.py missing")

CAPS = [SpirvCaps(True, True, True, True, True, None), SpirvCaps(True, True, True, False, False, 65535)]


@pytest.mark.parametrize("seed", SEEDS)
def test_random_validates(seed):
    case = generate(seed)
    abi = kernel_abi(case.tl)
    for caps in CAPS:
        for t in compile_tasks(case.tl, abi, caps):
            validate(t.words)


@pytest.mark.vulkan_driver
@pytest.mark.xdist_group("spirv_vulkan")
@pytest.mark.parametrize("seed", SEEDS)
def test_random_on_vulkan(vk, request, seed):
    case = generate(seed)
    caps = H.device_caps(vk)
    try:
        compile_tasks(case.tl, kernel_abi(case.tl), caps)
    except RuntimeError as e:
        if "Int64Atomics" in str(e):
            vk, caps = request.getfixturevalue("vk_int64_atomics")
        elif "the device" in str(e) or "device has no" in str(e):
            pytest.skip(f"device capability: {e}")
        else:
            raise
    want = H.run_reference(case.tl, case.arrays, case.scalars)
    got = H.run_vulkan(vk, case.tl, case.arrays, case.scalars, caps)
    assert got.status[0] == 0, got.status
    for k, w in want.items():
        g = got.arrays[k]
        if w.dtype.kind == "f":
            rtol, atol = case.tolerance(f32 if w.dtype == np.float32 else f64)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=str(k))
        else:
            np.testing.assert_array_equal(g, w, err_msg=str(k))
