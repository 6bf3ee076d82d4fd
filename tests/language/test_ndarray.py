"""Ndarrays: `sd.ndarray` + `types.ndarray()` arguments, run-time shapes, vector elements."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


@sd.kernel
def saxpy(a: sd.f32, x: sd.types.ndarray(), y: sd.types.ndarray()):
    for i in x:
        y[i] = a * x[i] + y[i]


@test_archs()
@pytest.mark.parametrize("n", [1, 7, 1000])
def test_saxpy_runtime_shapes(arch, n):
    rng = np.random.default_rng(n)
    xs, ys = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    x, y = sd.ndarray(sd.f32, n), sd.ndarray(sd.f32, n)
    x.from_numpy(xs)
    y.from_numpy(ys)
    saxpy(1.5, x, y)
    np.testing.assert_allclose(y.to_numpy(), 1.5 * xs + ys, rtol=1e-6, atol=1e-6)


@test_archs()
def test_at_most_two_compiles_for_all_lengths(arch):
    for n in (3, 5, 9, 3, 17):
        x, y = sd.ndarray(sd.f32, n), sd.ndarray(sd.f32, n)
        x.fill(1.0)
        saxpy(2.0, x, y)
        np.testing.assert_array_equal(y.to_numpy(), np.full(n, 2.0))
    keys = [k for k in saxpy._cache if k[0] == sd._state.current().epoch]
    # one signature: the program specialised on the first launch's shapes (3) and one generic
    # program for every other length (passes/shape_specialise)
    assert len({k[:4] for k in keys}) == 1 and len(keys) == 2


@sd.kernel
def shape_query(a: sd.types.ndarray(), out: sd.types.ndarray()):
    n = a.shape[0]
    m = a.shape[1]
    for i, j in sd.ndrange(n, m):
        a[i, j] = i * m + j
    out[0] = n
    out[1] = m


@test_archs()
@pytest.mark.parametrize("shape", [(2, 3), (5, 1), (4, 4)], ids=str)
def test_shape_and_ndrange(arch, shape):
    a = sd.ndarray(sd.i32, shape)
    out = sd.ndarray(sd.i32, 2)
    shape_query(a, out)
    np.testing.assert_array_equal(a.to_numpy(), np.arange(np.prod(shape)).reshape(shape))
    np.testing.assert_array_equal(out.to_numpy(), shape)


@test_archs()
def test_2d_loop_and_grouped(arch):
    @sd.kernel
    def k(a: sd.types.ndarray(ndim=2), b: sd.types.ndarray(ndim=2)):
        for i, j in a:
            a[i, j] = i - j
        for I in sd.grouped(b):
            b[I] = I[0] * 10 + I[1]

    a, b = sd.ndarray(sd.f64, (3, 4)), sd.ndarray(sd.i64, (2, 5))
    k(a, b)
    np.testing.assert_array_equal(a.to_numpy(), np.subtract.outer(np.arange(3), np.arange(4)))
    np.testing.assert_array_equal(b.to_numpy(), np.add.outer(10 * np.arange(2), np.arange(5)))


@test_archs()
def test_vector_ndarray(arch):
    @sd.kernel
    def k(p: sd.types.ndarray(), out: sd.types.ndarray()):
        for i in p:
            v = p[i]
            out[i] = v.norm()
            p[i] = v * 2.0

    data = np.random.default_rng(1).standard_normal((6, 3)).astype(np.float32)
    p = sd.Vector.ndarray(3, sd.f32, 6)
    out = sd.ndarray(sd.f32, 6)
    p.from_numpy(data)
    k(p, out)
    np.testing.assert_allclose(out.to_numpy(), np.linalg.norm(data, axis=1), rtol=1e-6)
    np.testing.assert_allclose(p.to_numpy(), data * 2, rtol=1e-6)


@test_archs()
def test_matrix_ndarray(arch):
    @sd.kernel
    def k(m: sd.types.ndarray(), v: sd.types.ndarray()):
        for i in m:
            v[i] = m[i] @ v[i]

    ms = np.random.default_rng(2).standard_normal((4, 2, 2)).astype(np.float32)
    vs = np.random.default_rng(3).standard_normal((4, 2)).astype(np.float32)
    m, v = sd.Matrix.ndarray(2, 2, sd.f32, 4), sd.Vector.ndarray(2, sd.f32, 4)
    m.from_numpy(ms)
    v.from_numpy(vs)
    k(m, v)
    np.testing.assert_allclose(v.to_numpy(), np.einsum("nij,nj->ni", ms, vs), rtol=1e-5, atol=1e-6)


@test_archs()
def test_ndarray_grad(arch):
    a = sd.ndarray(sd.f32, 3, needs_grad=True)
    assert a.grad is not None and a.grad.shape == (3,)

    @sd.kernel
    def k(x: sd.types.ndarray()):
        for i in x:
            x.grad[i] = i + 0.5

    k(a)
    np.testing.assert_array_equal(a.grad.to_numpy(), [0.5, 1.5, 2.5])
    np.testing.assert_array_equal(a.to_numpy(), [0, 0, 0])


@test_archs()
def test_ndarray_host_access(arch):
    a = sd.ndarray(sd.i32, (2, 2))
    a[1, 0] = 5
    a.fill(0)
    a[0, 1] = 3
    assert a[0, 1] == 3
    np.testing.assert_array_equal(a.to_numpy(), [[0, 3], [0, 0]])
    with pytest.raises(sd.SpiradValueError):
        a.from_numpy(np.zeros((2, 3), np.int32))
    with pytest.raises(sd.SpiradValueError):
        a[2, 0]


@test_archs()
def test_ndarray_argument_checks(arch):
    @sd.kernel
    def k(a: sd.types.ndarray(dtype=sd.f32, ndim=1)):
        for i in a:
            a[i] = 1.0

    k(sd.ndarray(sd.f32, 4))
    with pytest.raises(sd.SpiradTypeError, match="dtype"):
        k(sd.ndarray(sd.f64, 4))
    with pytest.raises(sd.SpiradTypeError, match="dimension"):
        k(sd.ndarray(sd.f32, (4, 1)))
    k(np.zeros(4, np.float32))  # numpy arrays are accepted (tests/interop/test_arrays.py)
    with pytest.raises(sd.SpiradTypeError, match="dtype float32"):
        k(np.zeros(4, np.float64))
    with pytest.raises(sd.SpiradTypeError, match="sd.ndarray"):
        k(sd.field(sd.f32, shape=4))


@test_archs()
def test_empty_ndarray_launch(arch):
    x, y = sd.ndarray(sd.f32, 0), sd.ndarray(sd.f32, 0)
    saxpy(1.0, x, y)  # zero iterations: nothing runs, nothing crashes
    assert y.to_numpy().shape == (0,)


@sd.kernel
def add_one(a: sd.types.ndarray()):
    for i in a:
        a[i] += 1


@test_archs()
def test_ndarray_deepcopy(arch):
    """copy.deepcopy gives an independent ndarray (new memory, own id) with the element type,
    shape and values, on device-memory backends too (Taichi's Ndarray.__deepcopy__)."""
    import copy
    x = sd.ndarray(sd.i32, 6)
    x.from_numpy(np.arange(6, dtype=np.int32))
    y = copy.deepcopy(x)
    assert y is not x and y.id != x.id and y.shape == x.shape and y.dtype == x.dtype
    add_one(x)
    np.testing.assert_array_equal(y.to_numpy(), np.arange(6))
    add_one(y)
    add_one(y)
    np.testing.assert_array_equal(x.to_numpy(), np.arange(6) + 1)
    np.testing.assert_array_equal(y.to_numpy(), np.arange(6) + 2)
    m = sd.Matrix.ndarray(2, 3, sd.f32, (4,))
    m.from_numpy(np.arange(24, dtype=np.float32).reshape(4, 2, 3))
    c = copy.deepcopy({"m": m, "again": m})
    assert c["m"] is c["again"]  # the memo: one copy per object
    assert (c["m"].n, c["m"].m, c["m"].shape) == (2, 3, (4,))
    m.fill(0)
    np.testing.assert_array_equal(c["m"].to_numpy(), np.arange(24).reshape(4, 2, 3))


@test_archs()
def test_host_array_vector_elements_take_the_arrays_scalar_type(arch):
    """A numpy array passed for `types.ndarray(dtype=mat2)` keeps its own scalar type (Taichi
    checks the element shape only, and warns on the narrowing store); a scalar annotation is
    still checked. `element_type` is Taichi's: the dtype, or the element tensor type."""
    @sd.kernel
    def fill(a: sd.types.ndarray(dtype=sd.math.mat2)):
        for i in range(3):
            for j, k in sd.ndrange(2, 2):
                a[i][j, k] = j * 2 + k + 0.5

    @sd.kernel
    def scalar(a: sd.types.ndarray(dtype=sd.f32)):
        a[0] = 1

    m = np.zeros((3, 2, 2), dtype=np.int32)
    with pytest.warns(sd.SpiradWarning, match="i32 <- f32"):
        fill(m)
    np.testing.assert_array_equal(m, np.tile([[0, 1], [2, 3]], (3, 1, 1)))
    with pytest.raises(sd.SpiradArgumentValueError, match="required array has dtype=f32"):
        scalar(np.zeros(2, dtype=np.int32))
    v = sd.ndarray(sd.types.vector(3, sd.i32), shape=(2,))
    assert v.element_type.element_type() == sd.i32 and v.element_type.shape() == [3]
    assert str(v.element_type) == "[Tensor (3) i32]"
    assert sd.ndarray(sd.f32, shape=2).element_type == sd.f32
