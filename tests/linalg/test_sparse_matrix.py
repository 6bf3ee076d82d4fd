"""sd.linalg.SparseMatrixBuilder filled in kernels (every arch: an atomic counter into triplet
ndarrays) and SparseMatrix's host operations, against scipy.sparse / numpy."""
import numpy as np
import pytest
import scipy.sparse

import spirad as sd
from tests.support.archs import EVERY_ARCH, exactly, test_archs


def _random_triplets(n, m, k, seed):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, n, k).astype(np.int32)
    cols = rng.integers(0, m, k).astype(np.int32)
    rows[: k // 4] = rows[k // 4: 2 * (k // 4)]  # duplicates: entries at one place add up
    cols[: k // 4] = cols[k // 4: 2 * (k // 4)]
    vals = rng.standard_normal(k)
    return rows, cols, vals


def _fill_and_build(dt, seed=0):
    n, m, k = 13, 7, 60
    rows, cols, vals = _random_triplets(n, m, k, seed)
    builder = sd.linalg.SparseMatrixBuilder(n, m, max_num_triplets=2 * k, dtype=dt)
    r, c, v = sd.ndarray(sd.i32, k), sd.ndarray(sd.i32, k), sd.ndarray(dt, k)
    r.from_numpy(rows)
    c.from_numpy(cols)
    v.from_numpy(vals.astype(dt.np))

    @sd.kernel
    def fill(A: sd.types.sparse_matrix_builder(), r: sd.types.ndarray(), c: sd.types.ndarray(),
             v: sd.types.ndarray()):
        for t in range(k):
            A[r[t], c[t]] += v[t]
            A[r[t], c[t]] -= 0.5 * v[t]  # `-=` appends the negated value

    fill(builder, r, c, v)
    assert builder.num_triplets == 2 * k
    want = scipy.sparse.coo_matrix((0.5 * vals.astype(dt.np), (rows, cols)), shape=(n, m))
    return builder.build(), want.toarray(), builder


@test_archs()
def test_builder_matches_scipy(arch):
    A, want, builder = _fill_and_build(sd.f32)
    assert A.shape == (13, 7) and A.dtype == sd.f32
    np.testing.assert_allclose(A.to_numpy(), want, rtol=1e-6, atol=1e-6)
    assert builder.num_triplets == 0  # build() empties the builder, as Taichi's


@test_archs(require=("f64",))
def test_builder_f64_matches_scipy(arch):
    A, want, _ = _fill_and_build(sd.f64, seed=1)
    np.testing.assert_allclose(A.to_numpy(), want, rtol=1e-14, atol=1e-14)


@test_archs(archs=EVERY_ARCH)
def test_builder_overflow_is_an_error_not_a_truncated_matrix(arch):
    builder = sd.linalg.SparseMatrixBuilder(4, 4, max_num_triplets=10)

    @sd.kernel
    def fill(A: sd.types.sparse_matrix_builder()):
        for i, j in sd.ndrange(4, 4):
            A[i, j] += 1.0

    fill(builder)
    with pytest.raises(sd.SpiradRuntimeError, match="inserted 16 triplets but max_num_triplets "
                                                    "is 10"):
        builder.build()


@test_archs(archs=exactly("cpu"))
def test_builder_index_outside_the_matrix_is_an_error(arch):
    builder = sd.linalg.SparseMatrixBuilder(4, 4, max_num_triplets=10)

    @sd.kernel
    def fill(A: sd.types.sparse_matrix_builder()):
        A[4, 0] += 1.0

    fill(builder)
    with pytest.raises(sd.SpiradValueError, match=r"\[4, 0\], outside the 4 x 4 matrix"):
        builder.build()


@test_archs(archs=exactly("cpu"))
def test_builder_takes_only_add_and_sub(arch):
    builder = sd.linalg.SparseMatrixBuilder(4, 4, max_num_triplets=10)

    @sd.kernel
    def fill(A: sd.types.sparse_matrix_builder()):
        A[0, 0] *= 2.0

    with pytest.raises(sd.SpiradSyntaxError, match=r"only `A\[i, j\] \+= v`"):
        fill(builder)


@test_archs(archs=exactly("cpu"))
def test_host_operations_match_scipy(arch):
    A, a, _ = _fill_and_build(sd.f32, seed=2)
    B, b, _ = _fill_and_build(sd.f32, seed=3)
    tol = dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose((A + B).to_numpy(), a + b, **tol)
    np.testing.assert_allclose((A - B).to_numpy(), a - b, **tol)
    np.testing.assert_allclose((A * 2.5).to_numpy(), a * 2.5, **tol)
    np.testing.assert_allclose((2.5 * A).to_numpy(), a * 2.5, **tol)
    np.testing.assert_allclose((A * B).to_numpy(), a * b, **tol)  # elementwise, as Taichi
    np.testing.assert_allclose((A @ B.transpose()).to_numpy(), a @ b.T, **tol)
    assert A.transpose().shape == (7, 13)
    x = np.arange(7, dtype=np.float32)
    xf = sd.field(sd.f32, 7)
    xf.from_numpy(x)
    xn = sd.ndarray(sd.f32, 7)
    xn.from_numpy(x)
    np.testing.assert_allclose(A @ x, a @ x, **tol)
    np.testing.assert_allclose(A @ xf, a @ x, **tol)  # a field: a numpy array back
    y = A @ xn  # an ndarray: an ndarray back
    assert isinstance(y, sd.Ndarray) and y.shape == (13,)
    np.testing.assert_allclose(y.to_numpy(), a @ x, **tol)
    A[0, 0] = 1024.0
    assert A[0, 0] == 1024.0 and A[1, 2] == pytest.approx(a[1, 2], rel=1e-6)
    with pytest.raises(sd.SpiradValueError, match="Dimension mismatch"):
        A + A.transpose()


@test_archs(archs=exactly("cpu"))
def test_build_from_ndarray_and_taichis_printout(arch):
    trip = sd.Vector.ndarray(3, sd.f32, shape=5)
    trip.from_numpy(np.array([[0, 0, -2], [1, 1, -0.5], [2, 2, 1], [3, 3, 2.5], [0, 3, 123.456]],
                             np.float32))
    A = sd.linalg.SparseMatrix(n=4, m=4, dtype=sd.f32)
    A.build_from_ndarray(trip)
    # Taichi 1.7.4 printed this matrix so (Eigen's dense format, 4 significant digits)
    assert str(A) == ("[   -2,     0,     0, 123.5]\n[    0,  -0.5,     0,     0]\n"
                      "[    0,     0,     1,     0]\n[    0,     0,     0,   2.5]")


@test_archs(archs=exactly("cpu"))
def test_mmwrite_round_trips(arch, tmp_path):
    import scipy.io
    A, a, _ = _fill_and_build(sd.f64, seed=4)
    A.mmwrite(str(tmp_path / "a.mtx"))
    np.testing.assert_allclose(scipy.io.mmread(str(tmp_path / "a.mtx")).toarray(), a, rtol=1e-15)
