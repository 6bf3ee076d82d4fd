"""`sd.init(deterministic=True)` (passes/deterministic.py): reductions, scatter-adds and
adjoints that scatter into `.grad` give the same bits run after run, on every arch, whatever the
CPU's or lavapipe's thread count — and the bits of the index-order float32 sum.

The workload (`tests/support/determinism.py`) sums values over twenty binary orders of
magnitude, so another order gives other bits (`test_premise_order_changes_the_bits`). Without
the switch, on this machine, lavapipe's forward sum and adjoint differ from run to run and the
CPU's scatter and adjoint differ between 1 and 2 threads at 1M elements (docs/interop.md
"Deterministic runs" gives the measurement); the tests below assert the guarantee, not that
default mode is non-deterministic (it may happen to repeat itself)."""
import json
import os
import subprocess
import sys

import numpy as np
import spirad as sd
from kernel_ir import verifier
from kernel_ir.nodes import walk
from kernel_ir.ops import ATOMICS, Op
from passes.deterministic import order_sensitive, serialise
from tests.support import determinism as D
from tests.support.archs import EVERY_ARCH, test_archs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_premise_order_changes_the_bits():
    vals, _ = D.values()
    assert D.order_matters(vals)


@test_archs(archs=EVERY_ARCH)  # with metal, cuda and amdgpu (emulated)
def test_five_runs_bit_identical_in_index_order(arch):
    sd.init(arch=arch, deterministic=True, offline_cache=False)
    w = D.Workload()
    runs = [w.run() for _ in range(5)]
    first = D.digests(runs[0])
    for r in runs[1:]:
        assert D.digests(r) == first
    fwd, bins, grad, _ = runs[0]
    vals, idx = w.vals, w.idx
    # the parallel loops ran in index order: the sequential float32 sum, bit for bit
    assert fwd.tobytes() == D.sequential_sum(vals).tobytes()
    assert bins.tobytes() == D.sequential_scatter(vals, idx).tobytes()
    # and the adjoint is the gradient: x.grad = cos(x) * bins[idx], bins.grad = sum of sin(x)
    v = vals.astype(np.float64)
    np.testing.assert_allclose(grad[:D.N], np.cos(v) * bins[idx], rtol=1e-4, atol=1e-30)
    want = np.bincount(idx, np.sin(v), D.BINS)
    np.testing.assert_allclose(grad[D.N:], want, rtol=0, atol=1e-4 * np.bincount(idx, None, D.BINS).max())


@test_archs(archs=EVERY_ARCH)
def test_adstack_adjoint_matches_default_mode(arch):
    """The adjoint with an adstack and a scatter into `x.grad` (gather_loop) serialised: the
    gradient of the default mode, within rounding."""
    got = {}
    for det in (False, True):
        sd.init(arch=arch, deterministic=det, offline_cache=False)
        got[det] = D.Workload(4096).adstack_gradient()
    np.testing.assert_allclose(got[True], got[False], rtol=1e-5, atol=1e-5)


def _child(arch, det, threads, n, env=None):
    out = subprocess.run([sys.executable, "-m", "tests.support.determinism", arch, str(int(det)),
                          str(threads), "2", str(n)], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, **(env or {})}, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    runs = json.loads(out.stdout.strip().splitlines()[-1])
    assert runs[0] == runs[1]
    return runs[0]


def test_cpu_one_and_two_threads_bit_identical():
    """1M elements: enough that default mode splits the scatter and the adjoint over two
    threads (per-thread copies added at the end: other bits than one thread)."""
    assert _child("cpu", True, 1, 1_000_000) == _child("cpu", True, 2, 1_000_000)


def test_lavapipe_one_and_two_threads_bit_identical():
    """lavapipe's own thread count (LP_NUM_THREADS, per process) changes nothing either."""
    a = _child("vulkan", True, 1, D.N, {"LP_NUM_THREADS": "1"})
    b = _child("vulkan", True, 1, D.N, {"LP_NUM_THREADS": "2"})
    assert a == b


