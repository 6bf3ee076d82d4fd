"""Iteration-private globals (kernel_ir.ownership) and what uses them: atomics on them become
plain read-modify-writes on every backend (passes/demote_atomics, Taichi's demote_atomics), and
CPU range tasks over them (and over scattered atomic adds) run in SIMD lanes (llvm_codegen/spmd).
Same results and gradients as before, on every arch; the analysis refuses what two iterations
could share."""
import numpy as np
import pytest

import spirad as sd
from kernel_ir.nodes import walk
from kernel_ir.ops import ATOMICS, GLOBAL_ACCESS
from kernel_ir.ownership import private_buffers
from passes.demote_atomics import demote_atomics
from tests.support.archs import arch_or_skip, test_archs

N, T, G = 40, 4, 16


def _tasklist(kernel, mode=0):
    return kernel._plans[mode].compiled.tl


def _private_names(tl):
    out = []
    for t in tl.tasks:
        names = {n.arg.buffer: repr(n.arg) for n in walk(t.body) if n.arg is not None and
                 n.op in GLOBAL_ACCESS}
        out.append(sorted(names[b] for b in private_buffers(t)))
    return out


def test_private_buffers_forms():
    sd.init(arch=sd.cpu, offline_cache=False)
    x = sd.field(sd.f32, shape=(T, N))
    y = sd.field(sd.f32, shape=N + 1)
    v = sd.Vector.field(2, sd.f32, shape=(T, N))
    g = sd.field(sd.f32, shape=(T, G, G))
    h = sd.field(sd.f32, shape=G)
    z = sd.field(sd.f32, shape=(N, 3))
    w = sd.field(sd.f32, shape=N)
    idx = sd.field(sd.i32, shape=N)

    @sd.kernel
    def steps(f: sd.i32):
        for p in range(N):
            x[f + 1, p] = x[f, p] * 2.0          # private: axis 1 is p in both (idx too)
            v[f, p] += sd.Vector([x[f, p], 1.0])  # private: components of the own element
            y[p] = y[p + 1]                      # shared: p and p + 1
            h[idx[p]] += 1.0                     # shared: a data-dependent index
            for j in range(3):
                z[p, j] += float(j)              # private: axis 0 is p, axis 1 anything
            w[p] = w[0] + 1.0                    # shared: w[0] is every iteration's

    @sd.kernel
    def grid(f: sd.i32):
        for i, j in sd.ndrange(G, G):
            g[f, i, j] = g[f, i, (j + 1) % G] * 0.5   # j and (j + 1) % G: shared
        for i, j in sd.ndrange(G, G):
            g[f + 1, i, j] += g[f, i, j]         # private: (i, j) are the index's digits
        for i, j in sd.ndrange(G, G):
            g[f, j, i] += 1.0                    # digits in the other order: still private
        for i, j in sd.ndrange(G, G):
            g[f, i, 0] += 1.0                    # the digit j is missing: shared

    steps(0)
    grid(0)
    assert _private_names(_tasklist(steps)) == [["field:idx", "field:v", "field:x", "field:z"]]
    assert _private_names(_tasklist(grid)) == [[], ["field:g"], ["field:g"], []]


def test_serial_task_atomics_are_demoted():
    sd.init(arch=sd.cpu, offline_cache=False)
    s = sd.field(sd.f32, shape=4)

    @sd.kernel
    def k():
        for i in range(4):
            s[i] += 1.0
        s[0] += s[3]  # top-level code: a one-thread task

    k()
    tl = demote_atomics(_tasklist(k))
    assert [sum(n.op in ATOMICS for n in walk(t.body)) for t in tl.tasks] == [0, 0]
    np.testing.assert_array_equal(s.to_numpy(), [2, 1, 1, 1])


