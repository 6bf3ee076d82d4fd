"""Launch graphs replayed as recordings (Vulkan: one command buffer re-submitted,
spirad/backends/spirv_replay.py; the other archs replay through their own paths): replays bit
for bit equal to eager launches for a chain of kernels over fields and ndarrays with scalars
rebound, many replays without a sync between them, eager launches in between; what invalidates
a recording (a new field growing a root buffer, a new shape or template value captured again)
records anew, never replays a stale one; adstack kernels and sizing misses inside a recorded
chain; ranges read from memory (indirect dispatches), asserts reported at the next sync, and a
rebound scalar that changes a range (new geometry: recorded again)."""
import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradAssertionError
from spirad import launch_graph
from spirad.runtime import state
from tests.support.archs import test_archs

N = 48


def _chain():
    """Eight kernels of a small step: fields, ndarrays, a scalar `dt`, a template value, a
    serial task and an atomic reduction."""
    x = sd.field(sd.f32, shape=N)
    v = sd.field(sd.f32, shape=N)
    energy = sd.field(sd.f32, shape=())

    @sd.kernel
    def force(f: sd.types.ndarray(), k: sd.template()):
        for i in range(N):
            f[i] = -k * x[i] + 0.1 * sd.sin(x[(i + 1) % N])

    @sd.kernel
    def kick(f: sd.types.ndarray(), dt: sd.f32):
        for i in range(N):
            v[i] += f[i] * dt

    @sd.kernel
    def drift(dt: sd.f32):
        for i in range(N):
            x[i] += v[i] * dt

    @sd.kernel
    def damp(c: sd.f32):
        for i in range(N):
            v[i] *= c

    @sd.kernel
    def mirror(f: sd.types.ndarray(), g: sd.types.ndarray()):
        for i in range(N):
            g[i] = f[N - 1 - i] + x[i]

    @sd.kernel
    def pin(g: sd.types.ndarray()):
        x[0] = 0.5 * x[0] + 1e-3 * g[0]  # a serial task

    @sd.kernel
    def total():
        energy[None] = 0.0
        for i in range(N):
            energy[None] += 0.5 * v[i] * v[i] + 0.5 * x[i] * x[i]

    def step(f, g, dt, c=0.999):
        force(f, 2)
        kick(f, dt)
        drift(dt)
        damp(c)
        mirror(f, g)
        pin(g)
        kick(g, dt)
        total()

    def state_of(f, g):
        return [x.to_numpy(), v.to_numpy(), f.to_numpy(), g.to_numpy(), energy.to_numpy()]

    def start(f, g):
        rng = np.random.default_rng(5)
        x.from_numpy(rng.standard_normal(N).astype(np.float32))
        v.from_numpy(np.zeros(N, np.float32))
        f.from_numpy(np.zeros(N, np.float32))
        g.from_numpy(np.zeros(N, np.float32))

    return step, state_of, start


def _equal(want, got):
    for u, w in zip(want, got):
        np.testing.assert_array_equal(u, w)


def _native(arch) -> bool:
    """The archs whose backends replay these launches themselves: the SPIR-V backends (a
    recorded command buffer on Vulkan, the dispatches made once on Metal)."""
    return arch in ("vulkan", "metal")


@test_archs()
def test_recorded_chain_is_bit_identical_to_eager_launches(arch):
    step, state_of, start = _chain()
    f, g = sd.ndarray(sd.f32, N), sd.ndarray(sd.f32, N)
    dts = [0.01, 0.02, 0.02, 0.005, 0.01, 0.03, 0.01, 0.01, 0.02, 0.005]
    start(f, g)
    for dt in dts:
        step(f, g, dt)
    want = state_of(f, g)
    start(f, g)
    gr = sd.Graph()
    with gr.capture():
        step(f, g, dts[0])
    native = launch_graph.stats.native_launches
    for dt in dts[1:]:  # no host read between replays: several submissions in flight
        gr.replay(dt=dt)
    _equal(want, state_of(f, g))
    if _native(arch):
        assert launch_graph.stats.native_launches - native == 9 * gr.launches
    # eager launches between replays, and replays without scalars after replays with them
    start(f, g)
    for dt in (0.01, 0.01, 0.02, 0.01):
        step(f, g, dt)
    want = state_of(f, g)
    start(f, g)
    gr.replay(dt=0.01)
    step(f, g, 0.01)
    gr.replay(dt=0.02)
    gr.replay(dt=0.01)
    _equal(want, state_of(f, g))


