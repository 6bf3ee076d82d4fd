"""Quadrants' data model and accepted API: `sd.tensor(..., backend=)`, `Vector.tensor`,
`Matrix.tensor`, `sd.Tensor` / `VectorTensor` / `MatrixTensor` / `Field` / `Ndarray`,
dataclass-typed kernel and func parameters (flattened: ndarray members are launch arguments),
numpy bool arrays as arguments, zero-copy `to_torch(copy=False)`, the materialize hook,
`@sd.kernel(fastcache=...)`, keyword arguments at launch, `perf_dispatch`, log levels."""
import contextlib
import dataclasses

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, test_archs


@dataclasses.dataclass(frozen=True)
class Links:
    vel: sd.Tensor
    stiff: int


@dataclasses.dataclass(frozen=True)
class State:
    pos: sd.Tensor
    scale: sd.Tensor
    links: Links
    rot: sd.Tensor


def _state(backend, n):
    return State(sd.tensor(sd.f32, (n,), backend=backend), sd.tensor(sd.f32, (), backend=backend),
                 Links(sd.Vector.tensor(2, sd.f32, (n,), backend=backend), 3),
                 sd.Matrix.tensor(2, 2, sd.f32, (n,), backend=backend))


@sd.func
def _bump(s: State, i, k: sd.template()):
    s.pos[i] += s.scale[None] * s.links.stiff * k


@sd.kernel(fastcache=True)
def _step(s: State, dt: sd.f32):
    for i in range(s.pos.shape[0]):
        _bump(s, i, 2)
        s.links.vel[i][1] = s.pos[i] * dt
        s.rot[i] = sd.Matrix([[1.0, 0.0], [0.0, 1.0]]) * s.pos[i]


@test_archs()
@pytest.mark.parametrize("backend", [sd.Backend.FIELD, sd.Backend.NDARRAY], ids=["field", "ndarray"])
def test_dataclass_parameters(arch, backend):
    for n in (3, 5):
        s = _state(backend, n)
        s.pos.from_numpy(np.arange(n, dtype=np.float32))
        s.scale.fill(0.5)
        _step(s, dt=0.25)  # keyword argument at launch
        want = np.arange(n) + 0.5 * 3 * 2
        np.testing.assert_allclose(s.pos.to_numpy(), want)
        np.testing.assert_allclose(s.links.vel.to_numpy()[:, 1], want * 0.25)
        np.testing.assert_allclose(s.rot.to_numpy()[:, 1, 1], want)
        assert isinstance(s.pos, sd.Tensor) and isinstance(s.links.vel, sd.VectorTensor)
        assert isinstance(s.rot, sd.MatrixTensor) and not isinstance(s.pos, sd.VectorTensor)
        want_kind = sd.Field if backend == sd.Backend.FIELD else sd.Ndarray
        assert isinstance(s.pos, want_kind) and s.rot.element_shape == (2, 2)


def test_ndarray_mode_compiles_once():
    sd.init(arch=sd.cpu)
    _step(_state(sd.Backend.NDARRAY, 2), 1.0)
    assert len(_step._cache) == 1
    for n in (4, 7):
        _step(_state(sd.Backend.NDARRAY, n), 1.0)
    # other sizes, other arrays: one more program, shape-agnostic, shared by every other size
    # (the first is specialised on its shapes: passes/shape_specialise)
    assert len(_step._cache) == 2


@test_archs()
def test_tensor_annotation_takes_fields_and_ndarrays(arch):
    @sd.kernel
    def double(x: sd.Tensor):
        for i in range(4):
            x[i] *= 2.0

    for backend in (sd.Backend.FIELD, sd.Backend.NDARRAY):
        t = sd.tensor(sd.f32, 4, backend=backend, layout=(0,), needs_grad=True)
        t.from_numpy(np.ones(4, np.float32))
        double(t)
        np.testing.assert_array_equal(t.to_numpy(), [2, 2, 2, 2])
        assert t.has_grad() and t._unwrap() is t
    with pytest.raises(sd.SpiradValueError, match="permutation"):
        sd.tensor(sd.f32, (2, 3), layout=(0, 0))


@test_archs(archs=EVERY_ARCH)
def test_numpy_bool_arguments(arch):
    @sd.kernel
    def flip(m: sd.types.ndarray(), out: sd.types.ndarray()):
        for i in range(m.shape[0]):
            out[i] = 1 if m[i] else 0
            m[i] = not m[i]

    m = np.array([True, False, True], dtype=bool)
    out = np.zeros(3, np.int32)
    flip(m, out)
    np.testing.assert_array_equal(out, [1, 0, 1])
    np.testing.assert_array_equal(m, [False, True, False])


