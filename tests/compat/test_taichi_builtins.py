"""Taichi builtins of issue #36: `sd.zero(x)` / `sd.one(x)`, `Ndarray.n` / `.m`, atomics on locals
(`sd.atomic_add(local, v)`, ...; `sd.atomic_mul`), `sd.func(f)(x)` applied inside a kernel, and
Taichi's `init` knobs accepted without effect."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs


@test_archs()
def test_zero_and_one(arch):
    x = sd.field(sd.f32, shape=())
    n = sd.field(sd.i32, shape=())
    x[None] = 2.5
    n[None] = 7

    @sd.kernel
    def k() -> sd.f32:
        v = sd.Vector([1.5, -2.0, 3.0])
        m = sd.Matrix([[1, 2], [3, 4]])
        z, o = sd.zero(v), sd.one(v)
        zm, om = sd.zero(m), sd.one(m)
        a = sd.zero(n[None]) + 10 * sd.one(n[None])  # ints stay ints
        return (z.sum() * 1000 + o.sum() * 100 + zm.sum() + om.sum() * 10 + a
                + sd.one(x[None]) * 0.5 + sd.zero(x[None]))

    assert k() == pytest.approx(3 * 100 + 4 * 10 + 10 + 0.5)

    @sd.kernel
    def types() -> sd.i32:
        return sd.one(n[None]) // 2  # an integer one: 1 // 2 == 0

    assert types() == 0


@test_archs()
def test_ndarray_n_and_m(arch):
    v = sd.Vector.ndarray(3, sd.f32, 4)
    m = sd.Matrix.ndarray(2, 5, sd.i32, (2, 2))
    s = sd.ndarray(sd.f32, 4)
    assert v.n == 3 and m.n == 2 and m.m == 5
    with pytest.raises(AttributeError):
        v.m  # Taichi's VectorNdarray has only n
    with pytest.raises(AttributeError):
        s.n
    f = sd.Vector.field(3, sd.f32, shape=2)
    assert f.n == 3 and f.m == 1  # a vector field's m is 1, as Taichi's MatrixField


@test_archs()
def test_atomics_on_locals(arch):
    out = sd.field(sd.i32, shape=8)

    @sd.kernel
    def k() -> sd.f32:
        x = 1.0
        y = 3
        v = sd.Vector([1, 2])
        sd.loop_config(serialize=True)
        for i in range(1, 8):
            sd.atomic_mul(x, sd.f32(i))
            old = sd.atomic_add(y, i)
            out[i] = old
            sd.atomic_sub(v[1], 1)
            sd.atomic_max(v[0], i)
            sd.atomic_min(y, 1000)
            sd.atomic_or(v[1], 0)
        return x + y * 1000 + v[0] * 100000 + v[1] * 10000000

    assert k() == pytest.approx(5040 + 31 * 1000 + 7 * 100000 + (-5) * 10000000)
    want = [0] + list(3 + np.cumsum([0, 1, 2, 3, 4, 5, 6]))
    assert out.to_numpy().tolist() == want

    @sd.kernel
    def parallel_sum() -> sd.i32:
        s = 0
        for i in range(100):
            sd.atomic_add(s, i)  # an update of a kernel-scope local in the parallel loop
        return s

    assert parallel_sum() == 4950


@test_archs()
def test_atomic_mul_of_globals(arch):
    """Taichi's atomic_mul on fields, ndarrays and a kernel-scope local in the parallel loop: a
    compare-and-swap loop (Metal has none: refused with its reason)."""
    c = sd.field(sd.i32, shape=())
    f = sd.field(sd.f32, shape=4)
    a = sd.ndarray(sd.i32, 3)

    @sd.kernel
    def k(arr: sd.types.ndarray()) -> sd.f32:
        c[None] = 1
        for i in range(16):
            sd.atomic_mul(c[None], 2)
        for i in range(40):
            sd.atomic_mul(f[i % 4], 1.5)
        for i in range(9):
            sd.atomic_mul(arr[i % 3], -3)
        x = 1.0
        for i in range(1, 8):
            sd.atomic_mul(x, sd.f32(i))  # a kernel temporary, multiplied atomically
        return x

    f.fill(1.0)
    a.fill(1)
    assert k(a) == 5040.0
    assert c[None] == 2 ** 16
    np.testing.assert_allclose(f.to_numpy(), np.full(4, 1.5 ** 10, np.float32), rtol=1e-6)
    assert a.to_numpy().tolist() == [-27, -27, -27]

    @sd.kernel
    def old_values(out: sd.types.ndarray()):
        for i in range(1):
            out[0] = sd.atomic_mul(c[None], 3)  # the old value

    out = np.zeros(1, np.int32)
    old_values(out)
    assert out[0] == 2 ** 16 and c[None] == 3 * 2 ** 16


@test_archs(archs=exactly("cpu"))
def test_atomic_mul_is_not_differentiated(arch):
    x = sd.field(sd.f32, shape=2, needs_grad=True)

    @sd.kernel
    def k():
        for i in x:
            sd.atomic_mul(x[i], 2.0)

    k()
    with pytest.raises(sd.SpiradAutodiffError, match="atomic_mul on a float with a gradient"):
        k.grad()


@test_archs()
def test_atomics_refuse_a_non_writable_target(arch):
    @sd.kernel
    def rvalue():
        y = sd.Vector([1, 2, 3])
        sd.atomic_min([3, 2, 1], y)

    with pytest.raises(sd.SpiradSyntaxError, match="non-writable target as the first operand "
                                                   "of atomic_min"):
        rvalue()


@test_archs()
def test_func_applied_in_a_kernel(arch):
    val = sd.field(sd.f32, shape=4)

    def f(i):
        return i * 0.1 + 0.4

    @sd.func
    def g(i):
        return i * 2

    @sd.kernel
    def fill():
        for i in range(4):
            val[i] = sd.sin(sd.func(f)(sd.cast(i, sd.f32))) + sd.func(g)(i)

    fill()
    i = np.arange(4)
    np.testing.assert_allclose(val.to_numpy(), np.sin(i * 0.1 + 0.4) + 2 * i, rtol=1e-6)

    @sd.kernel
    def bad():
        val[0] = sd.func(3)(1)

    with pytest.raises(sd.SpiradTypeError, match="needs a Python function"):
        bad()


@test_archs(archs=exactly("cpu"))
def test_taichi_init_knobs_accepted(arch):
    sd.init(arch=arch, gdb_trigger=True, print_preprocessed_ir=True, demote_dense_struct_fors=False,
            experimental_auto_mesh_local=True, mesh_localize_to_end_mapping=False,
            half2_vectorization=True, offline_cache_cleaning_policy="never", vk_api_version="1.3",
            max_block_dim=128, timeline=False)
    x = sd.field(sd.f32, shape=3)
    x.fill(2.0)
    assert x.to_numpy().tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(sd.SpiradValueError, match="default_up"):
        sd.init(arch=arch, default_up=sd.u32)  # Taichi refuses it too
    with pytest.raises(sd.SpiradValueError, match="foo_bar"):
        sd.init(arch=arch, foo_bar=1)


@test_archs()
def test_python_all_and_any(arch):
    """Python's `all(v)` / `any(v)` in a kernel: of a vector / matrix, whether every / some
    component is non-zero (Taichi's reading); of compile-time lists, Python's answer."""
    x = sd.Vector.field(3, sd.f32, shape=4)
    r = sd.field(sd.i32, shape=(4, 2))

    @sd.kernel
    def k():
        for i in x:
            v = x[i]
            r[i, 0] = all(v > 0.5)
            r[i, 1] = any(sd.Matrix([[v[0], 0.0], [v[2], 0.0]]) > 0.5)
            assert all([1, 2]) and not any((0, 0))

    x.from_numpy(np.array([[1, 1, 1], [0, 1, 1], [0, 0, 0], [1, 0, 0]], np.float32))
    k()
    np.testing.assert_array_equal(r.to_numpy(), [[1, 1], [0, 1], [0, 0], [0, 1]])

    @sd.kernel
    def bad(a: sd.f32) -> sd.i32:
        return all(a)

    with pytest.raises(sd.SpiradTypeError, match=r"all\(\) takes a vector"):
        bad(1.0)
