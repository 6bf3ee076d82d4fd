"""Reverse-mode range tasks in SIMD lanes on the CPU (llvm_codegen/spmd_adstack.py): the
adjoint kernels take the lane path (checked in SPIRAD_DEBUG_CPU's output), their gradients equal
the scalar path's (SPIRAD_CPU_SPMD=0) bit for bit where no math function is involved and float64
central differences or analytic values everywhere; adstack overflow is reported exactly as on the
scalar path; random reverse-mode programs pass on the lane path.

`init(debug=True)` makes every task scalar (bounds checks), so these tests init without it.
"""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import arch_or_skip
from tests.support.grad_programs import (assert_guards_intact, coupled_steps, coupled_steps_ref, guarded_fields,
                                         overflowing, overflowing_grad)

N = 1000 + 7  # full lane groups and a masked tail


@pytest.fixture(autouse=True)
def _cpu():
    arch_or_skip("cpu")


def _init(monkeypatch, spmd, **kw):
    monkeypatch.setenv("SPIRAD_CPU_SPMD", "1" if spmd else "0")
    monkeypatch.setenv("SPIRAD_DEBUG_CPU", "1")
    sd.init(arch=sd.cpu, offline_cache=False, **kw)


def _grad_lanes(capfd):
    """The lane-path choices printed for adjoint tasks since the last call."""
    err = capfd.readouterr().err
    return [ln for ln in err.splitlines() if "_grad" in ln and ln.startswith("[spirad cpu]")]


def _assert_grad_on_lanes(capfd):
    lines = _grad_lanes(capfd)
    assert lines and all("SPMD" in ln for ln in lines), lines


@sd.kernel
def ka(x: sd.template(), y: sd.template(), nsteps: sd.template()):
    for i in x:
        v = x[i]
        for s in range(nsteps[None]):
            v = v * 0.95 + 0.01
        y[i] = v


@sd.kernel
def kb(x: sd.template(), y: sd.template(), nsteps: sd.template()):
    for i in x:
        y[i] = coupled_steps(x[i], nsteps[None])


@sd.kernel
def knest(x: sd.template(), y: sd.template(), loss: sd.template(), n: sd.i32):
    """Nested uniform loops, a uniform IF, a loop-carried product, an atomic into one target."""
    for i in x:
        v = x[i]
        w = x[i] * 0.5
        for j in range(n):
            if n > 2:
                v = v * 0.9 + 0.05 * j
            for k in range(2):
                w = w * v * 0.5 + v
        y[i] = w
        loss[None] += w * 0.25


def _knest_f64(x, n):
    v, w = x, x * 0.5
    for j in range(n):
        if n > 2:
            v = v * 0.9 + 0.05 * j
        for _ in range(2):
            w = w * v * 0.5 + v
    return w


def _run(kernel, dt, xs, steps, extra=()):
    x = sd.field(dt, shape=len(xs), needs_grad=True)
    y = sd.field(dt, shape=len(xs), needs_grad=True)
    nsteps = sd.field(sd.i32, shape=())
    x.from_numpy(xs.astype(dt.np))
    nsteps[None] = steps
    kernel(x, y, nsteps)
    y.grad.fill(1.0)
    x.grad.fill(0.0)
    kernel.grad(x, y, nsteps)
    return y.to_numpy(), x.grad.to_numpy()


def _both(monkeypatch, capfd, fn):
    """fn() under the lane path (asserting the adjoint tasks took it), then the scalar path."""
    _init(monkeypatch, True)
    capfd.readouterr()
    vec = fn()
    _assert_grad_on_lanes(capfd)
    _init(monkeypatch, False)
    scal = fn()
    assert all("scalar" in ln for ln in _grad_lanes(capfd))
    return vec, scal


def _same_bits(a, b):
    return a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("dt", [sd.f32, sd.f64], ids=str)
@pytest.mark.parametrize("steps", [0, 1, 37, 256])
def test_kernel_a_bits_equal_scalar_and_analytic(monkeypatch, capfd, dt, steps):
    xs = np.linspace(-2.0, 3.0, N)
    (yv, gv), (ys, gs) = _both(monkeypatch, capfd, lambda: _run(ka, dt, xs, steps))
    assert _same_bits(yv, ys) and _same_bits(gv, gs)
    rtol = 1e-5 if dt == sd.f32 else 1e-12
    np.testing.assert_allclose(gv, np.full(N, 0.95 ** steps), rtol=rtol)


