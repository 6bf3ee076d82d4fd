"""`sd.linalg.SparseSolver` (direct: LLT, LDLT, LU) and `sd.linalg.SparseCG` (conjugate
gradients) for `SparseMatrix` systems: Taichi's `ti.linalg` solvers, run on the host by scipy.

Taichi's CPU solvers are Eigen's `SimplicialLLT` / `SimplicialLDLT` (which read the matrix's lower
triangle only: the system solved is the symmetric matrix with that lower triangle) and
`SparseLU`. Here all three are SuperLU factorizations (`scipy.sparse.linalg.splu`):

- "LU": the matrix as given, column ordering COLAMD (`ordering="COLAMD"`) or minimum degree on
  Aᵀ + A (`"AMD"`), partial pivoting;
- "LLT" / "LDLT": the symmetric matrix of A's lower triangle, a symmetric ordering and no row
  pivoting, so the pivots are LDLᵀ's D; LLT fails (`info()` False) unless every pivot is
  positive (the matrix is not positive definite), LDLT fails on a zero pivot, as Eigen's do.

A solve after a failed factorization raises (Taichi returns whatever Eigen leaves): a user never
gets an unflagged wrong solution. Results have the solver's dtype; `solve(b)` returns an ndarray
for an ndarray `b`, a numpy array for a field or numpy `b`, as Taichi's.
"""
from __future__ import annotations

import numpy as np

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradRuntimeError, SpiradTypeError, SpiradValueError

from .sparse_matrix import SparseMatrix, scipy_sparse, value_dtype

SOLVER_TYPES = ("LLT", "LDLT", "LU")
ORDERINGS = {"AMD": "MMD_AT_PLUS_A", "COLAMD": "COLAMD"}


def _host_vector(b, n: int, what: str) -> np.ndarray:
    from ..data.field import Field
    from ..data.ndarray import Ndarray
    if isinstance(b, (Field, Ndarray)):
        x = b.to_numpy()
    elif isinstance(b, np.ndarray):
        x = b
    else:
        raise SpiradTypeError(f"{what}: the right-hand side must be a field, an ndarray or a "
                              f"numpy array, got {type(b).__name__}")
    if x.ndim != 1 or x.shape[0] != n:
        raise SpiradValueError(f"{what}: the right-hand side has shape {tuple(x.shape)}, the "
                               f"matrix has {n} rows")
    return x


def _result(b, x: np.ndarray, dtype):
    """x in the form Taichi returns for a right-hand side like `b`."""
    from ..data.ndarray import Ndarray, ndarray
    if isinstance(b, Ndarray):
        out = ndarray(b.dtype, x.shape[0])
        out.from_numpy(x.astype(b.dtype.np))
        return out
    return x.astype(dtype.np)


