"""Reverse-mode tasks with varying control flow on SIMD lanes (llvm_codegen/spmd_control.py,
per-lane adstack counts in spmd_adstack.py): trip counts varying per lane (`range(n[i])`, a
`while` with a data-dependent exit, break / continue), varying IFs inside loops. Adjoint tasks
take the lane path with masks (SPIRAD_DEBUG_CPU's line), gradients equal the scalar path's
(SPIRAD_CPU_SPMD=0) bit for bit where no math function is involved and float64 central
differences; a per-lane stack overflows like the scalar path; random reverse-mode programs with
per-lane trip counts pass on lanes.
"""
import numpy as np
import pytest

import spirad as sd
from tests.autodiff.test_spmd_grad import _grad_lanes, _init, _same_bits
from tests.support.archs import arch_or_skip
from tests.support.grad_programs import coupled_steps, coupled_steps_ref, per_element_trips

N = 1000 + 7
ND = sd.types.ndarray()


@pytest.fixture(autouse=True)
def _cpu():
    arch_or_skip("cpu")


def _masked_lanes(capfd):
    lines = _grad_lanes(capfd)
    assert lines and all("SPMD" in ln and "masked" in ln for ln in lines), lines
    return lines


def _both(monkeypatch, capfd, fn, **kw):
    """fn() on the lane path (adjoint tasks masked on lanes), then on the scalar path."""
    _init(monkeypatch, True, **kw)
    capfd.readouterr()
    vec = fn()
    _masked_lanes(capfd)
    _init(monkeypatch, False, **kw)
    scal = fn()
    assert all("scalar" in ln for ln in _grad_lanes(capfd))
    return vec, scal


def _grad_of(kernel, dt, xs, *extra, wy=1.0):
    x = sd.ndarray(dt, len(xs), needs_grad=True)
    y = sd.ndarray(dt, len(xs), needs_grad=True)
    x.from_numpy(xs.astype(dt.np))
    kernel(x, y, *extra)
    y.grad.fill(wy)
    x.grad.fill(0.0)
    kernel.grad(x, y, *extra)
    return y.to_numpy(), x.grad.to_numpy()


def _cd(ref, xs, *extra, eps=1e-6):
    """Central differences of an elementwise float64 reference."""
    return (ref(xs + eps, *extra) - ref(xs - eps, *extra)) / (2 * eps)


def _steps(seed, hi):
    return np.random.default_rng(seed).integers(0, hi, N).astype(np.int32)


def _nd_i32(a):
    n = sd.ndarray(sd.i32, len(a))
    n.from_numpy(a)
    return n


# -- trip counts per lane ---------------------------------------------------------------------
@sd.kernel
def k_trips(x: ND, y: ND, n: ND):
    for i in x:
        v = x[i]
        for s in range(n[i]):
            v = v * 0.95 + 0.01 * s
        y[i] = v


@pytest.mark.parametrize("dt", [sd.f32, sd.f64], ids=str)
def test_trips_per_lane_bits_equal_scalar_and_analytic(monkeypatch, capfd, dt):
    xs = np.linspace(-2.0, 3.0, N)
    steps = _steps(1, 60)
    steps[:40] = 0  # a whole lane group without trips
    (yv, gv), (ys, gs) = _both(monkeypatch, capfd,
                               lambda: _grad_of(k_trips, dt, xs, _nd_i32(steps)))
    assert _same_bits(yv, ys) and _same_bits(gv, gs)
    np.testing.assert_allclose(gv, 0.95 ** steps.astype(np.float64),
                               rtol=1e-5 if dt == sd.f32 else 1e-12)


@sd.kernel
def k_b_trips(x: ND, y: ND, n: ND):
    """Kernel b of the benchmark with a per-lane trip count."""
    for i in x:
        y[i] = coupled_steps(x[i], n[i])


