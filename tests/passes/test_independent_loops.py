"""Serialised top-level loops with provably independent iterations run in parallel on the CPU
(passes/independent_loops): every qualifying loop is made parallel here, whatever its work
(`SPLIT_WORK` = 0), and every launch is split over the worker threads (`SPLIT_SECONDS` = 0);
each kernel's result equals the serial run's bit for bit (the same
kernel with SPIRAD_INDEPENDENT_LOOPS=0) and numpy's. Each refusal keeps the loop serial and
gives the serial answer; the refusal tests check the task kinds, so a loosened rule fails them."""
import re
import numpy as np
import pytest

import spirad as sd
from kernel_ir.nodes import walk
from kernel_ir.ops import Op
from llvm_codegen import codegen
from llvm_codegen.codegen import HEAVY_LANE_TRIPS, fewest_lane_trips
from spirad import options
from spirad.backends import work_estimate
from tests.support.archs import exactly, test_archs

B, L = 256, 7


@pytest.fixture
def split_always(monkeypatch):
    """Every qualifying loop is made parallel (`worth_splitting`), and every launch of a range
    task free of atomics is split over the workers."""
    monkeypatch.setattr(work_estimate, "SPLIT_WORK", 0)
    monkeypatch.setattr(work_estimate, "SPLIT_SECONDS", 0.0)


def _init(independent: bool, monkeypatch, arch=sd.cpu):
    monkeypatch.setenv("SPIRAD_INDEPENDENT_LOOPS", "1" if independent else "0")
    sd.init(arch=arch, offline_cache=False, cpu_max_num_threads=4)


def _kinds(kernel) -> list:
    """The task kinds the backend compiled for the kernel's last forward launch."""
    return [t.kind for t in kernel._plans[0].compiled.backend_tl.tasks]


def _both(monkeypatch, run):
    """`run()` (-> (outputs, task kinds)) with the pass on and off."""
    out = {}
    for on in (True, False):
        _init(on, monkeypatch)
        out[on] = run()
    return out[True], out[False]


def _inputs():
    rng = np.random.default_rng(7)
    return rng.standard_normal((L, B)).astype(np.float32), \
        rng.integers(0, B, B).astype(np.int32)


# -- loops that become parallel ------------------------------------------------------------

def test_env_loop_with_nested_f32_sums(monkeypatch, split_always):
    """The Genesis shape: `for i_b in range(_B)` with nested loops and a per-env f32 sum."""
    x0, _ = _inputs()

    def run():
        x = sd.field(sd.f32, shape=(L, B))
        s = sd.field(sd.f32, shape=B)
        w = sd.field(sd.f32, shape=L)  # read only, at other indices: free

        @sd.kernel
        def step():
            sd.loop_config(serialize=True)
            for b in range(B):
                acc = 0.0
                for l in range(L):
                    x[l, b] = x[l, b] * 1.25 + w[l]
                    acc += x[l, b] * x[l, b]
                    if acc > 1e9:
                        continue
                s[b] += acc
        x.from_numpy(x0)
        w.from_numpy(np.linspace(0, 1, L).astype(np.float32))
        for _ in range(3):  # the third runs the backend's record of the launch (`eager_entry`)
            step()
        assert step._fast is not None and step._fast[2] is not None
        return (x.to_numpy(), s.to_numpy()), _kinds(step)
    (par, kp), (ser, ks) = _both(monkeypatch, run)
    assert kp == ["range"] and ks == ["serial"]
    for a, b in zip(par, ser):
        assert a.tobytes() == b.tobytes()
    # numpy, in the kernel's order and precision
    x, s = x0.copy(), np.zeros(B, np.float32)
    w = np.linspace(0, 1, L).astype(np.float32)
    for _ in range(3):
        acc = np.zeros(B, np.float32)
        for l in range(L):
            x[l] = x[l] * np.float32(1.25) + w[l]
            acc = acc + x[l] * x[l]
        s = s + acc
    np.testing.assert_allclose(par[0], x, rtol=1e-6)
    np.testing.assert_allclose(par[1], s, rtol=1e-5)


def test_ndrange_nest_moves_the_env_loop_out(monkeypatch, split_always):
    """`ndrange(L, B)` serialised, with a dependence along l: the b loop is the one made
    parallel (moved outermost), l stays serial inside it, in order."""
    x0, _ = _inputs()

    def run():
        x = sd.field(sd.f32, shape=(L, B))

        @sd.kernel
        def scan():
            sd.loop_config(serialize=True)
            for l, b in sd.ndrange((1, L), B):
                x[l, b] = x[l - 1, b] * 0.5 + x[l, b]
        x.from_numpy(x0)
        scan()
        return x.to_numpy(), _kinds(scan)
    (par, kp), (ser, ks) = _both(monkeypatch, run)
    assert kp == ["range"] and ks == ["serial"]
    assert par.tobytes() == ser.tobytes()
    ref = x0.copy()
    for l in range(1, L):
        ref[l] = ref[l - 1] * np.float32(0.5) + ref[l]
    np.testing.assert_array_equal(par, ref)