class SparseSolver:
    """A direct solver of A x = b for a SparseMatrix A: `analyze_pattern(A)`, `factorize(A)`
    (or `compute(A)` for both), then `solve(b)`; `info()` says whether the last step
    succeeded."""

    def __init__(self, dtype=T.f32, solver_type="LLT", ordering="AMD"):
        if solver_type not in SOLVER_TYPES or ordering not in ORDERINGS:
            raise SpiradRuntimeError(
                f"The solver type {solver_type} with {ordering} is not supported for now. Only "
                f"{list(SOLVER_TYPES)} with {list(ORDERINGS)} are supported.")
        self.dtype = value_dtype(dtype)
        self.solver_type, self.ordering = solver_type, ordering
        self.matrix = None
        self._lu = None
        self._ok = False

    @staticmethod
    def _check(A):
        if not isinstance(A, SparseMatrix):
            raise SpiradRuntimeError(f"The parameter type: {type(A)} is not supported in linear "
                                     f"solvers for now.")

    def analyze_pattern(self, A) -> None:
        """Take A's sparsity pattern (SuperLU orders it when factorizing)."""
        self._check(A)
        if A.dtype != self.dtype:
            raise SpiradRuntimeError(f"The SparseSolver's dtype {self.dtype} is not consistent "
                                     f"with the SparseMatrix's dtype {A.dtype}.")
        if A.n != A.m:
            raise SpiradValueError(f"SparseSolver: the matrix is {A.n} x {A.m}, not square")
        self.matrix = A
        self._lu, self._ok = None, True

    def factorize(self, A) -> None:
        """Factorize A (see the module docstring for what each solver type factorizes)."""
        self._check(A)
        if self.matrix is None or self.matrix.shape != A.shape:
            self.analyze_pattern(A)
        self.matrix = A
        sp = scipy_sparse()
        m = A.matrix.astype(self.dtype.np)
        symmetric = self.solver_type != "LU"
        if symmetric:  # Eigen's simplicial solvers read the lower triangle only
            low = sp.tril(m, format="csc")
            m = (low + sp.tril(m, k=-1, format="csc").T).tocsc()
        try:
            lu = sp.linalg.splu(m.tocsc(), permc_spec="MMD_AT_PLUS_A" if symmetric
                                else ORDERINGS[self.ordering],
                                diag_pivot_thresh=0.0 if symmetric else 1.0,
                                options={"SymmetricMode": symmetric})
        except RuntimeError:  # exactly singular
            self._lu, self._ok = None, False
            return
        ok = bool(np.all(np.isfinite(lu.U.diagonal())) and np.all(lu.U.diagonal() != 0))
        if symmetric:  # pivots on the diagonal only; LLT: all of them positive
            ok = ok and bool(np.array_equal(lu.perm_r, lu.perm_c))
            if self.solver_type == "LLT":
                ok = ok and bool(np.all(lu.U.diagonal() > 0))
        self._lu, self._ok = (lu if ok else None), ok

    def compute(self, A) -> None:
        """`analyze_pattern(A)` then `factorize(A)`."""
        self.analyze_pattern(A)
        self.factorize(A)

    def solve(self, b):
        """x with A x = b: an ndarray for an ndarray b, else a numpy array."""
        if self.matrix is None:
            raise SpiradRuntimeError("Please call compute() before calling solve().")
        if self._lu is None:
            why = ("not symmetric positive definite" if self.solver_type == "LLT"
                   else "singular" if self.solver_type == "LU" else "singular or needs pivoting")
            raise SpiradRuntimeError(f"SparseSolver({self.solver_type}): the factorization "
                                     f"failed (info() is False): the matrix is {why}")
        rhs = _host_vector(b, self.matrix.n, "SparseSolver.solve")
        x = self._lu.solve(rhs.astype(self.dtype.np))
        self._ok = bool(np.all(np.isfinite(x)))
        return _result(b, x, self.dtype)

    def info(self) -> bool:
        """Whether the last analyze / factorize / solve succeeded."""
        return self._ok


class SparseCG:
    """Conjugate gradients for a symmetric positive definite SparseMatrix: `solve()` returns
    (x, converged) and prints the iteration count and the estimated error, as Taichi's (Eigen's
    `ConjugateGradient` with its Jacobi preconditioner, run by Taichi with `verbose`). The loop
    is Eigen's, in numpy: converged when |r| < atol |b|, at most `max_iter` iterations, the
    count and error as Eigen reports them. One difference: `x0` is the initial guess (Taichi
    passes it but Eigen's `solve()` starts from zero)."""

    def __init__(self, A, b, x0=None, max_iter=50, atol=1e-6):
        if not isinstance(A, SparseMatrix):
            raise SpiradTypeError(f"SparseCG takes a SparseMatrix, got {type(A).__name__}")
        self.matrix, self.dtype = A, A.dtype
        self.b = b
        self._b = _host_vector(b, A.n, "SparseCG")
        self._x0 = None if x0 is None else _host_vector(x0, A.m, "SparseCG (x0)")
        self.max_iter, self.atol = int(max_iter), float(atol)

    def solve(self):
        """(x as a numpy array, whether it converged)."""
        x, iters, error = self._pcg()
        print(f"#iterations:     {iters}")
        print(f"estimated error: {error:g}")
        return x, bool(error <= self.atol)

    def _pcg(self):
        """Jacobi-preconditioned CG: (x, iterations, |r| / |b|)."""
        dt = self.dtype.np
        m = self.matrix.matrix.tocsr().astype(dt)
        b = self._b.astype(dt)
        x = np.zeros(m.shape[1], dt) if self._x0 is None else self._x0.astype(dt)
        d = m.diagonal()
        inv = np.where(d != 0, 1 / np.where(d != 0, d, 1), 1).astype(dt)
        bb = float(b @ b)
        if bb == 0.0:
            return np.zeros_like(x), 0, 0.0
        threshold = max(self.atol ** 2 * bb, float(np.finfo(dt).tiny))
        r = b - m @ x
        rr = float(r @ r)
        if rr < threshold:
            return x, 0, (rr / bb) ** 0.5
        p = inv * r
        rz = float(r @ p)
        it = 0
        while it < self.max_iter:
            q = m @ p
            alpha = dt.type(rz / float(p @ q))
            x += alpha * p
            r -= alpha * q
            rr = float(r @ r)
            if rr < threshold:
                break
            z = inv * r
            rz_old, rz = rz, float(r @ z)
            p = z + dt.type(rz / rz_old) * p
            it += 1
        return x, it, (rr / bb) ** 0.5
