"""`sd.linalg.SparseMatrix` (Taichi's `ti.linalg.SparseMatrix`): a sparse matrix on the host,
a `scipy.sparse` CSC (`storage_format="col_major"`, Taichi's default) or CSR (`"row_major"`)
matrix underneath.

Why scipy on the host: Taichi keeps these matrices in Eigen on the CPU (cuSPARSE on CUDA); the
operations are host-side linear algebra between kernel launches, and scipy is the standard
library for them. Kernels never see a SparseMatrix: they fill a `SparseMatrixBuilder`, and
products with fields / ndarrays read them back to the host (`A @ x`).

Taichi's semantics kept: `A + B`, `A - B`, `A * s` / `s * A` (a scalar), `A * B` (elementwise),
`A @ B` (a SparseMatrix), `A @ x` (an ndarray gives an ndarray of x's dtype, a field or a numpy
array gives a numpy array), `A.transpose()`, `A[i, j]` (read and write), `A.shape`, `str(A)`
(Eigen's dense printout with 4 significant digits), `build_from_ndarray`, `mmwrite`.
"""
from __future__ import annotations

import numbers
from functools import reduce

import numpy as np

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradRuntimeError, SpiradTypeError, SpiradValueError

FORMATS = {"col_major": "csc", "row_major": "csr"}


def scipy_sparse():
    """`scipy.sparse`, imported when the first sparse matrix is made (spirad itself does not
    need scipy: `pip install spirad[linalg]`)."""
    try:
        import scipy.sparse
        import scipy.sparse.linalg  # noqa: F401 (the solvers)
    except ImportError as e:
        raise SpiradRuntimeError("sd.linalg's sparse matrices and solvers run on scipy, which is "
                                 "not installed: pip install scipy (or spirad[linalg])") from e
    return scipy.sparse


def value_dtype(dtype):
    """A sparse matrix's value type: f32 or f64 (Taichi's)."""
    from ..data.field import resolve_dtype
    dt, comp = resolve_dtype(dtype)
    if comp or dt not in (T.f32, T.f64):
        raise SpiradTypeError(f"sparse matrices hold f32 or f64 values, got {dtype}")
    return dt


def check_format(storage_format: str) -> str:
    if storage_format not in FORMATS:
        raise SpiradValueError(f"storage_format must be one of {sorted(FORMATS)}, got "
                               f"{storage_format!r}")
    return storage_format