def test_ndarrays_and_own_atomics(monkeypatch, split_always):
    """ndarrays indexed by the env index (vectors too), atomics on the env's own elements."""
    x0, _ = _inputs()

    def run():
        x = sd.ndarray(sd.f32, (B, L))
        v = sd.Vector.ndarray(3, sd.f32, (B,))
        n = sd.ndarray(sd.i32, (B,))

        @sd.kernel
        def k(x: sd.types.ndarray(), v: sd.types.ndarray(), n: sd.types.ndarray()):
            sd.loop_config(serialize=True)
            for b in range(x.shape[0]):
                for l in range(x.shape[1]):
                    if x[b, l] > 0:
                        sd.atomic_add(n[b], 1)
                    v[b] += sd.Vector([x[b, l], 1.0, -x[b, l]])
        x.from_numpy(np.ascontiguousarray(x0.T))
        k(x, v, n)
        return (v.to_numpy(), n.to_numpy()), _kinds(k)
    (par, kp), (ser, ks) = _both(monkeypatch, run)
    assert kp == ["range"] and ks == ["serial"]
    assert par[0].tobytes() == ser[0].tobytes()
    np.testing.assert_array_equal(par[1], (x0 > 0).sum(0))


@test_archs(exactly("cpu", "vulkan"))
def test_same_results_on_every_arch(arch, split_always, monkeypatch):
    """Only the CPU runs such loops in parallel; the others keep them serial, same values."""
    monkeypatch.setenv("SPIRAD_INDEPENDENT_LOOPS", "1")  # read when the kernel compiles
    x = sd.field(sd.f32, shape=(L, B))

    @sd.kernel
    def k():
        sd.loop_config(serialize=True)
        for b in range(B):
            for l in range(1, L):
                x[l, b] = x[l - 1, b] + b
    k()
    assert _kinds(k) == (["range"] if arch == "cpu" else ["serial"])
    np.testing.assert_array_equal(x.to_numpy(), np.arange(L)[:, None] * np.arange(B)[None, :])


def test_adjoint_keeps_the_serial_loop(monkeypatch, split_always):
    """Autodiff sees the serial task list: the adjoint (whose carried local needs an adstack)
    stays one serial task, with the gradient of the serial loop."""
    x0, _ = _inputs()
    _init(True, monkeypatch)
    x = sd.field(sd.f32, shape=(L, B), needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)
    y = sd.field(sd.f32, shape=B, needs_grad=True)

    @sd.kernel
    def k():
        sd.loop_config(serialize=True)
        for b in range(B):
            p = 1.0
            for l in range(L):
                p = p * sd.sin(x[l, b]) + 0.5
            y[b] = p

    @sd.kernel
    def total():
        for b in range(B):
            loss[None] += y[b]
    x.from_numpy(x0)
    with sd.ad.Tape(loss=loss):
        k()
        total()
    assert _kinds(k) == ["range"]
    adj = k._derived or None
    g = x.grad.to_numpy()
    # analytic: d/dx_l of p_L, p_{l+1} = p_l sin(x_l) + 0.5
    xs = x0.astype(np.float64)
    p = np.ones(B)
    ps = []
    for l in range(L):
        ps.append(p)
        p = p * np.sin(xs[l]) + 0.5
    dp = np.ones(B)
    ref = np.zeros_like(xs)
    for l in reversed(range(L)):
        ref[l] = dp * ps[l] * np.cos(xs[l])
        dp = dp * np.sin(xs[l])
    np.testing.assert_allclose(g, ref, rtol=2e-4, atol=1e-5)
    assert adj  # the adjoint program(s) compiled for k
    for prog in adj.values():
        assert all(t.kind == "serial" for t in prog.backend_tl.tasks)
        assert any(n.op.name.startswith("ADSTACK") for t in prog.backend_tl.tasks
                   for n in walk(t.body))


# -- refusals: the loop stays serial, the serial answer -------------------------------------

def _refused(monkeypatch, build, out):
    """`build(a)` launches a kernel over `_Arrays` `a` and returns it; `out(a)`: the arrays to
    compare. Serial with the pass on and off, the same bytes; returns the outputs."""
    res = {}
    for on in (True, False):
        _init(on, monkeypatch)
        a = _Arrays()
        k = build(a)
        res[on] = ([x.copy() for x in out(a)], _kinds(k))
    assert res[True][1] == res[False][1] == ["serial"]
    for a, b in zip(res[True][0], res[False][0]):
        assert a.tobytes() == b.tobytes()
    return res[True][0]


class _Arrays:
    def __init__(self):
        x0, idx = _inputs()
        self.x = sd.field(sd.f32, shape=B + 1)
        self.y = sd.field(sd.f32, shape=B + 1)
        self.i = sd.field(sd.i32, shape=B)
        self.c = sd.field(sd.i32, shape=())
        self.x.from_numpy(np.append(x0[0], 1.0).astype(np.float32))
        self.i.from_numpy(idx)


def test_refuses_prefix_sum(monkeypatch, split_always):
    def build(a):

        @sd.kernel
        def k():
            sd.loop_config(serialize=True)
            for b in range(1, B):
                a.x[b] = a.x[b - 1] + a.x[b]
        k()
        return k
    (x,) = _refused(monkeypatch, build, lambda a: [a.x.to_numpy()])
    ref = np.append(_inputs()[0][0], 1.0).astype(np.float32)
    for b in range(1, B):
        ref[b] = ref[b - 1] + ref[b]
    np.testing.assert_array_equal(x, ref)


def test_refuses_shifted_write(monkeypatch, split_always):
    def build(a):

        @sd.kernel
        def k():
            sd.loop_config(serialize=True)
            for b in range(B):
                a.x[b + 1] = a.x[b] * 0.5
        k()
        return k
    _refused(monkeypatch, build, lambda a: [a.x.to_numpy()])


