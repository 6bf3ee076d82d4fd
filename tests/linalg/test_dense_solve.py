"""sd.solve(A, b) in kernels (Taichi's ti.solve): Gaussian elimination with partial pivoting,
against numpy, and its gradients in both modes against the analytic ones
(dL/db = A^-T w, dL/dA = -(dL/db) x^T for L = w . x)."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, exactly, test_archs


def _systems(n, count, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((count, n, n)) + 0.5 * np.eye(n)
    a[0, 0, 0] = 0.0  # a zero leading entry: only pivoting solves it
    return a, rng.standard_normal((count, n))


@pytest.mark.parametrize("n", [2, 3, 4])
@test_archs()
def test_solve_matches_numpy(arch, n):
    a, b = _systems(n, 16, n)
    A = sd.Matrix.field(n, n, sd.f32, shape=16)
    B, X = sd.Vector.field(n, sd.f32, shape=16), sd.Vector.field(n, sd.f32, shape=16)
    A.from_numpy(a.astype(np.float32))
    B.from_numpy(b.astype(np.float32))

    @sd.kernel
    def run():
        for k in A:
            X[k] = sd.solve(A[k], B[k])

    run()
    want = np.linalg.solve(a.astype(np.float32).astype(np.float64),
                           b.astype(np.float32).astype(np.float64)[..., None])[..., 0]
    np.testing.assert_allclose(X.to_numpy(), want, rtol=2e-4, atol=2e-4)


@test_archs(archs=EVERY_ARCH, require=("f64",), default_fp=sd.f64)
def test_solve_gradients_both_modes(arch):
    n = 3
    a, b = _systems(n, 4, 7)
    w = np.random.default_rng(8).standard_normal((4, n))
    A = sd.Matrix.field(n, n, sd.f64, shape=4, needs_grad=True, needs_dual=True)
    B = sd.Vector.field(n, sd.f64, shape=4, needs_grad=True, needs_dual=True)
    W = sd.Vector.field(n, sd.f64, shape=4)
    loss = sd.field(sd.f64, shape=(), needs_grad=True, needs_dual=True)
    A.from_numpy(a)
    B.from_numpy(b)
    W.from_numpy(w)

    @sd.kernel
    def run():
        for k in A:
            loss[None] += W[k].dot(sd.solve(A[k], B[k]))

    with sd.ad.Tape(loss=loss):
        run()
    x = np.linalg.solve(a, b[..., None])[..., 0]
    gb = np.linalg.solve(np.transpose(a, (0, 2, 1)), w[..., None])[..., 0]
    ga = -gb[:, :, None] * x[:, None, :]
    np.testing.assert_allclose(B.grad.to_numpy(), gb, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(A.grad.to_numpy(), ga, rtol=1e-10, atol=1e-12)
    seed = np.zeros((4, n, n))
    seed[2, 1, 0] = 1.0  # d loss / d A[2][1, 0], forward mode
    with sd.ad.FwdMode(loss=loss, param=A, seed=seed.reshape(-1).tolist()):
        run()
    assert loss.dual[None] == pytest.approx(ga[2, 1, 0], rel=1e-10)


@test_archs(archs=exactly("cpu"))
def test_solve_shape_mismatch_is_a_compile_error(arch):
    @sd.kernel
    def bad() -> sd.f32:
        x = sd.solve(sd.Matrix([[1.0, 0.0], [0.0, 1.0]]), sd.Vector([1.0, 2.0, 3.0]))
        return x[0]

    with pytest.raises(sd.SpiradError, match="square A and a b of A's size"):
        bad()
