"""`sd.linalg` (Taichi's `ti.linalg`): sparse matrices built in kernels and solved on the host
(scipy), matrix-free Krylov solvers written in the kernel language, and the dense in-kernel
`solve` (also `sd.solve`). docs/coming_from_taichi.md (linalg) says what runs where."""
from __future__ import annotations

from .builder import SparseMatrixBuilder, sparse_matrix_builder
from .dense import solve
from .matrixfree import LinearOperator, MatrixFreeBICGSTAB, MatrixFreeCG
from .solvers import SparseCG, SparseSolver
from .sparse_matrix import SparseMatrix

__all__ = ["LinearOperator", "MatrixFreeBICGSTAB", "MatrixFreeCG", "SparseCG", "SparseMatrix",
           "SparseMatrixBuilder", "SparseSolver", "solve", "sparse_matrix_builder"]