def test_refuses_write_through_loaded_index(monkeypatch, split_always):
    def build(a):

        @sd.kernel
        def k():
            sd.loop_config(serialize=True)
            for b in range(B):
                a.y[a.i[b]] = a.y[a.i[b]] * 2.0 + a.x[b]
        k()
        return k
    _refused(monkeypatch, build, lambda a: [a.y.to_numpy()])


def test_refuses_global_counter(monkeypatch, split_always):
    def build(a):

        @sd.kernel
        def k():
            sd.loop_config(serialize=True)
            for b in range(B):
                m = sd.atomic_add(a.c[None], 1)
                a.y[b] = m
        k()
        return k
    (y,) = _refused(monkeypatch, build, lambda a: [a.y.to_numpy()])
    np.testing.assert_array_equal(y[:B], np.arange(B))  # the serial order


def test_refuses_break(monkeypatch, split_always):
    def build(a):

        @sd.kernel
        def k():
            sd.loop_config(serialize=True)
            for b in range(B):
                if a.x[b] > 1.5:
                    break
                a.y[b] = 1.0
        k()
        return k
    _refused(monkeypatch, build, lambda a: [a.y.to_numpy()])


def test_refuses_array_without_env_axis(monkeypatch, split_always):
    def build(a):

        @sd.kernel
        def k():
            sd.loop_config(serialize=True)
            for b in range(B):
                a.y[b] = a.x[b]
                a.y[B] = a.x[b]  # the last one written wins: the serial order decides
        k()
        return k
    y, x = _refused(monkeypatch, build, lambda a: [a.y.to_numpy(), a.x.to_numpy()])
    assert y[B] == x[B - 1]


def test_refuses_carried_local(monkeypatch, split_always):
    def build(a):

        @sd.kernel
        def k():
            s = 0.0
            sd.loop_config(serialize=True)
            for b in range(B):
                s = s * 0.5 + a.x[b]
                a.y[b] = s
        k()
        return k
    _refused(monkeypatch, build, lambda a: [a.y.to_numpy()])


def test_refuses_random_numbers(monkeypatch, split_always):
    """The random stream of a serial stretch is one sequence, in loop order."""
    def build(a):

        @sd.kernel
        def k():
            sd.loop_config(serialize=True)
            for b in range(B):
                a.y[b] = sd.random()
        k()
        return k
    res = {}
    for on in (True, False):
        _init(on, monkeypatch)
        res[on] = _kinds(build(_Arrays()))
    assert res[True] == res[False] == ["serial"]


def test_local_set_before_the_loop_is_read_as_it_was(monkeypatch, split_always):
    """A local assigned from memory before the loop (then the memory changes) is handed to
    the parallel task as a kernel temporary: the value it had when the loop started."""
    res = {}
    for on in (True, False):
        _init(on, monkeypatch)
        a = _Arrays()

        @sd.kernel
        def k():
            first = a.x[0]
            a.x[0] = 5.0
            sd.loop_config(serialize=True)
            for b in range(1, B):
                a.y[b] = first + a.x[b]
        k()
        res[on] = (a.y.to_numpy(), a.x.to_numpy(), _kinds(k))
    assert res[True][2] == ["serial", "range"] and res[False][2] == ["serial"]
    assert res[True][0].tobytes() == res[False][0].tobytes()
    x0 = np.append(_inputs()[0][0], 1.0).astype(np.float32)
    np.testing.assert_array_equal(res[True][0][1:B], x0[0] + x0[1:B])


def test_refuses_ndarrays_that_may_be_one_array(monkeypatch, split_always):
    """Two ndarray arguments of one element type and ndim may be one array passed twice: a
    write to one and a read of the other at another index keep the loop serial (here they
    are one array, and the serial answer is a running sum)."""
    x0 = np.arange(1, B + 2, dtype=np.float32)
    res = {}
    for on in (True, False):
        _init(on, monkeypatch)
        a = sd.ndarray(sd.f32, (B + 1,))
        a.from_numpy(x0)

        @sd.kernel
        def k(p: sd.types.ndarray(), q: sd.types.ndarray()):
            sd.loop_config(serialize=True)
            for b in range(1, B + 1):
                p[b] = q[b - 1] + p[b]
        k(a, a)
        res[on] = (a.to_numpy(), _kinds(k))
    assert res[True][1] == res[False][1] == ["serial"]
    np.testing.assert_array_equal(res[True][0], np.cumsum(x0))
    assert res[True][0].tobytes() == res[False][0].tobytes()


def test_off_by_default(monkeypatch):
    """Without SPIRAD_INDEPENDENT_LOOPS=1 a serialised loop stays serial (measured slower on
    Genesis: docs/performance.md)."""
    monkeypatch.delenv("SPIRAD_INDEPENDENT_LOOPS", raising=False)
    sd.init(arch=sd.cpu, offline_cache=False)
    y = sd.field(sd.f32, shape=B)

    @sd.kernel
    def k():
        sd.loop_config(serialize=True)
        for b in range(B):
            acc = 0.0
            for j in range(4096):
                acc += sd.sin(b * 0.01 + j * 1e-4)
            y[b] = acc
    k()
    assert _kinds(k) == ["serial"]


