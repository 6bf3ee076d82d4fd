"""`sd.linalg.SparseMatrixBuilder`: kernels append (row, column, value) triplets, the host builds
a `SparseMatrix` from them (Taichi's `ti.linalg.SparseMatrixBuilder`).

    K = sd.linalg.SparseMatrixBuilder(n, n, max_num_triplets=4 * n)

    @sd.kernel
    def fill(A: sd.types.sparse_matrix_builder()):
        for i in range(n):
            A[i, i] += 2.0
            A[i, (i + 1) % n] -= 1.0

    fill(K)
    M = K.build()          # duplicates summed; the builder is empty again

Why a triplet buffer and an atomic counter: `A[i, j] += v` may run in any thread of a parallel
loop on any arch; one `atomic_add` on the counter hands each insertion its own slot, so the
buffer is plain ndarrays (`rows`, `cols`, `values`, `count`) and the builder works wherever
ndarrays and integer atomics do (every arch). The builder is a dataclass, so a kernel parameter
annotated with it is flattened like any dataclass argument (`spirad.data.struct_args`): its ndarrays
are run-time arguments, its sizes compile-time constants. The frontend recognises
`A[i, j] += v` / `-= v` on such a parameter (`TripletTarget`, registered in the frontend's
`APPEND_TARGETS`: the frontend does not import `sd.linalg`) and inlines `insert_triplet`.

An insertion past `max_num_triplets` writes nothing (the counter still counts it); `build()` then
raises, naming both numbers, instead of building a matrix that silently lacks entries (Taichi
writes past its buffer).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradRuntimeError, SpiradValueError

from .. import types as _types
from ..frontend.namespace_hooks import APPEND_TARGETS, AppendTarget
from ..func import func
from ..lang import atomic_add, static
from ..data.ndarray import Ndarray, ndarray
from ..types import template
from .sparse_matrix import SparseMatrix, check_format, value_dtype


@dataclasses.dataclass(init=False, eq=False, repr=False)
class SparseMatrixBuilder:
    """A buffer of (row, column, value) triplets that kernels fill (`A[i, j] += v`, annotation
    `sd.types.sparse_matrix_builder()`) and `build()` turns into a `SparseMatrix`; entries at
    the same (row, column) add up."""

    num_rows: int
    num_cols: int
    max_num_triplets: int
    dtype: object
    storage_format: str
    rows: Ndarray
    cols: Ndarray
    values: Ndarray
    count: Ndarray

    def __init__(self, num_rows=None, num_cols=None, max_num_triplets=0, dtype=T.f32,
                 storage_format="col_major"):
        if num_rows is None or int(num_rows) < 0:
            raise SpiradValueError(f"SparseMatrixBuilder needs num_rows >= 0, got {num_rows!r}")
        self.num_rows = int(num_rows)
        self.num_cols = int(num_cols) if num_cols else self.num_rows
        if int(max_num_triplets) < 0:
            raise SpiradValueError(f"max_num_triplets must be >= 0, got {max_num_triplets}")
        self.max_num_triplets = int(max_num_triplets)
        self.dtype = value_dtype(dtype)
        self.storage_format = check_format(storage_format)
        cap = max(1, self.max_num_triplets)  # a zero-length ndarray is refused; never written
        self.rows = ndarray(T.i32, cap)
        self.cols = ndarray(T.i32, cap)
        self.values = ndarray(self.dtype, cap)
        self.count = ndarray(T.i32, 1)
        self.count.fill(0)

    @property
    def num_triplets(self) -> int:
        """Triplets inserted since the last `build()` / `clear()` (may exceed the maximum)."""
        return int(self.count.to_numpy()[0])

    def _triplets(self):
        """(rows, cols, values) as numpy arrays; raises when kernels inserted too many."""
        k = self.num_triplets
        if k > self.max_num_triplets:
            raise SpiradRuntimeError(
                f"SparseMatrixBuilder: kernels inserted {k} triplets but max_num_triplets is "
                f"{self.max_num_triplets}; the entries past it were not stored. Create the "
                f"builder with max_num_triplets >= {k}")
        return (self.rows.to_numpy()[:k], self.cols.to_numpy()[:k],
                self.values.to_numpy()[:k])

    def print_triplets(self) -> None:
        """Print the stored triplets, Taichi's format (`n=.., m=.., num_triplets=.. (max=..)`,
        then one `[row, col] = value` line each)."""
        k = self.num_triplets
        print(f"n={self.num_rows}, m={self.num_cols}, num_triplets={k} "
              f"(max={self.max_num_triplets})")
        r, c, v = self._triplets()
        for a, b, x in zip(r, c, v):
            print(f"[{a}, {b}] = {_shortest(x)}")

    def clear(self) -> None:
        """Forget the stored triplets."""
        self.count.fill(0)

    def build(self, dtype=None, _format="CSR") -> SparseMatrix:
        """The sparse matrix of the stored triplets (entries at one position summed); empties
        the builder, as Taichi's does. `dtype` is accepted for Taichi's signature: the matrix
        has the builder's dtype."""
        r, c, v = self._triplets()
        bad = (r < 0) | (r >= self.num_rows) | (c < 0) | (c >= self.num_cols)
        if bad.any():
            k = int(np.argmax(bad))
            raise SpiradValueError(f"SparseMatrixBuilder: a kernel inserted [{r[k]}, {c[k]}], "
                                   f"outside the {self.num_rows} x {self.num_cols} matrix")
        m = SparseMatrix.from_triplets(self.num_rows, self.num_cols, r, c, v, self.dtype,
                                       self.storage_format)
        self.clear()
        return m

    def __repr__(self):
        return (f"SparseMatrixBuilder({self.num_rows}, {self.num_cols}, max_num_triplets="
                f"{self.max_num_triplets}, dtype={self.dtype})")


def _shortest(x) -> str:
    """A value as fmt prints it: the shortest text that reads back, no trailing `.0`."""
    t = str(x)  # numpy scalars print the shortest round-trip text of their own precision
    return t[:-2] if t.endswith(".0") else t


def sparse_matrix_builder():
    """The kernel annotation of a `SparseMatrixBuilder` parameter (Taichi's
    `ti.types.sparse_matrix_builder()`)."""
    return SparseMatrixBuilder


_types._makers_sparse_builder[0] = sparse_matrix_builder


@func
def insert_triplet(rows, cols, values, count, cap: template(), negate: template(), i, j, v):
    """One `A[i, j] += v` (or `-= v` with `negate`): claim a slot, store the triplet there if it
    fits (`cap` and `negate` are compile-time values)."""
    k = atomic_add(count[0], 1)
    if k < cap:
        rows[k] = i
        cols[k] = j
        if static(negate):
            values[k] = -v
        else:
            values[k] = v


@dataclasses.dataclass(frozen=True)
class TripletTarget(AppendTarget):
    """`A[i, j]` of a builder parameter inside a kernel: only `+=` and `-=` apply to it."""
    view: object  # the parameter's StructView
    index: tuple
    what = "a sparse matrix builder"

    def insert(self, visitor, value, negate: bool, node):
        """Emit the insertion through the frontend `visitor` (inlines `insert_triplet`)."""
        v = self.view
        if len(self.index) != 2:
            raise visitor.ctx.error(SpiradValueError, f"a sparse matrix builder is indexed "
                                    f"[row, col], got {len(self.index)} index(es)", node)
        visitor.inline_func(insert_triplet, [v.rows, v.cols, v.values, v.count,
                                             v.max_num_triplets, negate, *self.index, value],
                            {}, node)


APPEND_TARGETS[SparseMatrixBuilder] = TripletTarget
