"""Quadrants' atomic family beyond add: `sd.atomic_min / max / and / or / xor` (and exchange),
on every arch: old value returned, all contributions land, vector targets per component, locals,
`|=` / `&=` / `^=` on globals, and the reverse-mode rule of min / max (the winner gets the
gradient, once)."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs

N = 257


@test_archs()
@pytest.mark.parametrize("dt", [sd.i32, sd.u32, sd.i64, sd.f32, sd.f64], ids=str)
def test_atomic_min_max(arch, dt):
    lo = sd.field(dt, shape=())
    hi = sd.field(dt, shape=())
    data = (np.random.default_rng(1).permutation(N) * 3 + 5).astype(dt.np)
    x = sd.field(dt, shape=N)
    x.from_numpy(data)
    lo[None], hi[None] = 10 ** 6, 0

    @sd.kernel
    def k():
        for i in x:
            sd.atomic_min(lo[None], x[i])
            sd.atomic_max(hi[None], x[i])

    k()
    assert lo[None] == data.min() and hi[None] == data.max()


@test_archs()
def test_signed_min_and_old_values(arch):
    m = sd.field(sd.i32, shape=())
    olds = sd.field(sd.i32, shape=N)
    m[None] = 0

    @sd.kernel
    def k():
        for i in range(N):
            olds[i] = sd.atomic_min(m[None], -i)  # the old value: never below -i + 1's ...

    k()
    assert m[None] == -(N - 1)
    o = olds.to_numpy()
    assert o.max() == 0 and np.all(o >= -(N - 1))


@test_archs()
@pytest.mark.parametrize("dt", [sd.i32, sd.u32, sd.i64], ids=str)
def test_atomic_bitwise(arch, dt):
    acc_or = sd.field(dt, shape=())
    acc_and = sd.field(dt, shape=())
    acc_xor = sd.field(dt, shape=())
    acc_and[None] = 0x7FFFFFFF

    @sd.kernel
    def k():
        for i in range(31):
            sd.atomic_or(acc_or[None], 1 << i)
            sd.atomic_and(acc_and[None], ~(1 << (i % 7)))
            sd.atomic_xor(acc_xor[None], i + 1)

    k()
    want_xor = 0
    for i in range(31):
        want_xor ^= i + 1
    assert acc_or[None] == 0x7FFFFFFF
    assert acc_and[None] == 0x7FFFFFFF & ~0x7F
    assert acc_xor[None] == want_xor


@test_archs()
def test_augmented_bitwise_on_globals_is_atomic(arch):
    flags = sd.field(sd.i32, shape=4)

    @sd.kernel
    def k():
        for i in range(64):
            flags[i % 4] |= 1 << (i // 4)
            flags[3] ^= 0

    k()
    np.testing.assert_array_equal(flags.to_numpy(), [0xFFFF] * 4)


@test_archs()
def test_bool_and_vector_targets(arch):
    seen = sd.field(sd.u1, shape=3)
    box_lo = sd.Vector.field(3, sd.f32, shape=())
    box_hi = sd.Vector.field(3, sd.f32, shape=())
    pts = sd.Vector.field(3, sd.f32, shape=N)
    data = np.random.default_rng(2).normal(size=(N, 3)).astype(np.float32)
    pts.from_numpy(data)
    box_lo[None] = [1e9, 1e9, 1e9]
    box_hi[None] = [-1e9, -1e9, -1e9]

    @sd.kernel
    def k():
        for i in pts:
            sd.atomic_min(box_lo[None], pts[i])
            old = sd.atomic_max(box_hi[None], pts[i])
            if old[0] > 1e8:
                seen[2] |= True
            sd.atomic_or(seen[i % 2], True)

    k()
    np.testing.assert_array_equal(box_lo.to_numpy(), data.min(0))
    np.testing.assert_array_equal(box_hi.to_numpy(), data.max(0))
    np.testing.assert_array_equal(seen.to_numpy(), [True, True, False])


@test_archs()
def test_atomics_on_locals_and_ndarrays(arch):
    a = sd.ndarray(sd.i32, shape=8)
    a.from_numpy(np.array([1, 2, 4, 0, 8, 0, 16, 0], np.int32))
    out = sd.field(sd.i32, shape=3)

    @sd.kernel
    def k(a: sd.types.ndarray()) -> sd.i32:
        for _ in range(1):
            flag = 0
            hi = -5
            for i in range(a.shape[0]):
                sd.atomic_or(flag, a[i])
                sd.atomic_max(hi, a[i])
            out[0] = flag
            out[1] = hi
            out[2] = sd.atomic_xor(a[0], 3)  # old value; a[0] becomes 1 ^ 3
        return out[0]

    assert k(a) == 31
    np.testing.assert_array_equal(out.to_numpy(), [31, 16, 1])
    assert a.to_numpy()[0] == 2


@test_archs()
def test_float_min_max_ignore_nan(arch):
    m = sd.field(sd.f32, shape=2)
    x = sd.field(sd.f32, shape=4)
    x.from_numpy(np.array([np.nan, 2.0, -1.0, np.nan], np.float32))
    m[0], m[1] = np.nan, 0.5

    @sd.kernel
    def k():
        for i in x:
            sd.atomic_max(m[0], x[i])
            sd.atomic_min(m[1], x[i])

    k()
    np.testing.assert_array_equal(m.to_numpy(), [2.0, -1.0])


@test_archs(archs=exactly("cpu"))
def test_bitwise_atomics_refuse_floats(arch):
    x = sd.field(sd.f32, shape=2)

    @sd.kernel
    def k():
        sd.atomic_or(x[0], 1.0)

    with pytest.raises(sd.SpiradTypeError, match="atomic_or needs an integer"):
        k()


@test_archs()
def test_float_min_max_over_signs_infinities_and_nans(arch):
    """Many threads over one element, operands of both signs, -0.0, infinities and NaNs, from
    starting values of each sign and NaN (Metal: two int atomics on the bit pattern, the stored
    NaN replaced by an exchange; elsewhere a compare-and-swap loop): NaN-ignoring min / max."""
    rng = np.random.default_rng(7)
    data = (rng.standard_normal(200) * 100).astype(np.float32)
    data[:6] = [-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf]
    data = rng.permutation(data)
    x = sd.field(sd.f32, shape=data.size)
    x.from_numpy(data)
    starts = np.array([np.nan, -1e30, 1e30, 5.0, -5.0, -np.nan], np.float32)
    hi = sd.field(sd.f32, shape=starts.size)
    lo = sd.field(sd.f32, shape=starts.size)
    hi.from_numpy(starts)
    lo.from_numpy(starts)

    @sd.kernel
    def k():
        for i, j in sd.ndrange(data.size, starts.size):
            sd.atomic_max(hi[j], x[i])
            sd.atomic_min(lo[j], x[i])

    k()
    finite = data[~np.isnan(data)]
    want_hi = [np.inf] * starts.size
    want_lo = [-np.inf] * starts.size
    np.testing.assert_array_equal(hi.to_numpy(), want_hi)
    np.testing.assert_array_equal(lo.to_numpy(), want_lo)
    x.from_numpy(np.where(np.isinf(data), 0.0, data).astype(np.float32))  # finite extremes
    hi.from_numpy(starts)
    lo.from_numpy(starts)
    k()
    finite = finite[np.isfinite(finite)]
    np.testing.assert_array_equal(hi.to_numpy(), [max(finite.max(), s) if s == s else finite.max()
                                                   for s in starts])
    np.testing.assert_array_equal(lo.to_numpy(), [min(finite.min(), s) if s == s else finite.min()
                                                   for s in starts])


@test_archs(archs=exactly("metal"))
def test_metal_refuses_float_min_max_on_ndarrays(arch):
    """A field's f32 min / max uses a second view of its root buffer; an ndarray has one
    binding: refused, naming the line and the way out."""
    a = sd.ndarray(sd.f32, 2)

    @sd.kernel
    def k(a: sd.types.ndarray()):
        for i in range(2):
            sd.atomic_max(a[0], a[i])

    with pytest.raises(sd.SpiradTypeError, match=r"(?s)sd.atomic_max\(a\[0\], a\[i\]\).*"
                       r"atomic_max on an f32 ndarray element is not available on Metal.*f32 "
                       r"field"):
        k(a)


def _minmax_grad_case(op):
    x = sd.field(sd.f32, shape=5, needs_grad=True)
    m = sd.field(sd.f32, shape=(), needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)
    data = np.array([0.3, -1.2, 2.5, 0.7, -0.4], np.float32)
    x.from_numpy(data)
    atomic = sd.atomic_max if op == "max" else sd.atomic_min

    @sd.kernel
    def k():
        m[None] = x[0] * 0.5  # the value before the atomics (loses for both ops)
        for i in x:
            atomic(m[None], sd.sin(x[i]) * 3.0)
        for _ in range(1):
            loss[None] += m[None] * m[None]

    return x, m, loss, data, k


@test_archs()
@pytest.mark.parametrize("op", ["max", "min"])
def test_atomic_min_max_gradient(arch, op):
    x, m, loss, data, k = _minmax_grad_case(op)
    with sd.ad.Tape(loss=loss):
        k()
    vals = np.sin(data.astype(np.float64)) * 3.0
    w = int(np.argmax(vals) if op == "max" else np.argmin(vals))
    want = np.zeros(5)
    want[w] = 2 * vals[w] * 3.0 * np.cos(data[w])
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-5, atol=1e-6)


@test_archs()
def test_atomic_max_gradient_when_the_prior_value_wins(arch):
    x = sd.field(sd.f32, shape=4, needs_grad=True)
    m = sd.field(sd.f32, shape=(), needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)
    x.from_numpy(np.array([0.1, 0.2, 0.3, 4.0], np.float32))

    @sd.kernel
    def k():
        m[None] = x[3] * 2.0  # 8.0: above every contribution
        for i in range(3):
            sd.atomic_max(m[None], x[i])
        for _ in range(1):
            loss[None] += m[None]

    with sd.ad.Tape(loss=loss):
        k()
    np.testing.assert_allclose(x.grad.to_numpy(), [0, 0, 0, 2.0])


@test_archs(archs=exactly("cpu"))
def test_old_value_of_min_max_is_refused_in_reverse(arch):
    x = sd.field(sd.f32, shape=2, needs_grad=True)
    y = sd.field(sd.f32, shape=2, needs_grad=True)
    m = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def k():
        for i in x:
            old = sd.atomic_max(m[None], x[i])
            y[i] = old * 2.0

    with pytest.raises(sd.SpiradAutodiffError, match="atomic_max is not differentiable"):
        k.grad()


@test_archs()
def test_atomic_exchange(arch):
    slot = sd.field(sd.i32, shape=())
    got = sd.field(sd.i32, shape=64)
    f = sd.field(sd.f32, shape=())
    slot[None] = -1

    @sd.kernel
    def k():
        for i in range(64):
            got[i] = sd.atomic_exchange(slot[None], i)  # a chain: every value handed on once
        for _ in range(1):
            sd.atomic_exchange(f[None], 2.5)

    k()
    seen = sorted(got.to_numpy().tolist() + [slot[None]])
    assert seen == [-1] + list(range(64)) and f[None] == 2.5


@test_archs()
def test_old_value_of_an_atomic_on_a_kernel_local(arch):
    # Taichi's implicit_fem: `m = ti.atomic_add(cnt, 1)` on a local declared before the parallel
    # loop hands every iteration its own slot (the atomic's old value, not a racy re-read)
    out = sd.field(sd.i32, shape=N)
    taken = sd.field(sd.i32, shape=N)

    @sd.kernel
    def compact() -> sd.i32:
        cnt = 0
        total = 0
        for i in range(N):
            if i % 3 == 1:
                m = sd.atomic_add(cnt, 1)
                out[m] = i
                taken[m] += 1
                s = sd.atomic_sub(total, 2)  # the old value, also of a subtraction
                if s > 0 or s % 2 != 0 or s < -2 * N:
                    out[0] = -1
        return cnt * 1000 + total

    r = compact()
    n = r // 1000 + 1  # total is -2 n, so r = 1000 n - 2 n
    assert (n, r) == (len(range(1, N, 3)), 998 * n)
    got = out.to_numpy()[:n]
    assert sorted(got.tolist()) == list(range(1, N, 3))
    assert (taken.to_numpy()[:n] == 1).all()