def test_top_level_only_and_parallel_loops_unchanged(monkeypatch):
    """A loop nested in a parallel one is serial in its thread already; a plain parallel loop
    is left as it was."""
    _init(True, monkeypatch)
    y = sd.field(sd.f32, shape=(4, B))

    @sd.kernel
    def k():
        for i in range(4):
            for b in range(B):
                y[i, b] = i + b
        for b in range(B):
            y[0, b] += 1.0
    k()
    assert _kinds(k) == ["range", "range"]
    assert not any(n.op == Op.RANGE_FOR and n.arg.parallel
                   for t in k._plans[0].compiled.backend_tl.tasks for n in walk(t.body))


def test_only_loops_with_work_enough_by_default(monkeypatch):
    """Without the fixture's overrides: a loop whose estimated work cannot pay for a parallel
    launch (`work_estimate.worth_splitting`: n_envs 16, a tiny body) stays serial; one with
    work enough to split becomes parallel, the same values either way."""
    res = {}
    for on in (True, False):
        _init(on, monkeypatch)
        y = sd.field(sd.f32, shape=16)
        z = sd.field(sd.f32, shape=256)

        @sd.kernel
        def tiny():
            sd.loop_config(serialize=True)
            for b in range(16):
                y[b] = b * 2.0

        @sd.kernel
        def heavy():
            sd.loop_config(serialize=True)
            for b in range(256):
                acc = 0.0
                for j in range(4096):
                    acc += sd.sin(b * 0.01 + j * 1e-4)
                z[b] = acc
        tiny()
        heavy()
        res[on] = (_kinds(tiny), _kinds(heavy), y.to_numpy(), z.to_numpy())
    assert res[True][:2] == (["serial"], ["range"])
    assert res[False][:2] == (["serial"], ["serial"])
    assert res[True][3].tobytes() == res[False][3].tobytes()


def test_one_env_stays_serial_however_heavy(monkeypatch):
    """`n_envs` 1 (a constant trip count below `MIN_SPLIT_TRIPS`): never split, so the loop
    stays serial even when its body's estimated work would pass (Franka at `n_envs` 1)."""
    res = {}
    for envs in (1, 4):
        _init(True, monkeypatch)
        z = sd.field(sd.f32, shape=envs)
        n = sd.field(sd.i32, shape=())
        n[None] = 3

        @sd.kernel
        def heavy_env():
            sd.loop_config(serialize=True)
            for b in range(envs):
                acc = 0.0
                for i in range(n[None]):      # bounds read from memory: 16 trips estimated
                    for j in range(n[None]):
                        for k in range(n[None]):
                            for m in range(n[None]):
                                for q in range(n[None]):
                                    acc += sd.sin(b * 0.01 + (i + j + k + m + q) * 1e-4)
                z[b] = acc

        heavy_env()
        res[envs] = _kinds(heavy_env)
    assert res == {1: ["serial"], 4: ["range"]}


def _serialised_loop_kinds(threads: int, **init_kwargs) -> list:
    """Task kinds of a kernel with one serialised environment loop, run with `threads` CPU
    workers (its values checked)."""
    sd.init(arch=sd.cpu, cpu_max_num_threads=threads, **init_kwargs)
    y = sd.field(sd.f32, shape=B)

    @sd.kernel
    def envs():
        sd.loop_config(serialize=True)
        for b in range(B):
            y[b] = b * 2.0
    envs()
    assert (y.to_numpy() == np.arange(B) * 2.0).all()
    return _kinds(envs)


def test_one_worker_keeps_the_loops_serial(monkeypatch, split_always):
    """With one CPU worker (`cpu_max_num_threads=1`, Genesis' default on the CPU) no launch is
    ever split: the pass leaves every loop serial, so the program is the serial one."""
    monkeypatch.setenv("SPIRAD_INDEPENDENT_LOOPS", "1")
    kinds = {t: _serialised_loop_kinds(t, offline_cache=False) for t in (1, 2)}
    assert kinds == {1: ["serial"], 2: ["range"]}


def test_the_offline_cache_keeps_one_and_two_workers_apart(monkeypatch, split_always, tmp_path):
    """A program compiled with two workers (loops made parallel) and cached is not what a
    process with one worker loads (the pass's decision depends on the workers, and the CPU
    backend's `cache_features` hold their count), nor the other way round."""
    monkeypatch.setenv("SPIRAD_INDEPENDENT_LOOPS", "1")
    monkeypatch.setenv("SPIRAD_CACHE_DIR", str(tmp_path))
    kinds = {t: _serialised_loop_kinds(t, offline_cache=True) for t in (2, 1, 2)}
    assert kinds == {2: ["range"], 1: ["serial"]}