@sd.kernel
def _mixed(x: sd.template(), idx: sd.template(), f: sd.template(), n: sd.template(),
           slots: sd.template()):
    for i in x:
        f[idx[i]] += x[i]                          # float, shared: ordered
    for i in x:
        n[idx[i] % 4] += 1                         # int, result unused: left parallel
    for i in x:
        slots[i] = sd.atomic_add(n[0], 1)          # int, result used: ordered
    for i in x:
        x[i] += 1.0                                # float, but private: left parallel
    for i in x:
        sd.atomic_exchange(n[1], i)                # an exchange: the last one wins: ordered


def _launch_mixed(**init):
    """`_mixed` launched once on fresh fields; its launch plan."""
    sd.init(arch=sd.cpu, **init)
    _mixed(sd.field(sd.f32, 8), sd.field(sd.i32, 8), sd.field(sd.f32, 4), sd.field(sd.i32, 4),
           sd.field(sd.i32, 8))
    return _mixed._plans[0]


def test_which_loops_are_ordered():
    plan = _launch_mixed(deterministic=True, offline_cache=False)
    tl = plan.compiled.tl  # what autodiff sees; the backend's is serialised
    assert [t.kind for t in plan.compiled.backend_tl.tasks] == \
        ["serial", "range", "serial", "range", "serial"]
    assert [order_sensitive(t) for t in tl.tasks] == [True, False, True, False, True]
    ser = serialise(tl)
    verifier.verify_tasks(ser)
    assert [t.kind for t in ser.tasks] == ["serial", "range", "serial", "range", "serial"]
    chunked = serialise(tl, 16)
    verifier.verify_tasks(chunked)
    assert [t.ordered for t in chunked.tasks] == [True, False, True, False, True]


def test_offline_cache_never_replays_the_other_mode(tmp_path):
    """A kernel compiled (and stored) without the switch is compiled again with it, and back."""
    kinds = []
    for det in (False, True, False, True):
        plan = _launch_mixed(deterministic=det, offline_cache=True,
                             offline_cache_file_path=str(tmp_path))
        kinds.append(plan.compiled.backend_tl.tasks[0].kind)
    assert kinds == ["range", "serial", "range", "serial"]


@sd.kernel
def _bounded_sum(x: sd.template(), n: sd.template(), s: sd.template()):
    for i in range(n[None]):          # a range read from a field (on the device where it can)
        s[None] += x[i]


@sd.kernel
def _grid_sum(g: sd.template(), s: sd.template()):
    for i, j in g:                    # a 2-d loop: one task over 200 x 300 indices
        s[None] += g[i, j] * 0.5


@test_archs(archs=EVERY_ARCH)
def test_ranges_from_fields_and_2d_loops_in_index_order(arch):
    sd.init(arch=arch, deterministic=True, offline_cache=False)
    vals, _ = D.values(40_000, seed=2)
    x, n, s = sd.field(sd.f32, 40_000), sd.field(sd.i32, ()), sd.field(sd.f32, ())
    x.from_numpy(vals)
    for m in (0, 1, 33_333, 40_000):   # empty, one, not a multiple of lavapipe's chunk
        n[None] = m
        s[None] = 0.0
        _bounded_sum(x, n, s)
        assert s[None] == (np.float32(0) if m == 0 else D.sequential_sum(vals[:m]))
    g = sd.field(sd.f32, (200, 300))
    gv = (D.values(60_000, seed=3)[0]).reshape(200, 300)
    g.from_numpy(gv)
    s[None] = 0.0
    _grid_sum(g, s)
    assert s[None] == D.sequential_sum((gv * np.float32(0.5)).ravel())


def test_offline_cache_key_has_the_switch():
    from spirad.compile import offline_cache
    from spirad.runtime import state as st
    sd.init(arch=sd.cpu, offline_cache=False)
    a = offline_cache._options(st.current())
    sd.init(arch=sd.cpu, deterministic=True, offline_cache=False)
    b = offline_cache._options(st.current())
    assert a != b


def test_ordered_atomics_demoted():
    """In an ordered task no two iterations run at once: its atomics are plain read-modify-
    writes (no compare-and-swap loop on lavapipe's loop counter)."""
    plan = _launch_mixed(deterministic=True, offline_cache=False)
    from passes.demote_atomics import demote_atomics
    chunked = demote_atomics(serialise(plan.compiled.tl, 16))
    for t in chunked.tasks:
        if t.ordered:
            assert not any(m.op in ATOMICS for m in walk(t.body))
    assert any(m.op == Op.RANGE_FOR for m in walk(chunked.tasks[0].body))
