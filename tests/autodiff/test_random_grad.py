"""Random spirad programs (tests/support/random_grad_programs.py) differentiated end to end:
every needs_grad global's `.grad` after the Tape (or the hand-called `kernel.grad`s) must equal
the float64 central difference of the loss with respect to that global's initial value, computed
by running the same source under a plain-Python stand-in for `sd`. The forward values (loss and
intermediates) must match the stand-in's too. A failure prints the program; `generate(seed)`
rebuilds it."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs
from tests.support.random_grad_programs import generate, reference_sd

SEEDS = range(24)
INTERP_SEEDS = (0, 1, 2, 3, 4, 5)
EPS = 1e-6


def reference_grads(prog):
    """(the stand-in's module after a forward run from the initial data, {name: d loss / d
    initial value}) by central differences of the stand-in."""
    ref = prog.load(reference_sd())

    def loss_at(name=None, flat=None, delta=0.0):
        for k, v in prog.data.items():
            getattr(ref, k).from_numpy(v)
        if name is not None:
            v = prog.data[name].copy()
            v.reshape(-1)[flat] += delta
            getattr(ref, name).from_numpy(v)
        ref.forward()
        return float(ref.loss[None])

    grads = {}
    for name in prog.grads:
        g = np.zeros(prog.data[name].size)
        for e in range(g.size):
            g[e] = (loss_at(name, e, EPS) - loss_at(name, e, -EPS)) / (2 * EPS)
        grads[name] = g.reshape(prog.data[name].shape)
    loss_at()
    return ref, grads


def check_program(seed, fp="f64"):
    """`fp` = 'f32': the same program over f32 globals (Metal has no f64), checked against the
    float64 oracle with f32 tolerances (relative to the largest value of each global)."""
    prog = generate(seed, fp)
    ref, want = reference_grads(generate(seed))
    mod = prog.load(sd)
    mod.run()
    got = {name: getattr(mod, name).grad.to_numpy() for name in prog.grads}
    where = f"\n--- seed {seed} ({fp}) ---\n{prog.source}"
    tol = {"f64": (1e-9, 1e-10, 1e-5, 1e-7), "f32": (2e-5, 2e-6, 2e-3, 5e-4)}[fp]
    for name in prog.grads:  # forward: the loss and every intermediate
        w = getattr(ref, name).to_numpy()
        np.testing.assert_allclose(getattr(mod, name).to_numpy(), w, rtol=tol[0],
                                   atol=tol[1] * max(1.0, np.abs(w).max()),
                                   err_msg=f"forward {name}" + where)
    for name in prog.grads:
        np.testing.assert_allclose(got[name], want[name], rtol=tol[2],
                                   atol=tol[3] * max(1.0, np.abs(want[name]).max()),
                                   err_msg=f"d loss / d {name}" + where)
    return got


# no size hints: the stacks of `while` loops are measured by the counting pass
@pytest.mark.parametrize("seed", SEEDS)
@test_archs(archs=("cpu", "vulkan"), default_fp=sd.f64)
def test_random_program_gradients(arch, seed):
    check_program(seed)


# the same seeds in f32 on the SPIR-V backends: Metal (no f64) runs every one of them
@pytest.mark.parametrize("seed", SEEDS)
@test_archs(archs=("vulkan",), default_ad_stack_size=1024)
def test_random_program_gradients_f32(arch, seed):
    check_program(seed, "f32")


@pytest.mark.parametrize("seed", INTERP_SEEDS)
@test_archs(archs=("interp",), default_fp=sd.f64)
def test_random_program_gradients_interp(arch, seed):
    check_program(seed)