def test_one_env_at_run_time_is_the_plain_serial_call(monkeypatch, split_always):
    """ndarray mode: the env count is a run-time shape, so the loop is made parallel at compile
    time; a launch over one environment (below `Adaptive.min_split`) is never split and runs as
    the serial code's one call — eager launches and the backend's record alike never consult
    or time the task's `Adaptive` — with the serial values; 16 environments (split) do. (The
    generic program: one specialised on one environment has a constant one-trip loop.)"""
    monkeypatch.setenv("SPIRAD_SHAPE_SPECIALISE", "0")
    asked = []
    for name in ("run", "unsplit", "splits"):
        orig = getattr(work_estimate.Adaptive, name)
        monkeypatch.setattr(work_estimate.Adaptive, name,
                            lambda self, *a, _o=orig, _n=name: (asked.append(_n), _o(self, *a))[1])
    res = {}
    for on in (True, False):
        for envs in (1, 16):
            _init(on, monkeypatch)
            x = sd.ndarray(sd.f32, shape=(envs,))
            x.from_numpy(np.linspace(0.1, 0.9, envs).astype(np.float32))
            y = sd.ndarray(sd.f32, shape=(envs,))

            @sd.kernel
            def k(x: sd.types.ndarray(), y: sd.types.ndarray()):
                sd.loop_config(serialize=True)
                for b in range(x.shape[0]):
                    acc = 0.0
                    for j in range(64):
                        acc += sd.sin(x[b] + j * 1e-3)
                    y[b] = acc
            del asked[:]
            for _ in range(3):  # the third runs the backend's record (`eager_entry`)
                k(x, y)
            res[on, envs] = (_kinds(k), bool(asked), y.to_numpy())
    assert res[True, 1][:2] == (["range"], False)
    assert res[True, 16][:2] == (["range"], True)
    assert res[False, 1][0] == res[False, 16][0] == ["serial"]
    for envs in (1, 16):
        assert res[True, envs][2].tobytes() == res[False, envs][2].tobytes()


# -- heavy loops in SIMD lanes at one worker (driver.env_lanes) ------------------------------

@pytest.fixture
def wide_target(monkeypatch):
    """The lanes for heavy loops on any host (`codegen.heavy_lanes`: AVX-512 only by default)."""
    monkeypatch.setattr(codegen, "heavy_lanes", lambda options=None: True)


def _pair_fields(envs: int, lanes_on: bool, seed: int, monkeypatch):
    """spirad at one worker (`SPIRAD_INDEPENDENT_LOOPS` off, `SPIRAD_ENV_LANES` as asked) and a
    narrow phase's fields: 0 to 7 pairs per env, their positions (random), their outputs."""
    monkeypatch.setenv("SPIRAD_INDEPENDENT_LOOPS", "0")
    monkeypatch.setenv("SPIRAD_ENV_LANES", "1" if lanes_on else "0")
    sd.init(arch=sd.cpu, offline_cache=False, cpu_max_num_threads=1)
    rng = np.random.default_rng(seed)
    n_pairs = sd.field(sd.i32, shape=envs)
    pos = sd.field(sd.f32, shape=(8, envs))
    out = sd.field(sd.f32, shape=(8, envs))
    n_pairs.from_numpy(rng.integers(0, 8, envs).astype(np.int32))
    pos.from_numpy(rng.standard_normal((8, envs)).astype(np.float32))
    return n_pairs, pos, out


def _lane_kernel_run(envs: int, lanes_on: bool, monkeypatch):
    """A Genesis-shaped narrow phase at one worker (`SPIRAD_INDEPENDENT_LOOPS` off): per env a
    loop over pairs with a trip count read from memory, a `while` with a data-dependent exit and
    a `break`, an atomic counter at the env's own element, and a nested 5-slot loop; returns the
    outputs, the task kinds and the lanes of each compiled task."""
    n_pairs, pos, out = _pair_fields(envs, lanes_on, 287, monkeypatch)
    count = sd.field(sd.i32, shape=envs)

    @sd.kernel
    def narrow():
        sd.loop_config(serialize=True)
        for b in range(envs):
            for p in range(n_pairs[b]):
                x = pos[p, b]
                it = 0
                while x * x > 1e-3:
                    x = x * 0.5 + sd.sqrt(sd.abs(x)) * 0.01
                    it += 1
                    if it > 40:
                        break
                acc = 0.0
                for slot in range(5):
                    if slot > 0 and x > 0.5:
                        continue
                    acc += 1.0 / (1.0 + (x + slot * 0.3) ** 2)
                out[p, b] = acc + it
                sd.atomic_add(count[b], 1)
    narrow()
    program = narrow._plans[0].compiled.program
    return (out.to_numpy(), count.to_numpy()), _kinds(narrow), list(program.blob.task_lanes)


def test_heavy_env_loop_runs_in_lanes_at_one_worker(monkeypatch, wide_target):
    """A serialised loop whose estimated body passes `LANES_WORK` (lowered to 0 here) over
    enough iterations for the lanes (`fewest_lane_trips`) runs as a range task in SIMD lanes at one worker, its
    inner loops masked per lane; the outputs equal the serial task's bit for bit (no
    transcendental math here: lanes take spirad's vector bodies where scalar code calls libm,
    docs/vecmath.md)."""
    monkeypatch.setattr(work_estimate, "LANES_WORK", 0)
    envs = max(64, fewest_lane_trips(options.llvm_codegen_options()))
    (o1, c1), kinds, lanes = _lane_kernel_run(envs, True, monkeypatch)
    (o0, c0), kinds0, _ = _lane_kernel_run(envs, False, monkeypatch)
    assert kinds0 == ["serial"]
    assert kinds == ["range"] and lanes[0] > 1
    assert o1.tobytes() == o0.tobytes() and (c1 == c0).all()
    assert c0.sum() > 0 and o0.any()


