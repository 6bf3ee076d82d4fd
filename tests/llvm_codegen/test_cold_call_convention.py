"""The CPU's error recorders preserve the caller's registers (`cpu_target.cold_call_convention`).

A default check's failure path calls `spirad.oob.fail`; under the C convention that call
clobbers the caller-saved registers, and a loop holding such a check kept some of its live values
on the stack for every iteration (Genesis' `func_solve_init`). The recorders are defined and
called with `preserve_allcc` on x86-64 and AArch64 hosts; a definition and a call that disagree
on the convention would be undefined behaviour, so every call is checked, and a kernel with many
values live across failing checks must still compute them exactly (every arch).
"""
from __future__ import annotations

import re

import llvmlite.binding as llvm
import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradOutOfBoundsError
from tests.passes.test_bounds_versioning import _arr
from tests.support.archs import EVERY_ARCH, test_archs
from tests.support.driver_spy import cpu_compiles

HOST_HAS_IT = llvm.get_process_triple().startswith(("x86_64", "aarch64", "arm64"))


@sd.kernel
def gather(a: sd.types.ndarray(), idx: sd.types.ndarray(dtype=sd.i32), out: sd.types.ndarray(),
           n: sd.i32, m: sd.i32, w: sd.f32):
    """Rows gathered through loaded indices (no check can be proven or hoisted): five sums and a
    count live across every row's check."""
    sd.loop_config(serialize=True)
    for i in range(n):
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        s4 = 0.0
        c = 0
        for r in range(m):
            j = idx[i, r]
            v = a[j]
            s0 += v
            s1 += v * w
            s2 += v * v
            s3 += v * (w + 1.0)
            s4 += v - w
            c += j
        out[i, 0] = s0
        out[i, 1] = s1
        out[i, 2] = s2
        out[i, 3] = s3
        out[i, 4] = s4
        out[i, 5] = sd.cast(c, sd.f32)


def _gather_numpy(av, iv, w):
    out = np.zeros((iv.shape[0], 6), np.float32)
    w = np.float32(w)
    for i in range(iv.shape[0]):
        s = [np.float32(0)] * 5
        c = 0
        for j in iv[i]:
            v = av[j] if 0 <= j < len(av) else np.float32(0)  # a failed check reads 0
            s = [s[0] + v, s[1] + v * w, s[2] + v * v, s[3] + v * (w + np.float32(1)),
                 s[4] + (v - w)]
            c += int(j)
        out[i] = s + [np.float32(c)]
    return out


def _run(av, iv, w):
    out = _arr(np.zeros((iv.shape[0], 6)))
    gather(_arr(av), _arr(iv, sd.i32), out, iv.shape[0], iv.shape[1], w)
    return out


@test_archs(EVERY_ARCH)
def test_values_live_across_failing_checks(arch):
    """In range, then with indices past both ends in several rows: the failing reads are 0 and
    reported, every sum and count equals numpy's."""
    sd.init(arch=arch)
    rng = np.random.default_rng(7)
    av = rng.standard_normal(11).astype(np.float32)
    iv = rng.integers(0, 11, size=(6, 5)).astype(np.int32)
    out = _run(av, iv, 0.25)
    sd.sync()
    np.testing.assert_array_equal(out.to_numpy(), _gather_numpy(av, iv, 0.25))
    iv[1, 2], iv[3, 0], iv[3, 4], iv[5, 1] = 11, -1, 40, 12
    out = _run(av, iv, 0.25)
    with pytest.raises(SpiradOutOfBoundsError, match="kernel gather .*'a'"):
        sd.sync()
    np.testing.assert_array_equal(out.to_numpy(), _gather_numpy(av, iv, 0.25))


def _calls_and_definition(ir: str, helper: str):
    calls = [ln for ln in ir.splitlines() if "call " in ln and f"@\"{helper}\"" in ln]
    (define,) = [ln for ln in ir.splitlines()
                 if ln.startswith("define ") and f"@\"{helper}\"" in ln]
    return calls, define


@pytest.mark.skipif(not HOST_HAS_IT, reason="the host's LLVM backend has no preserve_allcc")
@pytest.mark.parametrize("debug", [False, True])
def test_recorders_preserve_the_callers_registers(debug):
    """`spirad.oob.fail` (the default checks) and `spirad.bounds.fail` (debug) are defined and
    called with `preserve_allcc`, every call of them."""
    sd.init(arch=sd.cpu, offline_cache=False, debug=debug)
    iv = np.zeros((2, 3), np.int32)
    ((_, code),) = cpu_compiles(gather, _arr(np.zeros(4)), _arr(iv, sd.i32),
                                _arr(np.zeros((2, 6))), 2, 3, 1.0)
    helper = "spirad.bounds.fail" if debug else "spirad.oob.fail"
    calls, define = _calls_and_definition(code.llvm_ir, helper)
    assert re.search(r"\bpreserve_allcc\b", define), define
    assert calls and all(" preserve_allcc " in ln for ln in calls), calls