def _mpm_like():
    """Own-element updates and adjoints next to scattered atomics (DiffTaichi's P2G / G2P)."""
    x = sd.field(sd.f32, shape=(T + 1, N), needs_grad=True)
    m = sd.Vector.field(2, sd.f32, shape=(T + 1, N), needs_grad=True)
    grid = sd.field(sd.f32, shape=(T, G), needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def p2g(f: sd.i32):
        for p in range(N):
            base = sd.cast(x[f, p] * (G - 2), sd.i32)
            m[f + 1, p] = m[f, p] * 0.9 + sd.Vector([x[f, p], x[f, p] ** 2])
            m[f + 1, p] += sd.Vector([0.5, sd.sin(x[f, p])])
            for k in sd.static(range(2)):
                grid[f, base + k] += (0.5 + k) * x[f, p] * m[f + 1, p][k]

    @sd.kernel
    def g2p(f: sd.i32):
        for p in range(N):
            base = sd.cast(x[f, p] * (G - 2), sd.i32)
            x[f + 1, p] = x[f, p] * 0.95 + 0.001 * (grid[f, base] + grid[f, base + 1])

    @sd.kernel
    def total():
        for p in range(N):
            loss[None] += x[T, p] + m[T, p][1]

    def run(x0):
        x.from_numpy(np.concatenate([x0[None], np.zeros((T, N))]).astype(np.float32))
        m.fill(0.0)
        grid.fill(0.0)
        loss[None] = 0.0
        with sd.ad.Tape(loss):
            for f in range(T):
                p2g(f)
                g2p(f)
            total()
        return loss[None], x.grad.to_numpy()[0].astype(np.float64), (p2g, g2p)

    return run


def _reference(x0):
    x = x0.astype(np.float64)
    m = np.zeros((N, 2))
    for f in range(T):
        base = (x * (G - 2)).astype(np.int64)  # x in [0, 1): truncation = floor
        m = m * 0.9 + np.stack([x, x ** 2], 1) + np.stack([np.full(N, 0.5), np.sin(x)], 1)
        grid = np.zeros(G)
        for k in range(2):
            np.add.at(grid, base + k, (0.5 + k) * x * m[:, k])
        x = x * 0.95 + 0.001 * (grid[base] + grid[base + 1])
    return (x + m[:, 1]).sum()


@test_archs()
def test_demoted_atomics_results_and_gradients(arch):
    x0 = np.random.default_rng(3).uniform(0.05, 0.9, N)
    loss, grad, kernels = _mpm_like()(x0)
    assert loss == pytest.approx(_reference(x0), rel=1e-5)
    h = 1e-6
    for i in (0, 7, N - 1):
        a, b = x0.copy(), x0.copy()
        a[i] += h
        b[i] -= h
        fd = (_reference(a) - _reference(b)) / (2 * h)
        assert grad[i] == pytest.approx(fd, rel=2e-3, abs=2e-4), i
    for k in kernels:  # what the backend compiled: only the scattered grid atomics are left
        for mode in (0, 1):
            tl = demote_atomics(_tasklist(k, mode))
            left = {repr(n.arg) for t in tl.tasks for n in walk(t.body) if n.op in ATOMICS}
            assert left <= {"field:grid", "field:grid.grad"}, (k.fn.__name__, mode, left)


def test_lanes_over_private_globals(monkeypatch, capfd):
    """On the CPU the kernels over private globals take SIMD lanes (G2P; the P2G adjoint, whose
    `.grad` accumulations were atomics), the scattered adds of P2G and of the G2P adjoint run in
    their one-thread variants (scalar, plain read-modify-writes: cheaper than lane-by-lane
    atomics, backends/work_estimate); results agree with the scalar path."""
    arch_or_skip("cpu")
    x0 = np.random.default_rng(4).uniform(0.05, 0.9, N)
    out = {}
    for spmd in (True, False):
        monkeypatch.setenv("SPIRAD_CPU_SPMD", "1" if spmd else "0")
        monkeypatch.setenv("SPIRAD_CPU_SPMD_MIN_TRIPS", "0")  # lanes for N = 40 iterations too
        monkeypatch.setenv("SPIRAD_DEBUG_CPU", "1")
        sd.init(arch=sd.cpu, offline_cache=False, cpu_max_num_threads=2)
        capfd.readouterr()
        out[spmd] = _mpm_like()(x0)[:2]
        lines = {ln.split()[2].rstrip(":"): ": SPMD" in ln
                 for ln in capfd.readouterr().err.splitlines()
                 if ln.startswith("[spirad cpu]") and ("p2g" in ln or "g2p" in ln)}
        want = {"spirad_p2g_0_p2g_t1": False, "spirad_g2p_0_g2p_t1": spmd,
                "spirad_p2g_grad_0_p2g_t1_grad": spmd, "spirad_g2p_grad_0_g2p_t1_grad": False}
        assert lines == want, lines
    assert out[True][0] == pytest.approx(out[False][0], rel=1e-6)
    np.testing.assert_allclose(out[True][1], out[False][1], rtol=1e-5, atol=1e-7)


def _estimated_mark(kernel):
    """The one-thread mark the work estimate gives the first task of `kernel` on this target
    (`CpuBackend._one_thread_variants`): its SPMD choice under the switches in force, its costs
    at those lanes, the backend's workers. None, ONLY or "both" (a variant next to the own
    code)."""
    import spirad.runtime.state as sd_state
    from llvm_codegen.codegen import spmd_choice
    from spirad.backends.cpu import task_costs
    from spirad.backends.work_estimate import one_thread_choice
    from spirad.options import llvm_codegen_options
    program = kernel._plans[0].compiled.program
    task = _tasklist(kernel).tasks[0]
    lanes, a = spmd_choice(task, False, llvm_codegen_options())
    own, alone = task_costs(task, lanes, a)
    choice = one_thread_choice(own, alone, sd_state.backend().rt.num_workers)
    if choice != "only":  # the own code is compiled: with the lanes estimated
        assert program.blob.task_lanes[0] == lanes
    return choice, lanes


def _mark(kernel):
    m = kernel._plans[0].compiled.program.blob.one_thread[0][0]  # the first task's mark
    return "both" if type(m) is int else m


_RANK = {None: 0, "both": 1, "only": 2}


def _scatter_and_total(n):
    """Fields x (n floats), g (64), s (a scalar) and two kernels over them, the shapes the
    one-thread estimate tells apart: `scatter` adds x into g[i % 64] (an atomic per iteration at
    varying indices), `total` adds 2 sin(x) into s (a reduction into one element)."""
    x = sd.field(sd.f32, shape=n)
    g = sd.field(sd.f32, shape=64)
    s = sd.field(sd.f32, shape=())

    @sd.kernel
    def scatter():
        for i in range(n):
            g[i % 64] += x[i]

    @sd.kernel
    def total():
        for i in range(n):
            s[None] += sd.sin(x[i]) * 2.0

    return x, g, s, scatter, total


@pytest.mark.parametrize("lanes", [None, 4, 8, 16, 32], ids=lambda w: f"lanes{w or '-target'}")
def test_one_thread_variants_on_the_cpu(monkeypatch, lanes):
    """A range task whose atomics cost more than its plain read-modify-writes on one core runs
    its one-thread variant when the launch is not split: compiled alone where splitting never
    pays, next to the atomic code where it may; results equal the atomic code's. On every target
    and lane width (`lanes`: forced; None: the target's default, 32 with AVX-512, 16 with AVX2,
    8 with NEON):
    * each task's choice is the work estimate's for that width (`work_estimate.costs`:
      atomics and lanes priced per target);
    * P2G's scatter (`g[i % 64] += ...`: an atomic per iteration at varying indices) runs its
      variant alone: two workers' atomics cost more than one core's plain read-modify-writes
      at any width;
    * the reduction into one element (`s[None] += ...`: one atomic per lane group) is never
      more variant than at a narrower width (test_one_thread_choice_narrows_with_lanes)."""
    arch_or_skip("cpu")
    from spirad.backends.cpu import ONLY
    if lanes is not None:
        monkeypatch.setenv("SPIRAD_CPU_SPMD_LANES", str(lanes))
    n = 4096
    sd.init(arch=sd.cpu, offline_cache=False, cpu_max_num_threads=2)
    x, g, s, scatter, total = _scatter_and_total(n)
    xs = np.random.default_rng(1).uniform(0, 1, n).astype(np.float32)
    x.from_numpy(xs)
    scatter()
    total()
    assert _mark(scatter) == ONLY == _estimated_mark(scatter)[0]
    want, used = _estimated_mark(total)
    assert _mark(total) == want, (used, want)
    if lanes is not None:
        assert used == lanes
    np.testing.assert_allclose(g.to_numpy(), xs.reshape(-1, 64).sum(0), rtol=1e-5)
    assert s[None] == pytest.approx(float((np.sin(xs.astype(np.float64)) * 2).sum()), rel=1e-5)


def test_one_thread_choice_narrows_with_lanes():
    """The estimate's choice for a task is monotone in the lane width: wider lanes make the
    own code cheaper, so a task never gets a variant at a width where a narrower one had none
    (None < "both" < "only"), for a reduction into one element, a scattered add and an
    own-element update, whatever the target. Pure estimate: nothing is compiled."""
    from llvm_codegen.codegen import spmd_choice
    from llvm_codegen.options import CodegenOptions
    from spirad.backends.cpu import task_costs
    from spirad.backends.work_estimate import one_thread_choice
    sd.init(arch=sd.cpu, offline_cache=False, cpu_max_num_threads=2)
    n = 4096
    x, g, s, scatter, total = _scatter_and_total(n)

    @sd.kernel
    def cheap_total():
        for i in range(n):
            s[None] += x[i]

    for k in (total, cheap_total, scatter):
        k()
        task = _tasklist(k).tasks[0]
        ranks = []
        for w in (4, 8, 16, 32, 64):
            lanes, a = spmd_choice(task, False, CodegenOptions(lanes=w, min_trips=0))
            assert lanes == w
            ranks.append(_RANK[one_thread_choice(*task_costs(task, lanes, a), 2)])
        assert ranks == sorted(ranks, reverse=True), (k.fn.__name__, ranks)


def test_short_constant_ranges_stay_scalar(monkeypatch, capfd):
    """By default a CPU range task with constant bounds and fewer iterations than two lane
    groups stays scalar (DiffTaichi's 16 billiard balls: lanes cost 5x the compile time and
    saved nothing); SPIRAD_CPU_SPMD_MIN_TRIPS=0 (the tests' setting) gives it lanes. Two lane
    groups less one iteration at the lanes of this target (32 with AVX-512, 16 with AVX2: 31 or
    15 iterations) or SPIRAD_CPU_SPMD_LANES, two groups exactly take lanes."""
    arch_or_skip("cpu")
    from llvm_codegen import math_policy
    from spirad.options import llvm_codegen_options
    o = llvm_codegen_options()
    w = o.lanes or 2 * math_policy.lanes("f32", o.vector_bits)  # an f32 task's lanes
    for env, n, lanes in ((None, 2 * w - 1, False), (None, 2 * w, True), ("0", 2 * w - 1, True)):
        if env is None:
            monkeypatch.delenv("SPIRAD_CPU_SPMD_MIN_TRIPS", raising=False)
        else:
            monkeypatch.setenv("SPIRAD_CPU_SPMD_MIN_TRIPS", env)
        monkeypatch.setenv("SPIRAD_DEBUG_CPU", "1")
        sd.init(arch=sd.cpu, offline_cache=False)
        x = sd.field(sd.f32, shape=n)

        @sd.kernel
        def double():
            for i in range(n):
                x[i] = x[i] * 2.0 + 1.0

        capfd.readouterr()
        double()
        line = [ln for ln in capfd.readouterr().err.splitlines() if "double" in ln]
        assert len(line) == 1 and (": SPMD" in line[0]) == lanes, (n, line)
        np.testing.assert_array_equal(x.to_numpy(), np.ones(n))