def test_light_or_short_env_loops_stay_serial(monkeypatch, wide_target):
    """Below `LANES_WORK` (the default: far above this body), or with fewer iterations than
    the code generator runs such a loop in lanes (`fewest_lane_trips`: a scalar range task
    would only cost its launch), the loop stays inside the serial task; from there on it takes
    a power of two of lanes up to its trips."""
    assert _lane_kernel_run(64, True, monkeypatch)[1] == ["serial"]
    monkeypatch.setattr(work_estimate, "LANES_WORK", 0)
    monkeypatch.delenv("SPIRAD_CPU_SPMD_MIN_TRIPS")  # tests/conftest sets 0
    least = fewest_lane_trips(options.llvm_codegen_options())
    assert least == HEAVY_LANE_TRIPS == 16
    assert _lane_kernel_run(least - 1, True, monkeypatch)[1] == ["serial"]
    out, kinds, lanes = _lane_kernel_run(least, True, monkeypatch)
    assert kinds == ["range"] and lanes[0] == 16  # one group of 16 lanes (Genesis' n_envs 16)
    assert out[0].tobytes() == _lane_kernel_run(least, False, monkeypatch)[0][0].tobytes()


def _compiled_ir(monkeypatch) -> list:
    """The LLVM IR of every module the CPU runtime compiles from here on, in order."""
    from llvm_codegen import cpu_runtime
    seen, compile_object = [], cpu_runtime.CpuRuntime.compile_object
    def record(self, llvm_ir, *a, **k):
        seen.append(llvm_ir)
        return compile_object(self, llvm_ir, *a, **k)
    monkeypatch.setattr(cpu_runtime.CpuRuntime, "compile_object", record)
    return seen


def test_lane_task_checks_its_gathers_on_one_path(monkeypatch, wide_target):
    """A lane task's gathers and scatters under the default checks (`spmd.checked_access`,
    `SpmdContext.one_path_checks`) are emitted once, masked to the lanes in range, with the
    failing lanes reported in a cold branch, not twice (an unchecked side and a masked side):
    half the checked code of Genesis' narrow phase, its compile 57.5 -> 52.7 s of CPU
    (docs/performance.md, glbuild). The checks stay, and the results equal the serial task's."""
    monkeypatch.setattr(work_estimate, "LANES_WORK", 0)
    seen = _compiled_ir(monkeypatch)
    (o1, c1), kinds, lanes = _lane_kernel_run(64, True, monkeypatch)
    assert kinds == ["range"] and lanes[0] > 1
    assert "oob.fail" in seen[-1] and "oob.masked" not in seen[-1]
    (o0, c0), _, _ = _lane_kernel_run(64, False, monkeypatch)
    assert o1.tobytes() == o0.tobytes() and (c1 == c0).all()


def test_lane_task_indexes_small_fields_in_i32(monkeypatch, wide_target):
    """A lane task's gathers and scatters into a field of fewer than 2**31 elements compute the
    element index in `<W x i32>` (`spmd._narrow_elements`), not `<W x i64>` (four registers a
    vector at 32 lanes; Genesis' narrow phase compiled in ~0.7 s of CPU less, 14.7 -> 14.0;
    docs/performance.md, glbuild2); the results equal the serial task's bit for bit."""
    import re
    monkeypatch.setattr(work_estimate, "LANES_WORK", 0)
    seen = _compiled_ir(monkeypatch)
    (o1, c1), kinds, lanes = _lane_kernel_run(64, True, monkeypatch)
    assert kinds == ["range"] and lanes[0] > 1
    geps = re.findall(r"getelementptr (?:inbounds )?float, ptr %[^,]+, (<\d+ x i\d+>)", seen[-1])
    assert geps and all(t.endswith("i32>") for t in geps), geps  # pos[p, b], out[p, b]
    (o0, c0), _, _ = _lane_kernel_run(64, False, monkeypatch)
    assert o1.tobytes() == o0.tobytes() and (c1 == c0).all()


def test_heavy_loops_stay_serial_below_512_bit_vectors(monkeypatch):
    """Without 512-bit vectors (here: x86-64-v3, AVX2, whose masked scatters LLVM expands lane
    by lane; the narrow phase's lane task compiled for minutes) the loop stays serial."""
    if not codegen.heavy_lanes(options.llvm_codegen_options()):
        pytest.skip("the host has no 512-bit vectors: the default is what is tested")
    monkeypatch.setattr(work_estimate, "LANES_WORK", 0)
    assert _lane_kernel_run(64, True, monkeypatch)[1] == ["range"]
    monkeypatch.setenv("SPIRAD_CPU_TARGET", "x86-64-v3")
    assert not codegen.heavy_lanes(options.llvm_codegen_options())
    assert _lane_kernel_run(64, True, monkeypatch)[1] == ["serial"]


