"""Random kernels (tests/support/random_kernels.py): LLVM CPU backend == reference interpreter.

Exact equality for ints, bools and every float of kernels without transcendental ops; a few
ULP for floats of kernels that use them. On failure the message names the seed; reproduce with

    python -c "from tests.support.random_kernels import generate; \\
               from kernel_ir.printer import print_tasks; print(print_tasks(generate(SEED).tl))"
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.llvm_codegen.harness import run_interp, run_llvm
from kernel_ir.dtypes import f32, from_numpy, i32, u1, u32
from kernel_ir.verifier import verify_tasks
from tests.support.random_kernels import generate

SEEDS = range(300)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_kernel(seed):
    _check(generate(seed))


@pytest.mark.parametrize("seed", range(1000, 1020))
def test_random_kernel_restricted_dtypes(seed):
    """What a device without f64 / int64 gets (the SPIR-V backend's portable subset)."""
    _check(generate(seed, dtypes=(f32, i32, u32, u1)))


def _check(case):
    seed = case.seed
    verify_tasks(case.tl)
    want = run_interp(case.tl, case.arrays, case.scalars)
    got = run_llvm(case.tl, case.arrays, case.scalars)
    for k, w in want.items():
        g = got[k]
        msg = f"seed {seed}: {k} differs (exact={case.exact})"
        if w.dtype.kind == "f" and not case.exact:
            rtol, atol = case.tolerance(from_numpy(w.dtype))
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=msg)
        else:
            np.testing.assert_array_equal(g, w, err_msg=msg)


def test_generator_is_deterministic_and_covers_the_ir():
    from kernel_ir.nodes import walk
    a, b = generate(5), generate(5)
    assert [n.op for t in a.tl.tasks for n in walk(t.body)] == \
        [n.op for t in b.tl.tasks for n in walk(t.body)]
    for k in a.arrays:
        np.testing.assert_array_equal(a.arrays[k], b.arrays[k])
    seen = set()
    for seed in range(60):
        for t in generate(seed).tl.tasks:
            seen.update(n.op.name for n in walk(t.body))
    for op in ("IF", "RANGE_FOR", "WHILE", "BREAK", "CONTINUE", "ALLOCA", "ATOMIC_ADD",
               "GLOBAL_STORE", "FLOORDIV", "MOD", "SHL", "SHR", "POW", "SELECT", "CAST", "SIN"):
        assert op in seen, op
