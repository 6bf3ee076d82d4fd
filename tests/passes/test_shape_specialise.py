"""passes/shape_specialise and the launch path's choice of program: a kernel taking ndarrays is
compiled for the shapes of its first launch (extents constant), and every other shape set runs
the generic program, compiled once.

A launch whose shapes differ from the specialised ones must never run the specialised program:
the kernels here read their arrays' extents (loop bounds, values written), so a program of the
wrong shapes gives a wrong result or leaves elements unwritten. Shapes alternate A, B, A, B
(eagerly, in adjoints, in launch graphs and across `init()` with the offline cache); an
out-of-range index read from memory is still reported by a specialised program; and an access
the constants prove in range has no check left (the IR-level test fails without the pass).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradOutOfBoundsError
from kernel_ir.index_range import checked_accesses
from kernel_ir.nodes import VERSIONED, walk
from kernel_ir.ops import Op
from tests.support.archs import EVERY_ARCH, exactly, test_archs
from tests.support.random_grad_check import check_program

SHAPES = ((3, 5), (4, 2), (3, 5), (4, 2), (6, 7))


def _arr(values, dtype=sd.f32, **kw):
    a = sd.ndarray(dtype, shape=np.shape(values), **kw)
    a.from_numpy(np.asarray(values, dtype=np.float32 if dtype == sd.f32 else np.int32))
    return a


@sd.kernel
def scaled(x: sd.types.ndarray(), y: sd.types.ndarray(), v: sd.types.ndarray()):
    """Extents as loop bounds and as values; a vector-element ndarray (element axes in its
    shape)."""
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            y[i, j] = x[i, j] * 2.0 + x.shape[1] * 100.0 + i
    for k in range(v.shape[0]):
        v[k] = v[k] + sd.Vector([v.shape[0] * 1.0, y.shape[0] * 1.0])


@test_archs(EVERY_ARCH)
def test_shapes_a_b_a_each_right(arch):
    sd.init(arch=arch)
    rng = np.random.default_rng(1)
    for n, m in SHAPES:
        xv = rng.random((n, m), dtype=np.float32)
        x, y = _arr(xv), _arr(np.zeros((n, m)))
        v = sd.Vector.ndarray(2, sd.f32, shape=m)
        v.from_numpy(np.ones((m, 2), np.float32))
        for _ in range(2):  # the second launch takes the repeated-launch path
            scaled(x, y, v)
        np.testing.assert_allclose(y.to_numpy(), xv * 2 + m * 100 + np.arange(n)[:, None],
                                   rtol=1e-6)
        np.testing.assert_array_equal(v.to_numpy(), 1 + 2 * np.array([[m, n]] * m, np.float32))
    # the first shapes' program and one generic program for all the others
    assert len(scaled._cache) == 2, list(scaled._cache)


@test_archs(EVERY_ARCH)
def test_a_loaded_index_out_of_range_is_still_reported(arch):
    sd.init(arch=arch)

    @sd.kernel
    def gather(a: sd.types.ndarray(), idx: sd.types.ndarray(), out: sd.types.ndarray()):
        for i in range(idx.shape[0]):
            out[i] = a[idx[i], 1]

    a = _arr(np.arange(12).reshape(4, 3))
    out = _arr(np.zeros(3))
    gather(a, _arr([3, 0, 4], sd.i32), out)  # the first launch: the specialised program
    with pytest.raises(SpiradOutOfBoundsError, match="kernel gather .*'a'"):
        sd.sync()
    np.testing.assert_array_equal(out.to_numpy()[:2], [10, 1])
    gather(a, _arr([2, 1, 0], sd.i32), out)
    sd.sync()
    np.testing.assert_array_equal(out.to_numpy(), [7, 4, 1])


@sd.kernel
def rows(a: sd.types.ndarray(), b: sd.types.ndarray()):
    sd.loop_config(serialize=True)
    for i in range(4):
        for j in range(b.shape[1]):
            a[i, j] = b[i + 1, j] * 2.0 + b[0, j]


def _backend_tasks(kernel, *args):
    """The tasks the CPU backend compiled for this launch's program."""
    kernel(*args)
    sd.sync()
    (_, c), = [(k, v) for k, v in kernel._cache.items()]
    return c.backend_tl.tasks