def test_lane_locals_stored_without_blends_where_no_lane_reads_them(monkeypatch, wide_target):
    """In a lane task an ALLOCA, and a STORE directly in its ALLOCA's block, write every lane
    (`spmd_scoped_locals`: no lane inactive there reads the old value), not the blend
    `select(mask, new, old)` that kept every local's old value live to the task's entry (Genesis'
    narrow phase: 58,228 vector phis, its compile 50 -> 15 s of CPU; docs/performance.md,
    glcomp). Stores inside a nested IF or loop, which lanes left out must not change, stay
    blends; the outputs equal the serial task's bit for bit, after a varying CONTINUE and BREAK."""
    monkeypatch.setattr(work_estimate, "LANES_WORK", 0)
    seen = _compiled_ir(monkeypatch)

    def run(lanes_on):
        envs = 64
        n_pairs, pos, out = _pair_fields(envs, lanes_on, 297, monkeypatch)

        @sd.kernel
        def narrow():
            sd.loop_config(serialize=True)
            for b in range(envs):
                kept = 1.0  # assigned only under the pair loop's masks, read after it
                for p in range(n_pairs[b]):
                    scoped_z = pos[p, b]
                    if scoped_z > 0.8:
                        kept += 1.0
                        continue
                    scoped_z = scoped_z * 3.0  # in its ALLOCA's block, after a CONTINUE
                    w = 0.0
                    for k in range(4):
                        w += scoped_z
                        if w > 2.0:
                            break
                    scoped_z = scoped_z + w
                    if scoped_z < 0.0:
                        scoped_z = -scoped_z  # nested: a blend
                    kept = kept * 0.5 + scoped_z
                    out[p, b] = scoped_z
                out[7, b] = kept
        narrow()
        return out.to_numpy(), _kinds(narrow)

    lanes_out, kinds = run(True)
    lane_ir = seen[-1]
    serial_out, kinds0 = run(False)
    assert kinds == ["range"] and kinds0 == ["serial"]
    assert lanes_out.tobytes() == serial_out.tobytes() and serial_out.any()
    slot = re.search(r'%"(scoped_z[^"]*)" = alloca <(\d+) x float>', lane_ir)
    assert slot is not None and int(slot.group(2)) > 1
    loads = re.findall(r'load <\d+ x float>, (?:ptr|<\d+ x float>\*) %"' + re.escape(slot.group(1))
                       + '"$', lane_ir, re.M)
    # reads: the three statements' uses and the nested IF's blend; without blend-free stores
    # the ALLOCA and the three stores in its block load the old value too (8)
    assert len(loads) == 4, len(loads)


def _solver_kernel_run(envs: int, islands: int, monkeypatch, sweeps: int = 1):
    """A Genesis-solver-shaped loop at one worker (`_kernel_solve_monolith`): per env (and per
    island, with `islands` > 0: the Newton loop nested in a loop over them), Newton iterations
    up to a count read from a scalar field, each first testing the env's own convergence flag
    (`break`), over `sweeps` dof loop nests whose trip counts are read from memory; returns the
    outputs, the task kinds and the env loop body's `iteration_work` and `lane_work`."""
    monkeypatch.setenv("SPIRAD_INDEPENDENT_LOOPS", "0")
    monkeypatch.setenv("SPIRAD_ENV_LANES", "1")
    sd.init(arch=sd.cpu, offline_cache=False, cpu_max_num_threads=1)
    estimates, worth = [], work_estimate.worth_lanes

    def recording(loop, min_trips):
        estimates.append((work_estimate.iteration_work(loop.blocks[0]),
                          work_estimate.lane_work(loop.blocks[0])))
        return worth(loop, min_trips)
    monkeypatch.setattr(work_estimate, "worth_lanes", recording)
    rng = np.random.default_rng(298)
    iters = sd.field(sd.i32, shape=())
    n = sd.field(sd.i32, shape=envs)  # 0 to 3 dofs per env
    improved = sd.field(sd.i32, shape=envs)
    h = sd.field(sd.f32, shape=(4, 4, envs))
    x = sd.field(sd.f32, shape=(4, envs))
    iters[None] = 5
    n.from_numpy(rng.integers(0, 4, envs).astype(np.int32))
    h.from_numpy(rng.uniform(0.1, 1.0, (4, 4, envs)).astype(np.float32))

    @sd.func
    def newton(b: int):
        improved[b] = 1 if n[b] > 0 else 0
        for it in range(iters[None]):
            if improved[b] == 0:
                break
            step = 0.0
            for _s in sd.static(range(sweeps)):
                for i in range(n[b]):
                    for j in range(n[b]):
                        for k in range(n[b]):
                            for m in range(n[b]):
                                d = h[i, j, b] * h[k, m, b] - x[i, b] * h[m, k, b]
                                x[i, b] += 0.01 * d / (1.0 + d * d)
                                step += sd.abs(d)
            if step < 0.5 * (it + 1):
                improved[b] = 0

    @sd.kernel
    def solve():
        sd.loop_config(serialize=True)
        for b in range(envs):
            if sd.static(islands):
                for _ in range(islands):
                    newton(b)
            else:
                newton(b)
    solve()
    return x.to_numpy(), _kinds(solve), estimates


def test_iterative_solve_stays_serial(monkeypatch, wide_target):
    """An env loop whose body is an iterative solve (a top-level loop ending at its own
    `break`), as Genesis' constraint solver's Newton loop (~3.5e8 estimated: 55 against 53 us
    in lanes, 12-14 us slower in box's step, docs/performance.md, gbox), counts one pass of it
    (`lane_work`) and stays in the serial task, though its `iteration_work` passes
    `LANES_WORK`; with the plain estimate it ran in lanes, with the same results. The same
    loop nested in another loop of the body (as the narrow phase's MPR iterations) is counted
    as before and runs in lanes."""
    envs = max(64, fewest_lane_trips(options.llvm_codegen_options()))
    out, kinds, est = _solver_kernel_run(envs, 0, monkeypatch)
    assert len(est) == 1 and est[0][1] < work_estimate.LANES_WORK <= est[0][0], est
    assert kinds == ["serial"]
    lane_work = work_estimate.lane_work
    monkeypatch.setattr(work_estimate, "lane_work", work_estimate.iteration_work)
    out_lanes, kinds_lanes, _ = _solver_kernel_run(envs, 0, monkeypatch)
    assert kinds_lanes == ["range"]
    assert out_lanes.tobytes() == out.tobytes() and out.any()
    monkeypatch.setattr(work_estimate, "lane_work", lane_work)
    out2, kinds2, est2 = _solver_kernel_run(envs, 2, monkeypatch)
    assert kinds2 == ["range"] and est2[0][1] == est2[0][0] >= work_estimate.LANES_WORK, est2