@test_archs()
def test_a_new_field_that_grows_a_root_buffer_records_again(arch):
    step, state_of, start = _chain()
    f, g = sd.ndarray(sd.f32, N), sd.ndarray(sd.f32, N)
    start(f, g)
    for _ in range(3):
        step(f, g, 0.01)
    want = state_of(f, g)
    start(f, g)
    gr = sd.Graph()
    with gr.capture():
        step(f, g, 0.01)
    gr.replay()
    be = state.backend()
    grown = getattr(getattr(be, "roots", None), "grown", None)
    big = sd.field(sd.f32, shape=1 << 20)  # 4 MiB: the fields' root buffer grows (SPIR-V)
    big.fill(3.0)
    gr.replay()
    _equal(want, state_of(f, g))
    if grown is not None:
        assert be.roots.grown > grown  # the recording's buffer was replaced: recorded again
    assert big.to_numpy()[-1] == 3.0


@test_archs()
def test_a_new_shape_or_template_value_is_captured_again(arch):
    y = sd.field(sd.f32, shape=8)

    @sd.kernel
    def scale(a: sd.types.ndarray(), k: sd.template(), s: sd.f32):
        for i in a:
            a[i] = a[i] * k + s + y[i % 8]

    def run(n, k, reps, graph):
        a = sd.ndarray(sd.f32, n)
        a.from_numpy(np.linspace(0, 1, n).astype(np.float32))
        if graph is None:
            for r in range(reps):
                scale(a, k, 0.5 + r)
        else:
            with graph.capture():
                scale(a, k, 0.5)
            for r in range(1, reps):
                graph.replay(s=0.5 + r)
        return a.to_numpy()

    y.from_numpy(np.arange(8, dtype=np.float32))
    gr = sd.Graph()
    for n, k in ((16, 2), (40, 2), (40, 3), (16, 2)):  # new shapes, template values: captured again
        np.testing.assert_array_equal(run(n, k, 4, gr), run(n, k, 4, None))
    other = sd.Graph()  # two graphs of one kernel, each with its own recording
    a, b = sd.ndarray(sd.f32, 16), sd.ndarray(sd.f32, 24)
    with gr.capture():
        scale(a, 2, 1.0)
    with other.capture():
        scale(b, 3, 1.0)
    for _ in range(3):
        gr.replay()
        other.replay()
    want_a, want_b = np.zeros(16, np.float32), np.zeros(24, np.float32)
    for _ in range(4):
        want_a = want_a * np.float32(2) + np.float32(1.0) + y.to_numpy()[np.arange(16) % 8]
        want_b = want_b * np.float32(3) + np.float32(1.0) + y.to_numpy()[np.arange(24) % 8]
    np.testing.assert_array_equal(a.to_numpy(), want_a)
    np.testing.assert_array_equal(b.to_numpy(), want_b)