@pytest.mark.parametrize("dt", [sd.f32, sd.f64], ids=str)
@pytest.mark.parametrize("steps", [3, 16])
def test_kernel_b_matches_scalar_and_central_differences(monkeypatch, capfd, dt, steps):
    xs = np.linspace(0.1, 0.9, N)
    (yv, gv), (ys, gs) = _both(monkeypatch, capfd, lambda: _run(kb, dt, xs, steps))
    rtol = 2e-4 if dt == sd.f32 else 1e-10  # vecmath against libm: a few ulps per call
    np.testing.assert_allclose(gv, gs, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(yv, coupled_steps_ref(xs, steps), rtol=rtol)
    eps = 1e-6
    cd = (coupled_steps_ref(xs + eps, steps) - coupled_steps_ref(xs - eps, steps)) / (2 * eps)
    np.testing.assert_allclose(gv, cd, rtol=1e-3 if dt == sd.f32 else 1e-7, atol=1e-6)


@pytest.mark.parametrize("n", [0, 2, 5])
def test_nested_loops_uniform_if_and_atomic(monkeypatch, capfd, n):
    xs = np.linspace(-0.7, 0.8, N)

    def run():
        x = sd.field(sd.f64, shape=N, needs_grad=True)
        y = sd.field(sd.f64, shape=N, needs_grad=True)
        loss = sd.field(sd.f64, shape=(), needs_grad=True)
        x.from_numpy(xs)
        knest(x, y, loss, n)
        y.grad.fill(0.5)
        loss.grad[None] = 2.0
        x.grad.fill(0.0)
        knest.grad(x, y, loss, n)
        return y.to_numpy(), x.grad.to_numpy(), loss[None]

    (yv, gv, lv), (ys, gs, ls) = _both(monkeypatch, capfd, run)
    assert _same_bits(yv, ys) and _same_bits(gv, gs)
    np.testing.assert_allclose(lv, ls, rtol=1e-12)  # atomic sums: the order between workers varies
    eps = 1e-6
    cd = (_knest_f64(xs + eps, n) - _knest_f64(xs - eps, n)) / (2 * eps)
    np.testing.assert_allclose(gv, cd * (0.5 + 2.0 * 0.25), rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("m", [8, 1000])
def test_overflow_reported_on_lanes(monkeypatch, capfd, m):
    """ad_stack_size=4: 2 trips need 4 entries (fit), 3 need 5 and 200 need 202 (overflow, the
    error at the next sync, nothing outside the heap written, the runtime fine afterwards)."""
    _init(monkeypatch, True, default_fp=sd.f64, ad_stack_size=4)
    before, x, y, after = guarded_fields(m)
    capfd.readouterr()
    overflowing(x, y, 2)
    y.grad.fill(1.0)
    overflowing.grad(x, y, 2)                       # exactly 4 entries: fits
    sd.sync()
    _assert_grad_on_lanes(capfd)
    np.testing.assert_allclose(x.grad.to_numpy(), overflowing_grad(0.5, 2), rtol=1e-12)
    for trips in (3, 200):
        y.grad.fill(1.0)
        with pytest.raises(sd.SpiradAdStackOverflow, match=f"needs {trips + 2}"):
            overflowing.grad(x, y, trips)  # the CPU: raised by the launch
            sd.sync()
    assert_guards_intact(before, after)
    y.grad.fill(1.0)
    x.grad.fill(0.0)
    overflowing.grad(x, y, 1)                       # the runtime keeps working
    sd.sync()
    np.testing.assert_allclose(x.grad.to_numpy(), overflowing_grad(0.5, 1), rtol=1e-12)


RANDOM_SEEDS = range(24)
# seeds with an adjoint task on lanes (the others' reverse tasks have a varying IF / loop bound,
# a WHILE, or a global written and read at other indices: scalar, and still checked)
LANE_SEEDS = {0, 4, 6, 7, 8, 9, 10, 11, 12, 13, 15, 16, 17, 20}


@pytest.mark.parametrize("seed", RANDOM_SEEDS)
def test_random_programs_on_lanes(monkeypatch, capfd, seed):
    """tests/support/random_grad_programs (loop nests, ifs, math, the Tape) on the default CPU
    path, where reverse tasks with uniform control flow take lanes: gradients against float64
    central differences (the checks of test_random_grad)."""
    from tests.autodiff.test_random_grad import check_program
    _init(monkeypatch, True, default_fp=sd.f64)
    capfd.readouterr()
    check_program(seed)
    on_lanes = [ln for ln in _grad_lanes(capfd) if "SPMD" in ln]
    assert on_lanes or seed not in LANE_SEEDS, on_lanes


@pytest.mark.parametrize("k_trips", [1, 37])
def test_heap_holds_a_row_per_lane(monkeypatch, capfd, k_trips):
    """A worker of a W-lane adjoint task owns W heap rows: the first launch from a fresh init
    allocates exactly workers * W rows of the launch's layout."""
    from llvm_codegen import math_policy
    from tests.autodiff.gradutil import arr
    from tests.autodiff.test_heap_memory import _launch, _layouts, k_one
    import spirad.runtime.state as sd_state
    _init(monkeypatch, True, default_fp=sd.f64)
    x = arr(sd.f64, np.linspace(0.1, 0.8, N), needs_grad=True)
    y = sd.ndarray(sd.f64, N, needs_grad=True)
    args = (x, y, k_trips)
    capfd.readouterr()
    (_, _, layout, lanes), = _layouts(k_one, args)
    got = _launch(k_one, args)
    _assert_grad_on_lanes(capfd)
    from spirad.options import llvm_codegen_options
    o = llvm_codegen_options()  # an f64 task: one register of the target's f32 lanes, or forced
    assert lanes == (o.lanes or math_policy.lanes("f32", o.vector_bits))
    rows = sd_state.backend().rt.num_workers * lanes
    assert got == layout.heap_bytes(rows)
    np.testing.assert_allclose(x.grad.to_numpy(), overflowing_grad(np.linspace(0.1, 0.8, N),
                                                                    k_trips), rtol=1e-12)
