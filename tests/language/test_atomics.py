"""Atomics: `sd.atomic_add` (returns the old value) and `+=` / `-=` on global elements."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs

N = 1000


@test_archs()
@pytest.mark.parametrize("dt", [sd.i32, sd.i64, sd.u32, sd.f32, sd.f64], ids=str)
def test_plus_equals_is_atomic(arch, dt):
    total = sd.field(dt, shape=())
    hist = sd.field(dt, shape=7)

    @sd.kernel
    def k():
        for i in range(N):
            total[None] += 1
            hist[i % 7] += 2
            hist[0] -= 1

    k()
    assert total[None] == N
    want = np.array([2 * len(range(b, N, 7)) for b in range(7)])
    want[0] -= N
    if dt == sd.u32:
        want = want.astype(np.int64) % 2 ** 32
    np.testing.assert_array_equal(hist.to_numpy(), want.astype(dt.np))


@test_archs()
def test_atomic_add_returns_old_value(arch):
    counter = sd.field(sd.i32, shape=())
    slots = sd.field(sd.i32, shape=N)

    @sd.kernel
    def k():
        for i in range(N):
            old = sd.atomic_add(counter[None], 1)
            slots[old] = i + 1   # each thread got a distinct ticket

    k()
    assert counter[None] == N
    np.testing.assert_array_equal(np.sort(slots.to_numpy()), np.arange(1, N + 1))


@test_archs()
def test_float_atomic_sum(arch):
    x = sd.ndarray(sd.f32, N)
    data = np.random.default_rng(0).uniform(0, 1, N).astype(np.float32)
    x.from_numpy(data)
    s = sd.field(sd.f32, shape=())

    @sd.kernel
    def k(x: sd.types.ndarray()):
        for i in x:
            s[None] += x[i] * 2

    k(x)
    np.testing.assert_allclose(s[None], 2 * data.astype(np.float64).sum(), rtol=1e-4)


@test_archs()
def test_atomic_on_ndarray_and_vector(arch):
    acc = sd.ndarray(sd.i32, 4)
    vacc = sd.Vector.field(2, sd.f32, shape=())

    @sd.kernel
    def k(acc: sd.types.ndarray()):
        for i in range(100):
            sd.atomic_add(acc[i % 4], i)
            vacc[None] += sd.Vector([1.0, 0.5])

    k(acc)
    np.testing.assert_array_equal(acc.to_numpy(), [sum(range(b, 100, 4)) for b in range(4)])
    np.testing.assert_array_equal(vacc[None], [100.0, 50.0])


@test_archs()
def test_other_augmented_ops_on_globals(arch):
    """`*=`, `//=` etc. on a global are a plain read-modify-write (no atomicity promised)."""
    x = sd.field(sd.i32, shape=4)
    x.from_numpy(np.array([1, 2, 3, 4], np.int32))

    @sd.kernel
    def k():
        for i in x:
            x[i] *= 3
            x[i] //= 2
            x[i] <<= 1

    k()
    np.testing.assert_array_equal(x.to_numpy(), ((np.arange(1, 5) * 3) // 2) << 1)


@test_archs()
def test_atomic_add_errors(arch):
    out = sd.field(sd.f32, shape=1)

    @sd.kernel
    def k():
        a = 1.0
        sd.atomic_add(a + 1.0, 1.0)  # an expression is not a target (a local is: Taichi's)
        out[0] = a

    with pytest.raises(sd.SpiradSyntaxError, match="non-writable target") as ei:
        k()
    assert "^" in str(ei.value)
