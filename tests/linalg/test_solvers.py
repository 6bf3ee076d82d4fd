"""sd.linalg.SparseSolver (LLT / LDLT / LU, SuperLU underneath) and SparseCG against numpy's
dense solve; the failures Eigen reports (info() False) are reported, never a wrong x."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs


def _matrix(a: np.ndarray, dt=sd.f64):
    n = a.shape[0]
    builder = sd.linalg.SparseMatrixBuilder(n, n, max_num_triplets=n * n, dtype=dt)
    arr = sd.ndarray(dt, (n, n))
    arr.from_numpy(a.astype(dt.np))

    @sd.kernel
    def fill(A: sd.types.sparse_matrix_builder(), a: sd.types.ndarray()):
        for i, j in sd.ndrange(n, n):
            if a[i, j] != 0:
                A[i, j] += a[i, j]

    fill(builder, arr)
    return builder.build()


def _spd(n, seed):
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, n))
    a = m @ m.T + n * np.eye(n)
    a[np.abs(a) < 0.5] = 0.0  # sparse, still symmetric positive definite (diagonally dominant)
    return a + np.diag(np.abs(a).sum(axis=1))


@pytest.mark.parametrize("solver_type", ["LLT", "LDLT", "LU"])
@pytest.mark.parametrize("ordering", ["AMD", "COLAMD"])
@test_archs(archs=exactly("cpu"))
def test_direct_solvers_match_numpy(arch, solver_type, ordering):
    a = _spd(20, 0)
    b = np.arange(1.0, 21.0)
    solver = sd.linalg.SparseSolver(dtype=sd.f64, solver_type=solver_type, ordering=ordering)
    A = _matrix(a)
    solver.analyze_pattern(A)
    solver.factorize(A)
    assert solver.info()
    x = solver.solve(b)
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-12)
    bn = sd.ndarray(sd.f64, 20)  # an ndarray right-hand side gives an ndarray
    bn.from_numpy(b)
    xn = solver.solve(bn)
    assert isinstance(xn, sd.Ndarray)
    np.testing.assert_allclose(xn.to_numpy(), np.linalg.solve(a, b), rtol=1e-12)


@test_archs(archs=exactly("cpu"))
def test_llt_reads_the_lower_triangle_as_eigen(arch):
    a = _spd(12, 1)
    skew = a + np.triu(np.full_like(a, 7.0), k=1)  # the upper triangle is ignored
    b = np.ones(12)
    solver = sd.linalg.SparseSolver(dtype=sd.f64, solver_type="LLT")
    solver.compute(_matrix(skew))
    np.testing.assert_allclose(solver.solve(b), np.linalg.solve(a, b), rtol=1e-12)
    lu = sd.linalg.SparseSolver(dtype=sd.f64, solver_type="LU")  # LU reads all of it
    lu.compute(_matrix(skew))
    np.testing.assert_allclose(lu.solve(b), np.linalg.solve(skew, b), rtol=1e-10)


@test_archs(archs=exactly("cpu"))
def test_llt_of_an_indefinite_matrix_fails_loudly(arch):
    a = np.diag([2.0, -1.0, 3.0])
    solver = sd.linalg.SparseSolver(dtype=sd.f64, solver_type="LLT")
    solver.compute(_matrix(a))
    assert not solver.info()
    with pytest.raises(sd.SpiradRuntimeError, match="not symmetric positive definite"):
        solver.solve(np.ones(3))
    ldlt = sd.linalg.SparseSolver(dtype=sd.f64, solver_type="LDLT")  # LDLT takes it
    ldlt.compute(_matrix(a))
    assert ldlt.info()
    np.testing.assert_allclose(ldlt.solve(np.ones(3)), [0.5, -1.0, 1.0 / 3.0], rtol=1e-14)


@test_archs(archs=exactly("cpu"))
def test_solver_dtype_must_match_the_matrix(arch):
    solver = sd.linalg.SparseSolver(dtype=sd.f32)
    with pytest.raises(sd.SpiradRuntimeError, match="not consistent"):
        solver.analyze_pattern(_matrix(np.eye(3)))
    with pytest.raises(sd.SpiradRuntimeError, match="not supported"):
        sd.linalg.SparseSolver(solver_type="QR")


@pytest.mark.parametrize("dt", [sd.f32, sd.f64])
@test_archs(archs=exactly("cpu"))
def test_sparse_cg_matches_numpy(arch, dt):
    a = _spd(30, 2)
    b = sd.ndarray(dt, 30)
    b.from_numpy(np.linspace(1, 2, 30).astype(dt.np))
    x, ok = sd.linalg.SparseCG(_matrix(a, dt), b, max_iter=200, atol=1e-6).solve()
    assert ok
    rhs = b.to_numpy().astype(np.float64)
    # converged means |b - A x| <= atol |b| (Eigen's criterion; the Jacobi-preconditioned run)
    assert np.linalg.norm(rhs - a @ x) <= (1e-5 if dt == sd.f32 else 1e-6) * np.linalg.norm(rhs)
    np.testing.assert_allclose(x, np.linalg.solve(a, rhs), rtol=1e-4)
