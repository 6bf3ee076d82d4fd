"""sd.linalg.MatrixFreeCG / MatrixFreeBICGSTAB: kernels only, so every arch; the solution
against numpy's dense solve of the same operator."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, exactly, test_archs

N = 24


def _operator(dt, symmetric: bool):
    """A x = 6 x_i - l x_{i-1} - x_{i+1} on a 1-D grid (l = 1: symmetric), and its dense matrix."""
    left = 1.0 if symmetric else 2.5

    @sd.kernel
    def matvec(v: sd.template(), out: sd.template()):
        for i in v:
            lo = v[i - 1] if i > 0 else 0.0
            hi = v[i + 1] if i < N - 1 else 0.0
            out[i] = 6.0 * v[i] - left * lo - hi

    dense = 6.0 * np.eye(N) - left * np.eye(N, k=-1) - np.eye(N, k=1)
    return sd.linalg.LinearOperator(matvec), dense


@pytest.mark.parametrize("method", ["cg", "bicgstab"])
@test_archs()
def test_matrixfree_f32(arch, method):
    _check(sd.f32, method, 1e-5)


@pytest.mark.parametrize("method", ["cg", "bicgstab"])
@test_archs(archs=EVERY_ARCH, require=("f64",))
def test_matrixfree_f64(arch, method):
    _check(sd.f64, method, 1e-12)


def _check(dt, method, tol):
    A, dense = _operator(dt, symmetric=method == "cg")
    b, x = sd.field(dt, N), sd.field(dt, N)
    rhs = np.sin(np.arange(N) * 0.3) + 1.0
    b.from_numpy(rhs.astype(dt.np))
    x.fill(0.0)
    solve = sd.linalg.MatrixFreeCG if method == "cg" else sd.linalg.MatrixFreeBICGSTAB
    assert solve(A, b, x, tol=tol, maxiter=200, quiet=True)
    np.testing.assert_allclose(x.to_numpy(), np.linalg.solve(dense, rhs), rtol=10 * tol,
                               atol=10 * tol)


@test_archs(archs=exactly("cpu"))
def test_matrixfree_reports_no_convergence(arch):
    A, _ = _operator(sd.f32, symmetric=True)
    b, x = sd.field(sd.f32, N), sd.field(sd.f32, N)
    b.fill(1.0)
    assert not sd.linalg.MatrixFreeCG(A, b, x, tol=1e-30, maxiter=3)
    with pytest.raises(sd.SpiradTypeError, match="Dtype mismatch"):
        sd.linalg.MatrixFreeCG(A, b, sd.field(sd.f64, N))


@test_archs(archs=EVERY_ARCH)
def test_repeated_solves_reuse_work_fields_and_survive_init(arch):
    """The second solve of a shape takes the first one's work fields (no recompile); after an
    init() the pool starts over: the solves still agree with numpy."""
    for _ in range(2):
        for _ in range(2):
            A, dense = _operator(sd.f32, symmetric=True)
            b, x = sd.field(sd.f32, N), sd.field(sd.f32, N)
            b.fill(1.0)
            assert sd.linalg.MatrixFreeCG(A, b, x, tol=1e-5)
            np.testing.assert_allclose(x.to_numpy(), np.linalg.solve(dense, np.ones(N)),
                                       rtol=1e-4)
        sd.init(arch=arch)
