"""Language constructs Genesis' particle / grid solvers use (issue #37), with Quadrants 1.3.3's
semantics: `field.fill(v)` inside kernels and `@func`s (Genesis' spatial hasher clears its slot
counters so) is the loop `for I in grouped(field): field[I] = v` at the call site."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


@test_archs()
def test_field_fill_in_kernel(arch):
    x = sd.field(sd.i32, shape=(4, 3))
    v = sd.Vector.field(3, sd.f32, shape=5)
    y = sd.field(sd.i32, shape=4)
    cnt = sd.field(sd.i32, shape=())

    @sd.data_oriented
    class Hasher:
        def __init__(self):
            self.slots = x

        @sd.func
        def clear(self):
            self.slots.fill(7)  # in a func: the kernel's top-level loop

    h = Hasher()

    @sd.kernel
    def k(val: sd.f32):
        h.clear()
        v.fill(val)  # a run-time value, into every component
        for _ in range(1):
            for i in range(3):  # inside a (serial) loop: a serial loop there, the last one wins
                y.fill(i + 1)
        for i in range(4):
            cnt[None] += y[i]

    x.fill(0)
    k(2.5)
    np.testing.assert_array_equal(x.to_numpy(), np.full((4, 3), 7))
    np.testing.assert_array_equal(v.to_numpy(), np.full((5, 3), 2.5, np.float32))
    np.testing.assert_array_equal(y.to_numpy(), np.full(4, 3))
    assert cnt[None] == 12


@test_archs()
def test_field_fill_refuses_two_values(arch):
    x = sd.field(sd.i32, shape=4)

    @sd.kernel
    def k():
        x.fill(1, 2)

    with pytest.raises(sd.SpiradTypeError, match="fill takes one value"):
        k()


@test_archs()
def test_constant_matrices_with_keywords(arch):
    """`Matrix.identity(dt=..., n=...)` (Genesis' FEM and MPM stresses), `Vector.zero(dt=, n=)`,
    `Matrix.zero(dt, n, m=)`, `Vector.unit(n, i, dt=)`: keywords bind as in Python scope."""
    out = sd.Matrix.field(3, 3, sd.f32, shape=4)

    @sd.kernel
    def k():
        out[0] = sd.Matrix.identity(dt=sd.f32, n=3) * 2.0
        out[1] = sd.Matrix.identity(sd.f32, n=3) + sd.Matrix.zero(dt=sd.f32, n=3, m=3)
        out[2][0, 0] = sd.Vector.zero(n=3, dt=sd.f32).norm() + sd.Vector.unit(3, 1, dt=sd.f32)[1]
        out[3] = sd.Matrix.zero(sd.f32, 3, m=3)

    k()
    r = out.to_numpy()
    np.testing.assert_array_equal(r[0], 2 * np.eye(3))
    np.testing.assert_array_equal(r[1], np.eye(3))
    assert r[2][0, 0] == 1.0
    np.testing.assert_array_equal(r[3], np.zeros((3, 3)))


@test_archs()
def test_constant_matrices_bad_keyword(arch):
    out = sd.field(sd.f32, shape=1)

    @sd.kernel
    def k():
        out[0] = sd.Matrix.identity(dt=sd.f32, size=3)[0, 0]

    with pytest.raises(sd.SpiradTypeError, match="identity"):
        k()