def test_a_proven_access_has_no_check_and_no_guard():
    sd.init(arch=sd.cpu, offline_cache=False)
    bv = np.arange(15, dtype=np.float32).reshape(5, 3)
    a, b = _arr(np.zeros((4, 3))), _arr(bv)
    tasks = _backend_tasks(rows, a, b)
    np.testing.assert_array_equal(a.to_numpy(), bv[1:] * 2 + bv[0])
    nodes = [n for t in tasks for n in walk(t.body)]
    assert not [n for t in tasks for n in checked_accesses(t)]
    assert not [n for n in nodes if n.op == Op.IF and n.arg is VERSIONED]  # nothing to guard
    assert not [n for n in nodes if n.op == Op.NDARRAY_SHAPE]
    assert {n.arg.shape for n in nodes if n.op == Op.GLOBAL_LOAD} == {(5, 3)}


def test_switched_off_the_generic_program_keeps_its_checks(monkeypatch):
    monkeypatch.setenv("SPIRAD_SHAPE_SPECIALISE", "0")
    sd.init(arch=sd.cpu, offline_cache=False)
    a, b = _arr(np.zeros((4, 3))), _arr(np.zeros((5, 3)))
    tasks = _backend_tasks(rows, a, b)
    nodes = [n for t in tasks for n in walk(t.body)]
    assert [n for n in nodes if n.op == Op.IF and n.arg is VERSIONED] or \
        [n for t in tasks for n in checked_accesses(t)]


def test_shape_agnostic_compiles_the_generic_program():
    """Inside `shape_agnostic()` (the GPU sizer, the CUDA device-check bundle: callers that
    replay a program with other shapes) a first launch compiles the generic program, and a
    launch after it, outside, still gets a program specialised on its shapes."""
    from spirad.runtime.shape_policy import shape_agnostic
    sd.init(arch=sd.cpu, offline_cache=False)
    a, b = _arr(np.zeros((4, 3))), _arr(np.zeros((5, 3)))
    with shape_agnostic():
        tasks = _backend_tasks(rows, a, b)
    nodes = [n for t in tasks for n in walk(t.body)]
    assert [n for n in nodes if n.op == Op.NDARRAY_SHAPE]  # extents read at run time
    assert {n.arg.shape for n in nodes if n.op == Op.GLOBAL_LOAD} != {(5, 3)}
    keys = [k for k in rows._cache if k[0] == sd._state.current().epoch]
    assert len(keys) == 1 and len(keys[0]) == 4  # the generic program only
    rows(_arr(np.zeros((4, 3))), _arr(np.zeros((5, 3))))  # new arrays: a new plan
    keys = [k for k in rows._cache if k[0] == sd._state.current().epoch]
    assert len(keys) == 2  # and, outside, the one specialised on these shapes


@sd.kernel
def extent_of(x: sd.types.ndarray(), out: sd.types.ndarray()):
    for i in range(out.shape[0]):
        out[i] = x.shape[0] * 10 + x.shape[1]


@pytest.mark.parametrize("arch", [sd.cpu, sd.vulkan])
def test_the_offline_cache_serves_no_specialisation_to_other_shapes(arch, tmp_path):
    """A new init() forgets the kernel's programs; the offline cache keeps them. Each process
    (init) launches first with the other shapes: a specialisation served under the signature
    alone would write the extents of the shapes stored first."""
    for order in (((2, 3), (5, 7)), ((5, 7), (2, 3)), ((2, 3), (5, 7))):
        sd.init(arch=arch, offline_cache=True, offline_cache_file_path=str(tmp_path))
        for shape in order + order[:1]:
            out = _arr(np.zeros(4), sd.i32)
            extent_of(_arr(np.zeros(shape)), out)
            np.testing.assert_array_equal(out.to_numpy(), [shape[0] * 10 + shape[1]] * 4)