@pytest.mark.parametrize("dt", [sd.f32, sd.f64], ids=str)
def test_kernel_b_trips_per_lane_central_differences(monkeypatch, capfd, dt):
    xs = np.linspace(0.1, 0.9, N)
    steps = _steps(2, 24)
    (yv, gv), (ys, gs) = _both(monkeypatch, capfd,
                               lambda: _grad_of(k_b_trips, dt, xs, _nd_i32(steps)),
                               default_ad_stack_size=64)
    rtol = 2e-4 if dt == sd.f32 else 1e-10  # vecmath against libm: a few ulps per call
    np.testing.assert_allclose(gv, gs, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(yv, coupled_steps_ref(xs, steps), rtol=rtol)
    np.testing.assert_allclose(gv, _cd(coupled_steps_ref, xs, steps), rtol=1e-3 if dt == sd.f32 else 1e-7,
                               atol=1e-6)


# -- while with a data-dependent exit, break and continue -------------------------------------
@sd.kernel
def k_while(x: ND, y: ND, n: ND):
    for i in x:
        v = x[i]
        j = 0
        while v < 3.0:              # exit depends on the lane's data
            j += 1
            if j > n[i]:
                break
            if j % 3 == 1:
                continue
            v = v * 1.25 + 0.1 * j
        y[i] = v * 0.5 + j


def _while_ref(x, n):
    out = np.empty_like(x)
    for k in range(len(x)):
        v, j = x[k], 0
        while v < 3.0:
            j += 1
            if j > n[k]:
                break
            if j % 3 == 1:
                continue
            v = v * 1.25 + 0.1 * j
        out[k] = v * 0.5 + j
    return out


def test_while_data_dependent_exit(monkeypatch, capfd):
    # thresholds kept away from every lane's trajectory: v hits 3.0 far from equality
    xs = np.linspace(0.05, 2.9, N)
    xs = xs[np.abs(_while_ref(xs + 1e-4, np.full(N, 99)) - _while_ref(xs - 1e-4, np.full(N, 99)))
            < 1e-2][:N]
    xs = np.resize(xs, N)
    steps = _steps(3, 30)
    (yv, gv), (ys, gs) = _both(monkeypatch, capfd,
                               lambda: _grad_of(k_while, sd.f64, xs, _nd_i32(steps)),
                               default_fp=sd.f64, default_ad_stack_size=64)
    assert _same_bits(yv, ys) and _same_bits(gv, gs)
    np.testing.assert_allclose(yv, _while_ref(xs, steps), rtol=1e-12)
    np.testing.assert_allclose(gv, _cd(_while_ref, xs, steps), rtol=1e-6, atol=1e-8)


# -- varying IF in a loop ---------------------------------------------------------------------
@sd.kernel
def k_if_loop(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        w = x[i] * 0.5
        for s in range(n):
            if (i + s) % 3 == 0:
                v = v * 1.1 + w * 0.05
            elif (i + s) % 3 == 1:
                w = w * v * 0.5 + 0.1
            else:
                v = v * 0.9
        y[i] = v + w


def _if_ref(x, n):
    out = np.empty_like(x)
    for k in range(len(x)):
        v, w = x[k], x[k] * 0.5
        for s in range(n):
            if (k + s) % 3 == 0:
                v = v * 1.1 + w * 0.05
            elif (k + s) % 3 == 1:
                w = w * v * 0.5 + 0.1
            else:
                v = v * 0.9
        out[k] = v + w
    return out


@pytest.mark.parametrize("n", [0, 1, 7])
def test_varying_if_in_a_uniform_loop(monkeypatch, capfd, n):
    xs = np.linspace(-0.8, 0.8, N)
    (yv, gv), (ys, gs) = _both(monkeypatch, capfd, lambda: _grad_of(k_if_loop, sd.f64, xs, n),
                               default_fp=sd.f64)
    assert _same_bits(yv, ys) and _same_bits(gv, gs)
    np.testing.assert_allclose(gv, _cd(_if_ref, xs, n), rtol=1e-7, atol=1e-9)


# -- overflow of a per-lane stack -------------------------------------------------------------
def test_overflow_of_a_per_lane_stack(monkeypatch, capfd):
    """ad_stack_size=8: lanes within it fit; one lane past it raises the scalar path's error
    (same stack and sizes), nothing outside the heap written, the runtime fine afterwards."""
    def run(steps):
        _init(monkeypatch, True, default_fp=sd.f64, ad_stack_size=8)
        before, after = sd.ndarray(sd.f64, N), sd.ndarray(sd.f64, N)
        before.fill(3.0)
        after.fill(4.0)
        capfd.readouterr()
        x = sd.ndarray(sd.f64, N, needs_grad=True)
        y = sd.ndarray(sd.f64, N, needs_grad=True)
        x.fill(0.5)
        n = _nd_i32(steps)
        per_element_trips(x, n, y)
        y.grad.fill(1.0)
        err = None
        try:
            per_element_trips.grad(x, n, y)  # the CPU: an overflow is raised by the launch
            sd.sync()
        except sd.SpiradAdStackOverflow as e:
            err = str(e)
        _masked_lanes(capfd)
        np.testing.assert_array_equal(before.to_numpy(), 3.0)
        np.testing.assert_array_equal(after.to_numpy(), 4.0)
        return err, x.grad.to_numpy()

    fits = _steps(4, 7)
    err, g = run(fits)
    assert err is None
    over = fits.copy()
    over[517] = 40
    err_lanes, _ = run(over)
    monkeypatch.setenv("SPIRAD_CPU_SPMD", "0")
    sd.init(arch=sd.cpu, offline_cache=False, default_fp=sd.f64, ad_stack_size=8)
    x = sd.ndarray(sd.f64, N, needs_grad=True)
    y = sd.ndarray(sd.f64, N, needs_grad=True)
    x.fill(0.5)
    per_element_trips(x, _nd_i32(over), y)
    y.grad.fill(1.0)
    with pytest.raises(sd.SpiradAdStackOverflow) as e:
        per_element_trips.grad(x, _nd_i32(over), y)
    assert err_lanes is not None and err_lanes == str(e.value)
    err, g2 = run(fits)  # the runtime keeps working
    assert err is None and _same_bits(g, g2)


# -- random reverse-mode programs with per-lane control flow ----------------------------------
LANE_PROGRAM_SEEDS = range(24)


def _run_lane_program(mod, xs, steps):
    from tests.support.random_lane_programs import N as NP
    x = sd.ndarray(sd.f64, NP, needs_grad=True)
    y = sd.ndarray(sd.f64, NP, needs_grad=True)
    x.from_numpy(xs)
    n = _nd_i32(steps)
    mod.k(x, y, n)
    y.grad.fill(1.0)
    x.grad.fill(0.0)
    mod.k.grad(x, y, n)
    return y.to_numpy(), x.grad.to_numpy()


def _ref_lane_program(prog, xs, steps):
    from tests.support.random_grad_programs import RefArray, reference_sd
    ref = prog.load(reference_sd())
    x, y, n = RefArray(np.float64, len(xs)), RefArray(np.float64, len(xs)), RefArray(np.int64, len(xs))
    x.from_numpy(xs)
    n.from_numpy(steps)
    ref.k(x, y, n)
    return y.to_numpy()


@pytest.mark.parametrize("seed", LANE_PROGRAM_SEEDS)
def test_random_lane_programs(monkeypatch, capfd, seed):
    """tests/support/random_lane_programs: trip counts, exits and branches varying per lane, on
    100 elements (several lane groups and a tail). The adjoint task runs masked on lanes; its
    gradient equals the scalar path's (bit for bit without math) and central differences."""
    from tests.support.random_lane_programs import N as NP, generate
    prog = generate(seed)
    rng = np.random.default_rng(seed)
    xs = rng.uniform(-0.9, 0.9, NP)
    steps = rng.integers(0, 5, NP).astype(np.int32)
    kw = dict(default_fp=sd.f64)
    _init(monkeypatch, True, **kw)
    capfd.readouterr()
    yv, gv = _run_lane_program(prog.load(sd), xs, steps)
    lines = _grad_lanes(capfd)
    assert lines and all("SPMD" in ln for ln in lines), lines
    if "n[i]" in prog.source or "(i " in prog.source:  # control flow that depends on i
        assert all("masked" in ln for ln in lines), lines
    _init(monkeypatch, False, **kw)
    ys, gs = _run_lane_program(prog.load(sd), xs, steps)
    if prog.math:
        np.testing.assert_allclose(gv, gs, rtol=1e-10, atol=1e-12, err_msg=prog.source)
    else:
        assert _same_bits(yv, ys) and _same_bits(gv, gs), prog.source
    np.testing.assert_allclose(yv, _ref_lane_program(prog, xs, steps), rtol=1e-10, atol=1e-12,
                               err_msg=prog.source)
    eps = 1e-6
    cd = (_ref_lane_program(prog, xs + eps, steps) - _ref_lane_program(prog, xs - eps, steps)) / (
        2 * eps)
    np.testing.assert_allclose(gv, cd, rtol=1e-6, atol=1e-7, err_msg=prog.source)


def test_random_grad_programs_count_on_lanes(monkeypatch, capfd):
    """The programs of tests/support/random_grad_programs (as in
    test_spmd_grad.py::test_random_programs_on_lanes), on whatever target and lane width this
    runs with (CI: the host's, 4 and 8 lanes forced, an AVX2-only target), two workers as on CI.
    What holds on every target, whatever the programs:
    * a task left scalar is so for a global written and accessed at other indices, never for
      its control flow; some adjoint tasks run on lanes, masked ones among them (varying trip
      counts, `while` loops ending on data);
    * each adjoint task's one-thread choice is the work estimate's at the lanes this target
      gives it (`work_estimate.costs`: scattered atomics on lanes priced against plain
      read-modify-writes on one core, `CpuBackend._one_thread_variants`);
    * the tasks on lanes are at least those the target's width allows: every task the lane
      analysis accepts and the estimate does not send to its one-thread variant alone (a
      variant kept next to the lane code, `_1t`, is not counted). The count itself depends on the
      target and the programs, so it is not asserted: when the generator had 24 programs (75
      adjoint tasks, all f64: one register of f32 lanes each) 46 ran on lanes with AVX-512's 16,
      45 with AVX2's 8 (one more task's scattered atomics cost more on lanes than its variant
      on one core), 41 with NEON's 4 (issue #43)."""
    from llvm_codegen.codegen import spmd_choice, task_symbol
    from spirad.backends.cpu import ONLY, CpuBackend, task_costs
    from spirad.backends.work_estimate import one_thread_choice
    from spirad.options import llvm_codegen_options
    from tests.autodiff.test_random_grad import SEEDS, check_program
    compiled = []  # (task list, one-thread marks, workers) of every program compiled
    variants = CpuBackend._one_thread_variants

    def spy(self, tl, abi):
        out = variants(self, tl, abi)
        compiled.append((tl, out[1][0], self.rt.num_workers))
        return out

    monkeypatch.setattr(CpuBackend, "_one_thread_variants", spy)
    on, masked, allowed, lines_seen, variants_seen = 0, 0, 0, 0, 0
    for seed in SEEDS:
        _init(monkeypatch, True, default_fp=sd.f64, cpu_max_num_threads=2)
        del compiled[:]
        capfd.readouterr()
        check_program(seed)
        lines = [ln for ln in _grad_lanes(capfd) if "_1t:" not in ln]
        lines_seen += len(lines)
        for ln in lines:
            if ": SPMD" in ln:
                on += 1
                masked += "masked" in ln
            else:
                assert "written and accessed at other indices" in ln, ln
        options = llvm_codegen_options()
        for tl, marks, workers in compiled:
            for k, task in enumerate(tl.tasks):
                if task.kind != "range" or "_grad" not in task_symbol(tl, k, task):
                    continue
                lanes, a = spmd_choice(task, False, options)
                choice = one_thread_choice(*task_costs(task, lanes, a), workers)
                mark = "both" if type(marks[k]) is int else marks[k]
                # a variant only for tasks with atomics a one-thread variant can take
                assert mark in (choice, None), (seed, tl.name, k, mark, choice)
                variants_seen += mark is not None
                allowed += lanes > 1 and mark != ONLY
    assert lines_seen and masked > 0, (on, masked, lines_seen)
    assert on >= allowed > 0 and variants_seen, (on, allowed, lines_seen, variants_seen)
    print(f"adjoint tasks: {on} of {lines_seen} on lanes ({masked} masked), {allowed} allowed, "
          f"{variants_seen} one-thread variants")