@test_archs()
def test_adstack_kernel_inside_a_recorded_chain(arch):
    """A chain with a run-time loop kernel and its adjoint (adstacks: launched through the
    launch path, splitting the recording) replays like eager launches, including a sizing miss
    (a larger trip count on a later replay, rebound by name) and the analytic gradient."""
    x = sd.field(sd.f32, shape=8, needs_grad=True)
    y = sd.field(sd.f32, shape=8, needs_grad=True)
    z = sd.field(sd.f32, shape=8)

    @sd.kernel
    def prepare(trips: sd.i32):
        for i in range(8):
            x.grad[i] = 0.0
            y.grad[i] = 1.0
            z[i] = x[i] * trips

    @sd.kernel
    def powers(trips: sd.i32):
        for i in range(8):
            s = x[i]
            for _ in range(trips):
                s = s * x[i]
            y[i] = s

    @sd.kernel
    def after():
        for i in range(8):
            z[i] += x.grad[i] + y[i]

    xs = np.linspace(0.5, 1.2, 8).astype(np.float32)
    x.from_numpy(xs)

    def step(trips):
        prepare(trips)
        powers(trips)
        powers.grad(trips)
        after()

    want = {}
    for t in (2, 6, 3, 9):
        step(t)
        want[t] = (y.to_numpy(), x.grad.to_numpy(), z.to_numpy())
    gr = sd.Graph()
    with gr.capture():
        step(2)
    for t in (6, 3, 9, 2, 9):  # 6 and 9: more than the stacks sized so far
        gr.replay(trips=t)
        _equal(want[t], (y.to_numpy(), x.grad.to_numpy(), z.to_numpy()))
        np.testing.assert_allclose(x.grad.to_numpy(), (t + 1) * xs.astype(np.float64) ** t,
                                   rtol=1e-5)


@test_archs()
def test_ranges_read_from_memory_and_asserts_in_a_recording(arch):
    """Without debug, a loop whose range reads a field is dispatched indirectly (recorded
    as is: a changed count is seen at the next replay); under debug, an assert that fails in a
    replayed kernel is reported at the next sync."""
    sd.init(arch=arch)  # not debug: ranges from memory evaluated on the device
    count = sd.field(sd.i32, shape=())
    acc = sd.field(sd.f32, shape=64)

    @sd.kernel
    def add(s: sd.f32):
        for i in range(count[None]):
            acc[i] += s

    gr = sd.Graph()
    count[None] = 10
    with gr.capture():
        add(1.0)
    gr.replay(s=2.0)
    count[None] = 40
    gr.replay(s=4.0)
    want = np.zeros(64, np.float32)
    want[:10] += 3.0
    want[:40] += 4.0
    np.testing.assert_array_equal(acc.to_numpy(), want)

    sd.init(arch=arch, debug=True)
    limit = sd.field(sd.f32, shape=())
    w = sd.field(sd.f32, shape=16)

    @sd.kernel
    def grow(s: sd.f32):
        for i in range(16):
            w[i] += s
            assert w[i] < limit[None], "w passed the limit"

    limit[None] = 10.0
    gr = sd.Graph()
    with gr.capture():
        grow(1.0)
    gr.replay(s=2.0)
    sd.sync()
    gr.replay(s=100.0)
    with pytest.raises(SpiradAssertionError, match="w passed the limit"):
        sd.sync()


@test_archs()
def test_a_scalar_that_changes_a_range_records_new_geometry(arch):
    """`g.replay(n=...)` where `n` bounds a parallel loop: each range is its own recording
    (kept per geometry), never the geometry of another replay."""
    acc = sd.field(sd.f32, shape=256)

    @sd.kernel
    def bump(n: sd.i32, s: sd.f32):
        for i in range(n):
            acc[i] += s

    @sd.kernel
    def double():
        for i in range(256):
            acc[i] *= 2.0

    gr = sd.Graph()
    with gr.capture():
        bump(10, 1.0)
        double()
    want = np.zeros(256, np.float64)
    want[:10] += 1.0
    want *= 2.0
    for n, s in ((200, 0.5), (10, 1.0), (256, 0.25), (200, 0.5), (3, 2.0)):
        gr.replay(n=n, s=s)
        want[:n] += s
        want *= 2.0
    np.testing.assert_array_equal(acc.to_numpy(), want.astype(np.float32))