class SparseMatrix:
    """An n x m sparse matrix of f32 / f64 values on the host (`scipy.sparse` underneath,
    `.matrix`). Made by `SparseMatrixBuilder.build()`, by `SparseMatrix(n, m)` then
    `build_from_ndarray`, or from operations on others."""

    def __init__(self, n=None, m=None, sm=None, dtype=None, storage_format="col_major"):
        self.storage_format = check_format(storage_format)
        if sm is None:
            if n is None:
                raise SpiradValueError("SparseMatrix(n, m): the number of rows is missing")
            self.dtype = value_dtype(T.f32 if dtype is None else dtype)
            sp = scipy_sparse()
            shape = (int(n), int(m) if m else int(n))
            self.matrix = getattr(sp, f"{FORMATS[self.storage_format]}_matrix")(
                shape, dtype=self.dtype.np)
        else:
            self.dtype = value_dtype(dtype) if dtype is not None else \
                (T.f64 if sm.dtype == np.float64 else T.f32)
            self.matrix = sm.asformat(FORMATS[self.storage_format]).astype(self.dtype.np)

    @classmethod
    def from_triplets(cls, n, m, rows, cols, values, dtype, storage_format="col_major"):
        """The n x m matrix with `values` at (`rows`, `cols`), duplicates summed."""
        sp = scipy_sparse()
        dt = value_dtype(dtype)
        coo = sp.coo_matrix((np.asarray(values, dt.np), (np.asarray(rows, np.int64),
                                                          np.asarray(cols, np.int64))),
                            shape=(int(n), int(m)))
        return cls(sm=coo, dtype=dt, storage_format=storage_format)

    def _wrap(self, sm):
        return SparseMatrix(sm=sm, dtype=self.dtype, storage_format=self.storage_format)

    # -- shape and elements --------------------------------------------------------------------
    @property
    def n(self) -> int:
        """The number of rows."""
        return self.matrix.shape[0]

    @property
    def m(self) -> int:
        """The number of columns."""
        return self.matrix.shape[1]

    @property
    def shape(self) -> tuple:
        """(rows, columns)."""
        return tuple(self.matrix.shape)

    def _index(self, indices):
        if not isinstance(indices, tuple) or len(indices) != 2:
            raise SpiradValueError(f"a sparse matrix is indexed A[row, col], got {indices!r}")
        i, j = (int(x) for x in indices)
        if not (0 <= i < self.n and 0 <= j < self.m):
            raise SpiradValueError(f"index [{i}, {j}] is outside the {self.n} x {self.m} matrix")
        return i, j

    def __getitem__(self, indices):
        """A[i, j]: the entry (0.0 where none is stored)."""
        i, j = self._index(indices)
        return float(self.matrix[i, j])

    def __setitem__(self, indices, value):
        """A[i, j] = v: set the entry (stored even where there was none)."""
        i, j = self._index(indices)
        m = self.matrix.tolil()  # a structural change: scipy's efficient path
        m[i, j] = value
        self.matrix = m.asformat(FORMATS[self.storage_format])

    # -- arithmetic ----------------------------------------------------------------------------
    def _same_shape(self, other, op):
        if not isinstance(other, SparseMatrix):
            raise SpiradTypeError(f"sparse matrix {op} {type(other).__name__}: both operands "
                                  f"must be SparseMatrix")
        if self.shape != other.shape:
            raise SpiradValueError(f"Dimension mismatch between sparse matrices {self.shape} "
                                   f"and {other.shape}")

    def __add__(self, other):
        self._same_shape(other, "+")
        return self._wrap(self.matrix + other.matrix)

    def __sub__(self, other):
        self._same_shape(other, "-")
        return self._wrap(self.matrix - other.matrix)

    def __iadd__(self, other):
        self._same_shape(other, "+=")
        self.matrix = (self.matrix + other.matrix).asformat(FORMATS[self.storage_format])
        return self

    def __isub__(self, other):
        self._same_shape(other, "-=")
        self.matrix = (self.matrix - other.matrix).asformat(FORMATS[self.storage_format])
        return self

    def __neg__(self):
        return self._wrap(-self.matrix)

    def __mul__(self, other):
        """A scalar multiple, or the elementwise (Hadamard) product with a SparseMatrix."""
        if isinstance(other, numbers.Number) and not isinstance(other, bool):
            return self._wrap(self.matrix * other)
        if isinstance(other, SparseMatrix):
            self._same_shape(other, "*")
            return self._wrap(self.matrix.multiply(other.matrix))
        return NotImplemented

    def __rmul__(self, other):
        if isinstance(other, numbers.Number) and not isinstance(other, bool):
            return self._wrap(other * self.matrix)
        return NotImplemented

    def transpose(self):
        """The transposed matrix."""
        return self._wrap(self.matrix.transpose())

    @property
    def T(self):  # noqa: N802 (numpy's name)
        """The transposed matrix (`transpose()`)."""
        return self.transpose()

    def __matmul__(self, other):
        """A @ B (a SparseMatrix), A @ x (an ndarray: an ndarray; a field, a numpy array: a
        numpy array), as Taichi returns them."""
        from ..data.field import Field
        from ..data.ndarray import Ndarray, ndarray
        if isinstance(other, SparseMatrix):
            if self.m != other.n:
                raise SpiradValueError(f"Dimension mismatch between sparse matrices "
                                       f"{self.shape} and {other.shape}")
            return self._wrap(self.matrix @ other.matrix)
        if isinstance(other, (Field, Ndarray, np.ndarray)):
            x = other.to_numpy() if isinstance(other, (Field, Ndarray)) else other
            if x.ndim != 1 or x.shape[0] != self.m:
                raise SpiradValueError(f"Dimension mismatch between sparse matrix {self.shape} "
                                       f"and vector {tuple(x.shape)}")
            y = self.matrix @ x.astype(self.dtype.np, copy=False)
            if isinstance(other, Ndarray):
                out = ndarray(other.dtype, self.n)
                out.from_numpy(y.astype(other.dtype.np))
                return out
            return y
        raise SpiradTypeError(f"sparse matrix @ {type(other).__name__}: supported are "
                              f"SparseMatrix, fields, ndarrays and numpy arrays")

    # -- building, printing, files -------------------------------------------------------------
    def build_from_ndarray(self, arr) -> None:
        """Fill the matrix from triplets stored in an ndarray: every 3 consecutive scalars are
        (row, column, value) (Taichi's `ti.Vector.ndarray(3, ...)` of triplets)."""
        from ..data.ndarray import Ndarray
        if not isinstance(arr, Ndarray):
            raise SpiradTypeError("SparseMatrix.build_from_ndarray takes an sd.ndarray "
                                  "(scalar, vector or matrix elements)")
        flat = arr.to_numpy().reshape(-1)
        n = int(reduce(lambda a, b: a * b, tuple(arr.shape) + tuple(arr.comp_shape), 1))
        if n % 3:
            raise SpiradValueError("The number of ndarray elements must have a length that is "
                                   "divisible by 3.")
        t = flat.reshape(-1, 3)
        rows, cols = t[:, 0].astype(np.int64), t[:, 1].astype(np.int64)
        bad = (rows < 0) | (rows >= self.n) | (cols < 0) | (cols >= self.m)
        if bad.any():
            k = int(np.argmax(bad))
            raise SpiradValueError(f"build_from_ndarray: triplet {k} is at [{rows[k]}, "
                                   f"{cols[k]}], outside the {self.n} x {self.m} matrix")
        self.matrix = SparseMatrix.from_triplets(self.n, self.m, rows, cols, t[:, 2], self.dtype,
                                                 self.storage_format).matrix

    def to_numpy(self) -> np.ndarray:
        """The dense matrix."""
        return self.matrix.toarray()

    def __str__(self):
        """Eigen's dense printout, as Taichi prints: 4 significant digits, columns aligned."""
        d = self.matrix.toarray().astype(np.float32)
        cells = [[_g4(float(v)) for v in row] for row in d]
        w = max((len(c) for row in cells for c in row), default=0)
        return "\n".join("[" + ", ".join(c.rjust(w) for c in row) + "]" for row in cells)

    __repr__ = __str__

    def mmwrite(self, filename) -> None:
        """Write the matrix to a Matrix Market file."""
        scipy_sparse()  # the clear error where scipy is missing
        import scipy.io
        scipy.io.mmwrite(filename, self.matrix)


def _g4(v: float) -> str:
    """A C++ stream's default float output at precision 4 (`%.4g`)."""
    return f"{v:.4g}"