def test_to_torch_zero_copy():
    torch = pytest.importorskip("torch")
    sd.init(arch=sd.cpu)
    x = sd.field(sd.f32, shape=3)
    b = sd.ndarray(sd.u1, shape=2)
    t = x.to_torch(copy=False)

    @sd.kernel
    def k(b: sd.types.ndarray()):
        for i in range(3):
            x[i] = i + 1.0
        b[1] = True

    k(b)
    np.testing.assert_array_equal(t.numpy(), [1, 2, 3])  # the live memory
    t[0] = 7.0
    assert x[0] == 7.0
    words = b.to_torch(copy=False)  # u1: the 0/1 int32 words
    assert words.dtype == torch.int32 and words.tolist() == [0, 1]
    assert b.to_torch().dtype == torch.bool
    assert torch.utils.dlpack.from_dlpack(x.to_dlpack()).tolist() == [7, 2, 3]


@contextlib.contextmanager
def _deferred_fills():
    """The materialize hook wrapped as Genesis wraps it: fills appended to the yielded list run
    at the next materialization (Genesis defers fills of fresh fields this way)."""
    from spirad.runtime.program_hooks import Program
    sd.init(arch=sd.cpu)
    pending = []
    original = Program.materialize

    def materialize_then_fill(self):
        original(self)
        work = pending.copy()
        pending.clear()
        for f, v in work:
            f.fill(v)
    Program.materialize = materialize_then_fill
    try:
        yield pending
    finally:
        Program.materialize = original


def test_materialize_hook_runs_deferred_work():
    with _deferred_fills() as pending:
        x = sd.field(sd.f32, shape=())
        pending.append((x, 2.5))  # deferred, as Genesis defers fills of fresh fields
        out = sd.field(sd.f32, shape=())

        @sd.kernel
        def k():
            out[None] = x[None] * 2

        k()
        assert out[None] == 5.0 and not pending


def test_materialize_hook_runs_before_a_host_read():
    """Genesis defers the fill of a fresh constant field to the materialize hook and reads it
    from Python before any launch (`collider_info.n_valid_link_pairs[None]` sizes its broad
    phase): the read must run the hook first, as Quadrants' host accessors do."""
    with _deferred_fills() as pending:
        n = sd.field(sd.i32, shape=())
        pending.append((n, 7))
        assert n[None] == 7 and not pending  # a read before any launch
        m = sd.field(sd.i32, shape=(2,))
        pending.append((m, 3))
        m[0] = 5  # a write runs the hook first, then writes
        np.testing.assert_array_equal(m.to_numpy(), [5, 3])


def test_perf_dispatch_picks_the_first_compatible():
    sd.init(arch=sd.cpu)
    calls = []

    @sd.perf_dispatch(get_geometry_hash=lambda a, n: n, warmup=1, active=2)
    def op(a, n): ...

    @op.register(is_compatible=lambda a, n: n > 10)
    def big(a, n):
        calls.append("big")

    @op.register
    def small(a, n):
        calls.append("small")

    op(None, 3)
    op(None, 30)
    assert calls == ["small", "big"]
    with pytest.raises(sd.SpiradSyntaxError, match="prototype"):
        @op.register
        def wrong(a, m):
            pass


def test_accepted_init_keywords_and_names():
    sd.init(arch=sd.x64, enable_fallback=False, check_out_of_bound=False, fast_math=True,
            force_scalarize_matrix=True, advanced_optimization=True, cfg_optimization=False,
            ad_stack_sparse_threshold_bytes=1 << 20, num_compile_threads=1,
            log_level=sd.WARN, offline_cache_max_size_of_files=1 << 20)
    assert sd.types.vector(3).dtype is float and sd.u64.bits == 64
    assert sd.Layout.SOA != sd.Layout.AOS and sd.ERROR == "error"
    with pytest.raises(sd.SpiradValueError, match="unknown keyword"):
        sd.init(arch=sd.cpu, no_such_option=1)
    with pytest.raises(sd.SpiradTypeError, match="unknown option"):
        sd.kernel(nope=1)


@test_archs()
def test_subgroup_of_one_invocation_and_refused_cooperation(arch):
    out = sd.field(sd.i32, shape=(4, 3))

    @sd.kernel
    def k():
        for i in range(4):
            out[i, 0] = sd.cast(sd.simt.subgroup.invocation_id(), sd.i32)
            out[i, 1] = sd.simt.subgroup.reduce_add(i * 3) + sd.simt.subgroup.broadcast(i, 0)
            out[i, 2] = sd.cast(sd.simt.subgroup.ballot(i % 2 == 1), sd.i32)

    k()
    np.testing.assert_array_equal(out.to_numpy(), [[0, 0, 0], [0, 4, 1], [0, 8, 0], [0, 12, 1]])

    @sd.kernel
    def shared():
        for i in range(4):
            a = sd.simt.block.SharedArray((4,), sd.f32)
            sd.simt.block.sync()

    with pytest.raises(sd.SpiradNotSupportedError, match="wait for each other"):
        shared()