def test_generic_iterative_solve_stays_serial(monkeypatch, wide_target):
    """Genesis' constraint solver in ndarray mode (`_kernel_solve_monolith`, Franka, `n_envs`
    256) is generic code: its dof and island loops' trip counts are read from memory, so one
    pass of its Newton loop was estimated at 7.7e7 (2.2e7 in field mode, where they are
    constants), past the former `LANES_WORK` (2**26): a lane task of 2.7 MB of LLVM IR that
    cost 15 s of the cold build (16.1 against 1.2 s serial) for 18 us of a ~2 ms step
    (docs/performance.md, gndbuild). A solve whose one pass is estimated in that range
    (five sweeps of the dof loops here) stays in the serial task (the same solve in lanes
    gives the serial results: `test_iterative_solve_stays_serial`)."""
    envs = max(64, fewest_lane_trips(options.llvm_codegen_options()))
    out, kinds, est = _solver_kernel_run(envs, 0, monkeypatch, sweeps=5)
    assert len(est) == 1 and 1 << 26 <= est[0][1] < work_estimate.LANES_WORK, est
    assert kinds == ["serial"] and out.any()

def _mass_solve_run(envs: int, gather: bool, lanes_on: bool, monkeypatch):
    """A Genesis mass-matrix-solve-shaped env loop at one worker (`func_compute_qacc`): per
    env, forward substitution over a block of dofs whose bounds are read per dof (uniform over
    the envs), the env index last in every field; with `gather`, the matrix row is read
    through a per-env permutation (a gather in lanes). Returns the outputs, the task kinds and
    the loop body's `iteration_work`."""
    monkeypatch.setenv("SPIRAD_INDEPENDENT_LOOPS", "0")
    monkeypatch.setenv("SPIRAD_ENV_LANES", "1" if lanes_on else "0")
    sd.init(arch=sd.cpu, offline_cache=False, cpu_max_num_threads=1)
    estimates, worth = [], work_estimate.worth_lanes

    def recording(loop, min_trips):
        estimates.append(work_estimate.iteration_work(loop.blocks[0]))
        return worth(loop, min_trips)
    monkeypatch.setattr(work_estimate, "worth_lanes", recording)
    rng = np.random.default_rng(301)
    n = 12
    end = sd.field(sd.i32, shape=n)  # each dof's block end: blocks of 4
    perm = sd.field(sd.i32, shape=(n, envs))
    m = sd.field(sd.f32, shape=(n, n, envs))
    f = sd.field(sd.f32, shape=(n, envs))
    acc = sd.field(sd.f32, shape=(n, envs))
    end.from_numpy((np.arange(n) // 4 * 4 + 4).astype(np.int32))
    perm.from_numpy(np.stack([rng.permutation(n) for _ in range(envs)], 1).astype(np.int32))
    m.from_numpy(rng.uniform(0.5, 1.5, (n, n, envs)).astype(np.float32))
    f.from_numpy(rng.uniform(-1.0, 1.0, (n, envs)).astype(np.float32))

    @sd.kernel
    def solve():
        sd.loop_config(serialize=True)
        for d, b in sd.ndrange(n, envs):
            if d % 4 == 0:
                for i in range(d, end[d]):
                    s = f[i, b]
                    for j in range(d, i):
                        r = perm[i, b] if sd.static(gather) else i
                        s -= m[r, j, b] * acc[j, b]
                    acc[i, b] = s / (m[i, i, b] + 4.0)
    solve()
    return acc.to_numpy(), _kinds(solve), estimates


def test_a_light_loop_of_vector_accesses_runs_in_lanes(monkeypatch, wide_target):
    """A light env loop (below `LANES_WORK`) whose accesses are consecutive over the envs and
    whose loops' trips are uniform runs in lanes (`lane_streams.streams`: Genesis' mass matrix
    solve, 50 -> 38 us in box's step, docs/performance.md, glane2), with the serial task's
    results bit for bit; the same loop reading its matrix rows through a per-env permutation
    (gathers) stays in the serial task."""
    envs = max(64, fewest_lane_trips(options.llvm_codegen_options()))
    out, kinds, est = _mass_solve_run(envs, False, True, monkeypatch)
    assert est and max(est) < work_estimate.LANES_WORK, est
    assert kinds.count("range") == 1, kinds
    serial, kinds_off, _ = _mass_solve_run(envs, False, False, monkeypatch)
    assert kinds_off == ["serial"]
    assert out.tobytes() == serial.tobytes() and out.any()
    out_g, kinds_g, _ = _mass_solve_run(envs, True, True, monkeypatch)
    assert kinds_g == ["serial"], kinds_g
    serial_g, _, _ = _mass_solve_run(envs, True, False, monkeypatch)
    assert out_g.tobytes() == serial_g.tobytes()
