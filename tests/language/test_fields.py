"""Fields: dtypes, ranks, 0-d fields, placement, `.grad`, host access (fill / numpy / x[i])."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs

DTYPES = [sd.f32, sd.f64, sd.i32, sd.i64, sd.u32, sd.u1]


@sd.kernel
def copy_scaled(src: sd.template(), dst: sd.template()):
    for I in sd.grouped(src):
        dst[I] = src[I] * 2 + 1


@test_archs()
@pytest.mark.parametrize("dt", [sd.f32, sd.f64, sd.i32, sd.i64, sd.u32], ids=str)
def test_dtype_roundtrip_and_arith(arch, dt):
    src = sd.field(dt, shape=(3, 4))
    dst = sd.field(dt, shape=(3, 4))
    data = (np.arange(12).reshape(3, 4) * 3).astype(dt.np)
    src.from_numpy(data)
    copy_scaled(src, dst)
    out = dst.to_numpy()
    assert out.dtype == dt.np
    np.testing.assert_array_equal(out, (data * 2 + 1).astype(dt.np))


@test_archs()
def test_i64_u32_wide_values(arch):
    a = sd.field(sd.i64, shape=2)
    b = sd.field(sd.u32, shape=2)

    @sd.kernel
    def k():
        a[0] = a[0] * 4
        a[1] = a[1] - 1
        b[0] = b[0] + 1  # wraps
        b[1] = b[1] // 3

    a.from_numpy(np.array([2 ** 40, -2 ** 40], np.int64))
    b.from_numpy(np.array([2 ** 32 - 1, 2 ** 32 - 2], np.uint32))
    k()
    np.testing.assert_array_equal(a.to_numpy(), [2 ** 42, -2 ** 40 - 1])
    np.testing.assert_array_equal(b.to_numpy(), [0, (2 ** 32 - 2) // 3])


@test_archs()
def test_u1_field(arch):
    flag = sd.field(sd.u1, shape=6)
    val = sd.field(sd.i32, shape=6)

    @sd.kernel
    def k():
        for i in flag:
            flag[i] = i % 2 == 0 or i == 5
            if flag[i]:
                val[i] = 1

    k()
    want = np.array([True, False, True, False, True, True])
    np.testing.assert_array_equal(flag.to_numpy(), want)
    assert flag.to_numpy().dtype == np.bool_
    np.testing.assert_array_equal(val.to_numpy(), want.astype(np.int32))
    assert flag[5] is True
    flag.from_numpy(np.array([0, 3, 0, 1, 0, 7]))  # nonzero -> True, stored as 1
    val.fill(0)
    k2_read(flag, val)
    np.testing.assert_array_equal(val.to_numpy(), [0, 1, 0, 1, 0, 1])


@sd.kernel
def k2_read(flag: sd.template(), val: sd.template()):
    for i in flag:
        val[i] = flag[i]  # u1 -> i32 is 0/1


@test_archs()
@pytest.mark.parametrize("shape", [(), (7,), (3, 5), (2, 3, 4), (2, 2, 2, 3)], ids=str)
def test_any_rank(arch, shape):
    x = sd.field(sd.f32, shape=shape)
    y = sd.field(sd.f32, shape=shape)
    data = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    x.from_numpy(data)
    if shape == ():
        scalar_copy(x, y)
    else:
        copy_scaled(x, y)
    want = data if shape == () else data * 2 + 1
    np.testing.assert_allclose(y.to_numpy(), want, rtol=1e-6)
    assert y.to_numpy().shape == shape


@sd.kernel
def scalar_copy(x: sd.template(), y: sd.template()):
    y[None] = x[None]


@test_archs()
def test_scalar_field_host_access(arch):
    s = sd.field(sd.f32, shape=())
    s[None] = 2.5
    assert s[None] == 2.5
    assert s.to_numpy().shape == ()
    s.fill(-1)
    assert s[None] == -1.0
    n = sd.field(sd.i32, shape=())

    @sd.kernel
    def count():
        for i in range(100):
            n[None] += 1

    count()
    count()
    assert n[None] == 200


@test_archs()
def test_element_access_from_python(arch):
    x = sd.field(sd.i32, shape=(3, 4))
    x[1, 2] = 7
    x[2, 3] = -4
    assert x[1, 2] == 7 and isinstance(x[1, 2], int)
    want = np.zeros((3, 4), np.int32)
    want[1, 2], want[2, 3] = 7, -4
    np.testing.assert_array_equal(x.to_numpy(), want)
    for bad in [(3, 0), (0, -1), (1,), (0, 0, 0)]:
        with pytest.raises(sd.SpiradValueError):
            x[bad]
    with pytest.raises(sd.SpiradValueError):
        x[0, 0] = 2 ** 40


@test_archs()
def test_fill(arch):
    x = sd.field(sd.f64, shape=(2, 3))
    x.fill(1.25)
    np.testing.assert_array_equal(x.to_numpy(), np.full((2, 3), 1.25))
    xi = sd.field(sd.i32, shape=4)
    xi.fill(-3)
    np.testing.assert_array_equal(xi.to_numpy(), [-3] * 4)
    with pytest.raises(sd.SpiradValueError):
        xi.fill(2 ** 33)
    v = sd.Vector.field(3, sd.f32, shape=2)
    v.fill(0.5)
    np.testing.assert_array_equal(v.to_numpy(), np.full((2, 3), 0.5))


@test_archs()
def test_from_numpy_checks(arch):
    x = sd.field(sd.i32, shape=4)
    u = sd.field(sd.u32, shape=4)
    with pytest.raises(sd.SpiradValueError, match="shape"):
        x.from_numpy(np.zeros(5, np.int32))
    with pytest.raises(sd.SpiradValueError, match="do not fit"):
        x.from_numpy(np.array([0, 1, 2, 2 ** 40]))
    with pytest.raises(sd.SpiradValueError, match="do not fit"):
        u.from_numpy(np.array([0, -1, 2, 3]))
    with pytest.raises(sd.SpiradValueError, match="float"):
        x.from_numpy(np.array([0.5, 1, 2, 3]))
    with pytest.raises(sd.SpiradValueError):
        x.from_numpy(np.array(["a", "b", "c", "d"]))
    x.from_numpy(np.array([1, 2, 3, 4], np.int64))  # in-range values of a wider int type are fine
    np.testing.assert_array_equal(x.to_numpy(), [1, 2, 3, 4])
    f = sd.field(sd.f32, shape=(2, 2))
    f.from_numpy(np.array([[1, 2], [3, 4]], np.int32))  # ints into a float field convert
    np.testing.assert_array_equal(f.to_numpy(), [[1, 2], [3, 4]])


@test_archs()
def test_to_numpy_is_a_copy(arch):
    x = sd.field(sd.f32, shape=3)
    a = x.to_numpy()
    a[:] = 5
    np.testing.assert_array_equal(x.to_numpy(), [0, 0, 0])


@test_archs()
def test_needs_grad_allocates_grad(arch):
    x = sd.field(sd.f32, shape=(2, 3), needs_grad=True)
    assert x.needs_grad and x.grad is not None
    assert x.grad.shape == (2, 3) and x.grad.dtype == sd.f32
    np.testing.assert_array_equal(x.grad.to_numpy(), np.zeros((2, 3)))

    @sd.kernel
    def k():
        for i, j in x:
            x.grad[i, j] = i + 10 * j

    k()
    np.testing.assert_array_equal(x.grad.to_numpy(), np.add.outer(np.arange(2), 10 * np.arange(3)))
    np.testing.assert_array_equal(x.to_numpy(), np.zeros((2, 3)))
    assert not sd.field(sd.f32, shape=2).needs_grad  # an unplaced slot (as in Taichi)
    with pytest.raises(sd.SpiradTypeError, match="float"):
        sd.field(sd.i32, shape=2, needs_grad=True)


@test_archs()
def test_root_dense_place(arch):
    a = sd.field(sd.f32)
    b = sd.field(sd.i32, needs_grad=False)
    g = sd.field(sd.f32, needs_grad=True)
    sd.root.dense(sd.ij, (3, 2)).place(a, b, g)
    c = sd.field(sd.f32)
    sd.root.dense(sd.i, 5).place(c)
    d = sd.field(sd.f32)
    sd.root.dense(sd.i, 2).dense(sd.j, 3).place(d)
    assert a.shape == b.shape == g.shape == g.grad.shape == (3, 2)
    assert c.shape == (5,) and d.shape == (2, 3)

    @sd.kernel
    def k():
        for i, j in a:
            a[i, j] = i * 2 + j
            b[i, j] = i - j
            g.grad[i, j] = 1.5
        for i in c:
            c[i] = i * i
        for i, j in d:
            d[i, j] = i * 3 + j

    k()
    ii, jj = np.meshgrid(np.arange(3), np.arange(2), indexing="ij")
    np.testing.assert_array_equal(a.to_numpy(), ii * 2 + jj)
    np.testing.assert_array_equal(b.to_numpy(), ii - jj)
    np.testing.assert_array_equal(g.grad.to_numpy(), np.full((3, 2), 1.5))
    np.testing.assert_array_equal(c.to_numpy(), np.arange(5) ** 2)
    np.testing.assert_array_equal(d.to_numpy(), np.arange(6).reshape(2, 3))


@test_archs()
def test_placement_errors(arch):
    a = sd.field(sd.f32, shape=4)
    with pytest.raises(sd.SpiradValueError, match="already has shape"):
        sd.root.dense(sd.i, 5).place(a)
    with pytest.raises(sd.SpiradValueError):
        sd.root.dense(sd.ij, (5, 2, 3))
    with pytest.raises(sd.SpiradTypeError):
        sd.root.dense(sd.i, 5).place(np.zeros(5))
    unplaced = sd.field(sd.f32)
    with pytest.raises(sd.SpiradValueError, match="no shape"):
        unplaced.to_numpy()
    with pytest.raises(sd.SpiradValueError):
        sd.field(sd.f32, shape=(-1, 2))
    with pytest.raises(sd.SpiradTypeError):
        sd.field("float32", shape=3)


@test_archs()
def test_vector_and_matrix_fields(arch):
    v = sd.Vector.field(3, sd.f32, shape=(2, 2))
    m = sd.Matrix.field(2, 3, sd.i32, shape=4)
    assert v.to_numpy().shape == (2, 2, 3)
    assert m.to_numpy().shape == (4, 2, 3)

    @sd.kernel
    def k():
        for i, j in v:
            v[i, j] = sd.Vector([i, j, i + j])
        for i in m:
            for r in sd.static(range(2)):
                for c in sd.static(range(3)):
                    m[i][r, c] = i * 100 + r * 10 + c

    k()
    ii, jj = np.meshgrid(np.arange(2), np.arange(2), indexing="ij")
    np.testing.assert_array_equal(v.to_numpy(), np.stack([ii, jj, ii + jj], -1))
    want = np.arange(4)[:, None, None] * 100 + np.arange(2)[None, :, None] * 10 + np.arange(3)
    np.testing.assert_array_equal(m.to_numpy(), want)
    np.testing.assert_array_equal(m[3], want[3])
    v[1, 1] = [7, 8, 9]
    np.testing.assert_array_equal(v[1, 1], [7, 8, 9])


@test_archs()
def test_python_types_as_dtypes(arch):
    f = sd.field(float, shape=2)
    i = sd.field(int, shape=2)
    b = sd.field(bool, shape=2)
    assert (f.dtype, i.dtype, b.dtype) == (sd.f32, sd.i32, sd.u1)
