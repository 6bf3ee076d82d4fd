"""Fields larger than one storage binding (issue 23): on vulkan and metal such a field gets a root
chunk of its own, bound as several windows of at most the binding limit, and each access picks
its window (`spirad/backends/root_buffers.py`, `spirv_codegen.buffers`). DiffTaichi's diffmpm3d
has a 179 MiB field where lavapipe binds 128 MiB; here the SPIR-V backends' root-chunk limit is
lowered to 8 KiB (`roots.limit`, set before the fields are made), so fields of a few KiB span 2-3
windows and the tests stay fast. Loads, stores, vector components, int / float / bool atomics
(native, compare-and-swap, Metal's sign-split f32 min / max), .grad fields and host access are
checked against numpy and analytic gradients; the other archs run the same programs (no root
buffers there: the values must agree all the same)."""
import numpy as np
import pytest

import spirad as sd
import spirad.runtime.state as sd_state
from kernel_ir.errors import SpiradDeviceError
from tests.support.archs import test_archs

LIMIT = 8192  # bytes of one binding (a window)


def small_bindings():
    """Lower the SPIR-V backends' binding limit to LIMIT; returns their RootBuffers (None on
    the other archs)."""
    roots = getattr(sd_state.backend(), "roots", None)
    if roots is not None:
        roots.limit = LIMIT
    return roots


def windows(roots, f) -> int:
    """How many windows field `f` is bound as (1: an ordinary chunk; 0: no root buffers)."""
    if roots is None:
        return 0
    return max(1, len(roots.by_key[f.id].chunk.windows))


