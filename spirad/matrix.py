"""`Vector` and `Matrix`: small, unrolled compound values.

Inside kernels `Vector([a, b, c])` / `Matrix([[...], ...])` build values the frontend unrolls into
scalars. From Python, the same calls give a `MatrixValue` (a small numpy array with Taichi's
vector / matrix methods: `dot`, `cross`, `norm`, `normalized`, `transpose`, `determinant`,
`inverse`, `to_numpy`, `.x/.y/.z/.w`); such a value captured by a kernel is a constant there.
`Vector.field(n, dtype, shape)` / `Matrix.field(n, m, dtype, shape)` and the `.ndarray` variants
create arrays whose elements are vectors or matrices.
"""
from __future__ import annotations

import numpy as np

from kernel_ir.errors import SpiradTypeError

from .field import Field
from .ndarray import Ndarray
from .tracebacks import api_class
from .types import MatrixType, VectorType, _CompoundType

_AXES = {"x": 0, "y": 1, "z": 2, "w": 3}


class MatrixValue(np.ndarray):
    """A Python-scope vector (1-d) or matrix (2-d): numpy arithmetic plus Taichi's methods."""

    def __getattr__(self, name):
        k = _AXES.get(name)
        if k is not None and self.ndim == 1 and k < self.shape[0]:
            return self[k].item()
        raise AttributeError(name)

    @property
    def n(self):
        """Number of rows (components of a vector)."""
        return self.shape[0]

    @property
    def m(self):
        """Number of columns (1 for a vector)."""
        return self.shape[1] if self.ndim == 2 else 1

    def to_numpy(self):
        """A plain numpy array copy."""
        return np.array(self)

    def to_list(self):
        """The values as (nested) Python lists."""
        return np.asarray(self).tolist()

    def dot(self, other):
        """Dot product with a vector (a float), or matrix product with a matrix."""
        return np.asarray(self).dot(np.asarray(other)).item() if self.ndim == 1 else \
            np.asarray(self).dot(np.asarray(other)).view(MatrixValue)

    def cross(self, other):
        """Cross product (3-vectors; a scalar for 2-vectors)."""
        r = np.cross(np.asarray(self), np.asarray(other))
        return r.item() if np.ndim(r) == 0 else r.view(MatrixValue)

    def norm(self, eps=0):
        """Euclidean norm, sqrt(sum of squares + eps)."""
        return float(np.sqrt(np.sum(np.asarray(self) ** 2) + eps))

    def norm_sqr(self):
        """Sum of squares."""
        return float(np.sum(np.asarray(self) ** 2))

    def normalized(self, eps=0):
        """The value divided by its norm (`eps` added under the root)."""
        return (self / self.norm(eps)).view(MatrixValue)

    def sum(self, *a, **k):  # noqa: A003
        """Sum of the components (numpy's `sum` arguments)."""
        return np.asarray(self).sum(*a, **k)

    def transpose(self, *axes):
        """The transposed matrix."""
        return np.asarray(self).transpose(*axes).view(MatrixValue)

    def determinant(self):
        """Determinant (float64)."""
        return float(np.linalg.det(np.asarray(self, dtype=np.float64)))

    def inverse(self):
        """Inverse matrix (float64)."""
        return np.linalg.inv(np.asarray(self, dtype=np.float64)).view(MatrixValue)

    def trace(self):
        """Sum of the diagonal."""
        return np.trace(np.asarray(self)).item()

    def outer_product(self, other):
        """Outer product with another vector: a matrix."""
        return np.outer(np.asarray(self), np.asarray(other)).view(MatrixValue)


def matrix_value(data, dt=None) -> MatrixValue:
    """A MatrixValue of `data` (1-d or 2-d numbers), converted to `dt` when given."""
    arr = np.array(data, dtype=None if dt is None else _np_dtype(dt))
    if arr.ndim not in (1, 2) or arr.dtype.kind not in "biuf":
        raise SpiradTypeError(f"sd.Vector / sd.Matrix values need a 1-d / 2-d list of numbers, "
                              f"got shape {arr.shape} of {arr.dtype}")
    if arr.dtype.kind == "b":
        arr = arr.astype(np.int64)
    return arr.view(MatrixValue)


def _np_dtype(dt):
    from .field import resolve_dtype
    return resolve_dtype(dt)[0].np


@api_class
class Vector:
    """`sd.Vector([a, b, c])`: a small vector value (unrolled in kernels; a MatrixValue in Python).
    `sd.Vector.field(n, dtype, shape)` makes a field of vectors."""
    def __new__(cls, data, dt=None):
        v = matrix_value(data, dt)
        if v.ndim != 1:
            raise SpiradTypeError(f"sd.Vector needs a flat list, got shape {v.shape}")
        return v

    @staticmethod
    def field(n, dtype, shape=None, needs_grad=False, name="", needs_dual=False) -> Field:
        """A field whose elements are `n`-vectors of `dtype` (as `sd.field`, plus the component
        count)."""
        return Field(VectorType(n, dtype), shape, needs_grad, name, needs_dual=needs_dual)

    @staticmethod
    def ndarray(n, dtype, shape, needs_grad=False, needs_dual=False) -> Ndarray:
        """An ndarray whose elements are `n`-vectors of `dtype`."""
        return Ndarray(VectorType(n, dtype), shape, needs_grad, needs_dual=needs_dual)

    @staticmethod
    def zero(dt, n):
        """The zero vector of `n` components of type `dt`."""
        return matrix_value(np.zeros(n), dt)

    @staticmethod
    def one(dt, n):
        """The vector of `n` ones of type `dt`."""
        return matrix_value(np.ones(n), dt)

    @staticmethod
    def unit(n, i, dt=float):
        """The `i`-th unit vector of `n` components."""
        return matrix_value(np.eye(n)[i], dt)


@api_class
class Matrix:
    """`sd.Matrix([[a, b], [c, d]])`: a small matrix value (unrolled in kernels; a MatrixValue in
    Python; a flat list gives a vector, as in Taichi). `sd.Matrix.field(n, m, dtype, shape)`
    makes a field of matrices."""
    def __new__(cls, data, dt=None):
        return matrix_value(data, dt)  # a flat list gives a vector, as in Taichi

    @staticmethod
    def field(n, m, dtype, shape=None, needs_grad=False, name="", needs_dual=False) -> Field:
        """A field whose elements are `n` x `m` matrices of `dtype`."""
        return Field(MatrixType(n, m, dtype), shape, needs_grad, name, needs_dual=needs_dual)

    @staticmethod
    def ndarray(n, m, dtype, shape, needs_grad=False, needs_dual=False) -> Ndarray:
        """An ndarray whose elements are `n` x `m` matrices of `dtype`."""
        return Ndarray(MatrixType(n, m, dtype), shape, needs_grad, needs_dual=needs_dual)

    @staticmethod
    def rows(rows):
        """The matrix with the given vectors as rows."""
        return matrix_value([list(np.asarray(r).reshape(-1)) for r in rows])

    @staticmethod
    def cols(cols):
        """The matrix with the given vectors as columns."""
        return matrix_value(np.array([list(np.asarray(c).reshape(-1)) for c in cols]).T)

    @staticmethod
    def identity(dt, n):
        """The `n` x `n` identity matrix of type `dt`."""
        return matrix_value(np.eye(n), dt)

    @staticmethod
    def zero(dt, n, m=None):
        """The zero matrix, `n` x `n` (or `n` x `m`), of type `dt`."""
        return matrix_value(np.zeros((n, n if m is None else m)), dt)


_CompoundType._makers.update(value=matrix_value, field=Field, ndarray=Ndarray)
