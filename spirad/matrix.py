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
        return self.shape[0]

    @property
    def m(self):
        return self.shape[1] if self.ndim == 2 else 1

    def to_numpy(self):
        return np.array(self)

    def to_list(self):
        return np.asarray(self).tolist()

    def dot(self, other):
        return np.asarray(self).dot(np.asarray(other)).item() if self.ndim == 1 else \
            np.asarray(self).dot(np.asarray(other)).view(MatrixValue)

    def cross(self, other):
        r = np.cross(np.asarray(self), np.asarray(other))
        return r.item() if np.ndim(r) == 0 else r.view(MatrixValue)

    def norm(self, eps=0):
        return float(np.sqrt(np.sum(np.asarray(self) ** 2) + eps))

    def norm_sqr(self):
        return float(np.sum(np.asarray(self) ** 2))

    def normalized(self, eps=0):
        return (self / self.norm(eps)).view(MatrixValue)

    def sum(self, *a, **k):  # noqa: A003
        return np.asarray(self).sum(*a, **k)

    def transpose(self, *axes):
        return np.asarray(self).transpose(*axes).view(MatrixValue)

    def determinant(self):
        return float(np.linalg.det(np.asarray(self, dtype=np.float64)))

    def inverse(self):
        return np.linalg.inv(np.asarray(self, dtype=np.float64)).view(MatrixValue)

    def trace(self):
        return np.trace(np.asarray(self)).item()

    def outer_product(self, other):
        return np.outer(np.asarray(self), np.asarray(other)).view(MatrixValue)


def matrix_value(data, dt=None) -> MatrixValue:
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


class Vector:
    def __new__(cls, data, dt=None):
        v = matrix_value(data, dt)
        if v.ndim != 1:
            raise SpiradTypeError(f"sd.Vector needs a flat list, got shape {v.shape}")
        return v

    @staticmethod
    def field(n, dtype, shape=None, needs_grad=False, name="", needs_dual=False) -> Field:
        return Field(VectorType(n, dtype), shape, needs_grad, name, needs_dual=needs_dual)

    @staticmethod
    def ndarray(n, dtype, shape, needs_grad=False, needs_dual=False) -> Ndarray:
        return Ndarray(VectorType(n, dtype), shape, needs_grad, needs_dual=needs_dual)

    @staticmethod
    def tensor(n, dtype, shape, **kwargs):
        """Quadrants' `qd.Vector.tensor(n, dtype, shape, backend=...)` (spirad.tensor)."""
        from .tensor import vector_tensor
        return vector_tensor(n, dtype, shape, **kwargs)

    @staticmethod
    def zero(dt, n):
        return matrix_value(np.zeros(n), dt)

    @staticmethod
    def one(dt, n):
        return matrix_value(np.ones(n), dt)

    @staticmethod
    def unit(n, i, dt=float):
        return matrix_value(np.eye(n)[i], dt)


class Matrix:
    def __new__(cls, data, dt=None):
        return matrix_value(data, dt)  # a flat list gives a vector, as in Taichi

    @staticmethod
    def field(n, m, dtype, shape=None, needs_grad=False, name="", needs_dual=False) -> Field:
        return Field(MatrixType(n, m, dtype), shape, needs_grad, name, needs_dual=needs_dual)

    @staticmethod
    def ndarray(n, m, dtype, shape, needs_grad=False, needs_dual=False) -> Ndarray:
        return Ndarray(MatrixType(n, m, dtype), shape, needs_grad, needs_dual=needs_dual)

    @staticmethod
    def tensor(n, m, dtype, shape, **kwargs):
        """Quadrants' `qd.Matrix.tensor(n, m, dtype, shape, backend=...)` (spirad.tensor)."""
        from .tensor import matrix_tensor
        return matrix_tensor(n, m, dtype, shape, **kwargs)

    @staticmethod
    def rows(rows):
        return matrix_value([list(np.asarray(r).reshape(-1)) for r in rows])

    @staticmethod
    def cols(cols):
        return matrix_value(np.array([list(np.asarray(c).reshape(-1)) for c in cols]).T)

    @staticmethod
    def identity(dt, n):
        return matrix_value(np.eye(n), dt)

    @staticmethod
    def zero(dt, n, m=None):
        return matrix_value(np.zeros((n, n if m is None else m)), dt)


_CompoundType._makers.update(value=matrix_value, field=Field, ndarray=Ndarray)