@test_archs()
def test_vector_field_loads_stores_and_gradient(arch):
    """x: 1000 vec3 f32 = 12,000 bytes, two windows (its .grad too); y: 3,000 f32, two."""
    roots = small_bindings()
    n = 1000
    x = sd.Vector.field(3, sd.f32, shape=n, needs_grad=True)
    y = sd.field(sd.f32, shape=3 * n, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def fill(s: sd.f32):
        for i in x:
            x[i] = sd.Vector([sd.sin(i * s), sd.cos(i * s), i * 0.001])

    @sd.kernel
    def spread():
        for i in x:
            for c in sd.static(range(3)):
                y[3 * (n - 1 - i) + c] = x[i][c] * (c + 1.0)

    @sd.kernel
    def total():
        for i in x:
            loss[None] += x[i][0] * x[i][1] + x[i][2] * x[i][2]
        for j in y:
            loss[None] += sd.sin(y[j])

    fill(0.01)
    i = np.arange(n)
    xv = np.stack([np.sin(i * 0.01), np.cos(i * 0.01), i * 0.001], axis=1)
    np.testing.assert_allclose(x.to_numpy(), xv, rtol=1e-5, atol=1e-6)
    spread()
    assert windows(roots, x) in (0, 2) and windows(roots, y) in (0, 2)
    yv = (xv * [1.0, 2.0, 3.0])[::-1].reshape(-1)
    np.testing.assert_allclose(y.to_numpy(), yv, rtol=1e-5, atol=1e-6)
    assert abs(x[n - 1][2] - 0.999) < 1e-6 and abs(y[0] - 0.999 * 0.0 - xv[n - 1, 0]) < 1e-5
    x[700] = [1.5, -2.0, 0.25]  # element writes at Python scope, in the second window
    xv[700] = [1.5, -2.0, 0.25]
    with sd.ad.Tape(loss=loss):
        total()
    want = (xv[:, 0] * xv[:, 1] + xv[:, 2] ** 2).sum() + np.sin(yv).sum()
    assert abs(loss[None] - want) < 1e-4 * abs(want)
    gx = np.stack([xv[:, 1], xv[:, 0], 2 * xv[:, 2]], axis=1)
    np.testing.assert_allclose(x.grad.to_numpy(), gx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y.grad.to_numpy(), np.cos(yv), rtol=1e-5, atol=1e-6)
    assert windows(roots, x.grad) in (0, 2)


@test_archs()
def test_gradient_through_scatter_into_large_field(arch):
    """The adjoint of a gather from a large field is an atomic scatter into its .grad (float
    atomic add across windows); the forward scatter adds into another large field."""
    roots = small_bindings()
    n, m = 2500, 600
    w = sd.field(sd.f32, shape=n, needs_grad=True)     # 10,000 bytes: two windows
    acc = sd.field(sd.f32, shape=n, needs_grad=True)
    idx = sd.field(sd.i32, shape=m)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def k():
        for j in idx:
            acc[(idx[j] * 7) % n] += w[idx[j]] * w[idx[j]]
        for i in acc:
            loss[None] += acc[i] * (1.0 + (i % 3))

    rng = np.random.default_rng(5)
    wv = rng.uniform(-1, 1, n).astype(np.float32)
    iv = rng.integers(0, n, m).astype(np.int32)
    iv[:4] = [0, n - 1, 2047, 2048]  # both sides of the window boundary (8192 / 4 elements)
    w.from_numpy(wv)
    idx.from_numpy(iv)
    with sd.ad.Tape(loss=loss):
        k()
    wd = wv.astype(np.float64)
    want_acc = np.zeros(n)
    np.add.at(want_acc, (iv * 7) % n, wd[iv] ** 2)
    np.testing.assert_allclose(acc.to_numpy(), want_acc, rtol=1e-5, atol=1e-6)
    want_g = np.zeros(n)
    np.add.at(want_g, iv, 2 * wd[iv] * (1.0 + ((iv * 7) % n) % 3))
    np.testing.assert_allclose(w.grad.to_numpy(), want_g, rtol=1e-5, atol=1e-5)
    assert windows(roots, w) in (0, 2) and windows(roots, w.grad) in (0, 2)


@test_archs()
def test_int_float_and_bool_atomics_across_windows(arch):
    """i32 add / max (unsigned and signed views), f32 min (a compare-and-swap loop on vulkan,
    two int atomics through an extra i32 view on metal), u1 stores: two windows each, one
    kernel per pair of fields (each window is a binding: Metal allows 8)."""
    roots = small_bindings()
    n = 3000
    cnt = sd.field(sd.i32, shape=n)   # 12,000 bytes: two windows
    top = sd.field(sd.i32, shape=n)
    lo = sd.field(sd.f32, shape=n)
    flag = sd.field(sd.u1, shape=n)   # u32 words: two windows too

    @sd.kernel
    def ints(reps: sd.i32):
        for t in range(reps * n):
            i = (t * 13) % n
            cnt[i] += 1
            sd.atomic_max(top[i], t - 100000)

    @sd.kernel
    def floats(reps: sd.i32):
        for t in range(reps * n):
            sd.atomic_min(lo[(t * 13) % n], (t % 997) * 0.25 - 100.0)

    @sd.kernel
    def flags():
        for i in flag:
            flag[i] = cnt[i] % 2 == 1

    lo.fill(10.0)
    top.fill(-(2 ** 30))
    ints(3)
    floats(3)
    flags()
    t = np.arange(3 * n)
    i = (t * 13) % n
    want_cnt = np.bincount(i, minlength=n)
    want_top = np.full(n, -(2 ** 30))
    np.maximum.at(want_top, i, t - 100000)
    want_lo = np.full(n, 10.0, np.float32)
    np.minimum.at(want_lo, i, ((t % 997) * 0.25 - 100.0).astype(np.float32))
    np.testing.assert_array_equal(cnt.to_numpy(), want_cnt)
    np.testing.assert_array_equal(top.to_numpy(), want_top)
    np.testing.assert_array_equal(lo.to_numpy(), want_lo)
    np.testing.assert_array_equal(flag.to_numpy(), want_cnt % 2 == 1)
    cnt.from_numpy(np.arange(n, dtype=np.int32))
    assert cnt[2999] == 2999 and cnt[2048] == 2048 and flag[2999] == (want_cnt[2999] % 2 == 1)
    for f in (cnt, top, lo, flag):
        assert windows(roots, f) in (0, 2)


@test_archs(require=("f64",))
def test_f64_field_across_windows(arch):
    """f64 elements (8 bytes: 1024 to a window) with a compare-and-swap atomic add on lavapipe."""
    roots = small_bindings()
    n = 2500  # 20,000 bytes: three windows
    a = sd.field(sd.f64, shape=n, needs_grad=True)
    loss = sd.field(sd.f64, shape=(), needs_grad=True)

    @sd.kernel
    def k():
        for i in a:
            loss[None] += a[i] * a[(i * 17) % n]

    av = np.linspace(-1.0, 1.0, n)
    a.from_numpy(av)
    with sd.ad.Tape(loss=loss):
        k()
    j = (np.arange(n) * 17) % n
    assert abs(loss[None] - (av * av[j]).sum()) < 1e-9
    g = av[j].copy()
    np.add.at(g, j, av)
    np.testing.assert_allclose(a.grad.to_numpy(), g, rtol=1e-12, atol=1e-12)
    assert windows(roots, a) in (0, 3)


@pytest.mark.parametrize("arch", ["vulkan", "metal"])
def test_field_larger_than_the_largest_buffer_is_refused_naming_it(arch):
    from tests.support.archs import arch_or_skip
    arch_or_skip(arch)
    sd.init(arch=arch)
    roots = small_bindings()
    roots.max_bytes = 1 << 16  # as if the device's largest buffer were 64 KiB
    big = sd.field(sd.f32, shape=(20000,), name="positions")
    with pytest.raises(SpiradDeviceError) as e:
        big.fill(1.0)
    msg = str(e.value)
    assert "field positions" in msg and "80000 bytes" in msg and "65536" in msg, msg
    assert f"{LIMIT} bytes" in msg, msg
    small = sd.field(sd.f32, shape=(4000,))  # still usable: two windows
    small.fill(2.0)
    assert small.to_numpy().sum() == 8000.0 and windows(roots, small) == 2


@pytest.mark.parametrize("arch", ["vulkan", "metal"])
def test_checkpointed_state_larger_than_a_binding_is_refused_naming_it(arch):
    """`sd.ad.checkpointed` copies its state through a kernel that binds a field's buffer whole,
    which a windowed field's buffer is too large for: a clear error, not a device failure."""
    from tests.support.archs import arch_or_skip
    arch_or_skip(arch)
    sd.init(arch=arch)
    small_bindings()
    x = sd.field(sd.f32, shape=4000, name="state_x", needs_grad=True)  # two windows
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def step():
        for i in x:
            x[i] = x[i] * 0.5 + 1.0

    @sd.kernel
    def total():
        for i in x:
            loss[None] += x[i]

    x.fill(1.0)
    with pytest.raises(SpiradDeviceError) as e:
        with sd.ad.Tape(loss=loss):
            sd.ad.checkpointed(step, state=[x], steps=4, snapshots=2)
            total()
    msg = str(e.value)
    assert "field state_x" in msg and "16000 bytes" in msg and f"{LIMIT} bytes" in msg, msg