@test_archs(EVERY_ARCH)
def test_gradients_with_shapes_a_b_a(arch):
    """The adjoint of each program, with a loop whose trip count is an extent and a local
    carried through it (an adstack sized from the shapes)."""
    sd.init(arch=arch)

    @sd.kernel
    def horner(x: sd.types.ndarray(), y: sd.types.ndarray()):
        for i in range(y.shape[0]):
            v = 1.0 + i
            for j in range(x.shape[0]):
                v = v * x[j] + 0.5
            y[i] = v

    rng = np.random.default_rng(2)
    for n, m in ((3, 2), (5, 4), (3, 2), (2, 3)):
        xv = rng.random(n) + 0.5
        x, y = _arr(xv, needs_grad=True), _arr(np.zeros(m), needs_grad=True)
        horner(x, y)
        y.grad.from_numpy(np.ones(m, np.float32))
        horner.grad(x, y)
        want_y, want_g = [], np.zeros(n)
        for i in range(m):
            vs = [1.0 + i]
            for j in range(n):
                vs.append(vs[-1] * xv[j] + 0.5)
            want_y.append(vs[-1])
            for j in range(n):  # d v_n / d x_j = v_j * prod_{k > j} x_k
                want_g[j] += vs[j] * np.prod(xv[j + 1:])
        np.testing.assert_allclose(y.to_numpy(), want_y, rtol=1e-5)
        np.testing.assert_allclose(x.grad.to_numpy(), want_g, rtol=1e-5)


@test_archs(EVERY_ARCH)
def test_graph_replay_after_a_shape_change(arch):
    sd.init(arch=arch)

    @sd.kernel
    def bump(a: sd.types.ndarray(), s: sd.f32):
        for i in range(a.shape[0]):
            a[i] += s + a.shape[0]

    graphs = []
    for n in (3, 6, 3):
        a = _arr(np.zeros(n))
        g = sd.Graph()
        with g.capture():
            bump(a, 1.0)
        graphs.append((g, a, n))
    for g, a, n in graphs + graphs[::-1]:
        before = a.to_numpy()
        g.replay()
        g.replay(s=2.0)
        np.testing.assert_array_equal(a.to_numpy(), before + (1 + n) + (2 + n))


@test_archs(exactly("vulkan"), default_fp=sd.f64)
def test_the_gpu_sizer_launches_its_generic_programs(arch):
    """scripts/fuzz_grad.py --features jumps, seed 230012: the GPU sizer launches its kernels
    outside the launch path (`gpu_sizer.kernels`) with scratch ndarrays that grow; the program
    of the first launch, specialised on 64-element scratch arrays, indexed a larger launch's
    past its constant extent (`SpiradOutOfBoundsError` in `sizer_eval`)."""
    check_program(230012, features=("jumps",))


@dataclasses.dataclass(frozen=True)
class _Pair:
    src: sd.types.ndarray()
    dst: sd.types.ndarray()


@test_archs(EVERY_ARCH)
def test_dataclass_member_ndarrays_a_b_a(arch):
    """The ndarrays of a dataclass argument are launch arguments too: their shapes key the
    program like a plain ndarray's."""
    sd.init(arch=arch)

    @sd.kernel
    def copy_rows(p: _Pair, s: sd.f32):
        for i in range(p.dst.shape[0]):
            for j in range(p.src.shape[1]):
                p.dst[i, j] = p.src[i, j] * s + p.src.shape[1]

    for n, m in ((2, 3), (4, 5), (2, 3)):
        sv = np.arange(n * m, dtype=np.float32).reshape(n, m)
        p = _Pair(_arr(sv), _arr(np.zeros((n, m))))
        copy_rows(p, 2.0)
        np.testing.assert_array_equal(p.dst.to_numpy(), sv * 2 + m)
    assert len(copy_rows._cache) == 2


@test_archs(EVERY_ARCH)
def test_tape_with_shapes_a_b_a(arch):
    """A Tape's backward pass launches the adjoint of the program each launch ran."""
    sd.init(arch=arch)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def sq(x: sd.types.ndarray()):
        for i in range(x.shape[0]):
            loss[None] += x[i] * x[i] * x.shape[0]

    for n in (3, 5, 3, 5):
        xv = np.arange(1, n + 1, dtype=np.float32)
        x = _arr(xv, needs_grad=True)
        loss[None] = 0.0
        with sd.ad.Tape(loss=loss):
            sq(x)
        np.testing.assert_allclose(loss[None], (xv * xv).sum() * n, rtol=1e-6)
        np.testing.assert_allclose(x.grad.to_numpy(), 2 * xv * n, rtol=1e-6)
