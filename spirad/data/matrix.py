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

from kernel_ir.errors import SpiradRuntimeError, SpiradSyntaxError, SpiradTypeError

from .field import HOST_ELEMENT, Field, placed_field
from .ndarray import Ndarray
from ..tracebacks import api_class
from ..types import MatrixType, VectorType, _CompoundType

_SWIZZLE_GROUPS = ("xyzw", "rgba", "stpq")  # Taichi's component names


def _soa(layout) -> bool:
    """Whether Taichi's `layout=` asks for components apart (`sd.Layout.SOA`); AOS or None:
    together."""
    from .tensor import Layout
    if layout is None or layout == Layout.AOS:
        return False
    if layout == Layout.SOA:
        return True
    raise SpiradTypeError(f"layout must be sd.Layout.AOS or sd.Layout.SOA, got {layout!r}")


def _swizzle(name: str):
    """The component indices a swizzle names (`x` -> (0,), `zyx` -> (2, 1, 0), `rg`), or None:
    1 to 4 letters of one group, as Taichi's."""
    if not 1 <= len(name) <= 4:
        return None
    for group in _SWIZZLE_GROUPS:
        if all(c in group for c in name):
            return tuple(group.index(c) for c in name)
    return None


def swizzle_range_error(n: int, name: str):
    """Taichi's text for a swizzle naming a component a `n`-vector lacks (`v.z` of a vec2:
    "vec2 only has attributes=('x', 'y'), got=('z',)"), or None when every component exists.
    Shared by Python scope (MatrixValue) and kernels (frontend.expr)."""
    ks = _swizzle(name)
    if ks is None or max(ks) < n:
        return None
    group = next(g for g in _SWIZZLE_GROUPS if all(c in g for c in name))
    return f"vec{n} only has attributes={tuple(sorted(group[:n]))}, got={tuple(name)}"


class MatrixValue(np.ndarray):
    """A Python-scope vector (1-d) or matrix (2-d): numpy arithmetic plus Taichi's methods,
    and a vector's swizzles (`v.x`, `v.zyx`, `v.rg`), read and written as in Taichi."""

    def __getattr__(self, name):
        ks = _swizzle(name) if self.ndim == 1 else None
        if ks is not None:
            bad = swizzle_range_error(self.shape[0], name)
            if bad:  # Taichi's TaichiSyntaxError and text
                raise SpiradSyntaxError(bad)
            return self[ks[0]].item() if len(ks) == 1 else \
                np.array(self[list(ks)]).view(MatrixValue)
        raise AttributeError(name)

    def __setattr__(self, name, value):
        ks = _swizzle(name) if self.ndim == 1 else None
        if ks is None:
            return super().__setattr__(name, value)
        bad = swizzle_range_error(self.shape[0], name)
        if bad:  # was a new Python attribute: the write was lost (#35)
            raise SpiradSyntaxError(bad)
        vals = [value] if len(ks) == 1 else list(np.asarray(value).reshape(-1))
        if len(vals) != len(ks):  # Taichi's TaichiRuntimeError and text
            raise SpiradRuntimeError(f"value len does not match the swizzle pattern={name}")
        for k, x in zip(ks, vals):  # one at a time, as Taichi (`v.yy = [1, 2]`: the last wins)
            self[k] = x

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

    @property
    def entries(self) -> np.ndarray:
        """Taichi's `m.entries`: the values as a plain numpy array (a view)."""
        return np.asarray(self)

    def to_list(self):
        """The values as (nested) Python lists."""
        return np.asarray(self).tolist()

    def dot(self, other):
        """Dot product with a vector (a float), or matrix product with a matrix."""
        return np.asarray(self).dot(np.asarray(other)).item() if self.ndim == 1 else \
            np.asarray(self).dot(np.asarray(other)).view(MatrixValue)

    def cross(self, other):
        """3-vectors: the cross product; 2-vectors: the scalar x0 y1 - x1 y0 (as in Taichi)."""
        a, b = np.asarray(self), np.asarray(other)
        if a.shape == b.shape == (2,):
            return (a[0] * b[1] - a[1] * b[0]).item()
        return np.cross(a, b).view(MatrixValue)

    def norm(self, eps=0):
        """sqrt(v . v + eps), as in Taichi."""
        return float(np.sqrt(np.sum(np.asarray(self) ** 2) + eps))

    def norm_inv(self, eps=0):
        """1 / norm(eps)."""
        return 1.0 / self.norm(eps)

    def norm_sqr(self):
        """Sum of squares."""
        return float(np.sum(np.asarray(self) ** 2))

    def normalized(self, eps=0):
        """v / (|v| + eps): Taichi adds eps outside the root here (unlike norm)."""
        return (self / (self.norm() + eps)).view(MatrixValue)

    def cast(self, dtype):
        """The values converted to `dtype`."""
        return np.asarray(self).astype(_np_dtype(dtype)).view(MatrixValue)

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
        """Sum of the diagonal (of a square matrix, as in Taichi)."""
        a = np.asarray(self)
        if a.ndim != 2 or a.shape[0] != a.shape[1]:
            raise SpiradTypeError(f"trace() expected a square matrix, got shape {a.shape}")
        return np.trace(a).item()

    def outer_product(self, other):
        """Outer product with another vector: a matrix."""
        return np.outer(np.asarray(self), np.asarray(other)).view(MatrixValue)

    # `p[i] == [a, b]` is a vector of bools, as in Taichi / Quadrants (and numpy); used as a
    # truth value (`assert p[i] == [a, b]`, `if u != v:`) it means what it does for Python
    # sequences: equal everywhere / different somewhere (numpy would raise; Taichi's and
    # Quadrants' Matrix is always true there, which would hide a failing assert)
    def __eq__(self, other):
        return _compared(np.ndarray.__eq__(self, other), _Equal)

    def __ne__(self, other):
        return _compared(np.ndarray.__ne__(self, other), _NotEqual)

    __hash__ = None


class _Equal(MatrixValue):
    """`u == v` of Python-scope vectors / matrices: true when every component is."""

    def __bool__(self):
        return bool(np.all(np.asarray(self)))


class _NotEqual(MatrixValue):
    """`u != v`: true when some component is."""

    def __bool__(self):
        return bool(np.any(np.asarray(self)))


def _compared(result, cls):
    return result.view(cls) if isinstance(result, np.ndarray) and result.ndim else result


class HostElement(MatrixValue):
    """`x[i]` of a vector / matrix field or ndarray read from Python: a copy of the element
    that writes through, so `x[i][c] = v`, `x[i][r, c] -= v` and `x[i].y = v` change the field
    (as Taichi's host accessors do). Results of arithmetic on it are plain values."""

    def __array_finalize__(self, obj):
        self._owner = None  # views and results do not write through

    def __setitem__(self, key, value):
        np.ndarray.__setitem__(self, key, value)
        owner = self.__dict__.get("_owner")
        if owner is not None:
            array, index = owner
            array[index] = np.asarray(self)


def host_element(array, index, value: np.ndarray) -> HostElement:
    e = np.array(value, copy=True).view(HostElement)
    e._owner = (array, index)
    return e


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


def _as_value(v):
    return v if isinstance(v, MatrixValue) else matrix_value(v)


def _class_level(name):
    """`sd.Vector.normalized(v, eps)` / `sd.Matrix.norm(m)`: Taichi's methods called through
    the class (in kernels the frontend maps these function objects to the same methods)."""
    def method(value, *args):
        return getattr(_as_value(value), name)(*args)
    method.__name__ = method.__qualname__ = name
    return staticmethod(method)


CLASS_LEVEL_METHODS = ("dot", "cross", "norm", "norm_sqr", "norm_inv", "normalized", "sum",
                       "transpose", "determinant", "inverse", "trace", "outer_product", "cast")


class _ValueType(type):
    """`isinstance(p[i], sd.Matrix)` / `isinstance(v, sd.Vector)`: Python-scope values are
    MatrixValues (numpy arrays), which the two classes claim as their instances, as Taichi's and
    Quadrants' Matrix / Vector are (every value is a Matrix; 1-d ones are Vectors)."""

    def __instancecheck__(cls, obj):
        if isinstance(obj, MatrixValue):
            return cls._value_ndim is None or obj.ndim == cls._value_ndim
        return type.__instancecheck__(cls, obj)


class _Methods(metaclass=_ValueType):
    """Base of Vector and Matrix: CLASS_LEVEL_METHODS as static functions."""
    _value_ndim = None


for _n in CLASS_LEVEL_METHODS:
    setattr(_Methods, _n, _class_level(_n))


@api_class
class Vector(_Methods):
    """`sd.Vector([a, b, c])`: a small vector value (unrolled in kernels; a MatrixValue in Python).
    `sd.Vector.field(n, dtype, shape)` makes a field of vectors."""
    _value_ndim = 1
    def __new__(cls, data, dt=None):
        v = matrix_value(data, dt)
        if v.ndim != 1:
            raise SpiradTypeError(f"sd.Vector needs a flat list, got shape {v.shape}")
        return v

    @staticmethod
    def field(n, dtype, shape=None, needs_grad=False, name="", needs_dual=False,
              offset=None, order=None, layout=None) -> Field:
        """A field whose elements are `n`-vectors of `dtype` (as `sd.field`, plus the component
        count; `offset` and `order` as there). `layout=sd.Layout.SOA` (Taichi's): each
        component stored apart (component-major); the default, AOS, keeps them together."""
        from .field import QUANT, is_quant_dtype
        if is_quant_dtype(dtype):  # components of a quantized type (spirad.data.quant)
            return QUANT.quant_vector_field(dtype, (n,), shape, needs_grad, name, needs_dual, offset)
        return placed_field(VectorType(n, dtype), shape, needs_grad, name, needs_dual, offset,
                            order, _soa(layout))

    @staticmethod
    def ndarray(n, dtype, shape, needs_grad=False, needs_dual=False) -> Ndarray:
        """An ndarray whose elements are `n`-vectors of `dtype`."""
        return Ndarray(VectorType(n, dtype), shape, needs_grad, needs_dual=needs_dual)

    @staticmethod
    def tensor(n, dtype, shape, **kwargs):
        """Quadrants' `qd.Vector.tensor(n, dtype, shape, backend=...)` (spirad.data.tensor)."""
        from .tensor import vector_tensor
        return vector_tensor(n, dtype, shape, **kwargs)

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
class Matrix(_Methods):
    """`sd.Matrix([[a, b], [c, d]])`: a small matrix value (unrolled in kernels; a MatrixValue in
    Python; a flat list gives a vector, as in Taichi). `sd.Matrix.field(n, m, dtype, shape)`
    makes a field of matrices."""
    def __new__(cls, data, dt=None):
        return matrix_value(data, dt)  # a flat list gives a vector, as in Taichi

    @staticmethod
    def diag(dim, val):
        """A dim x dim matrix with `val` on the diagonal (Taichi's Matrix.diag)."""
        return matrix_value(np.eye(int(dim)) * val)

    @staticmethod
    def field(n, m, dtype, shape=None, needs_grad=False, name="", needs_dual=False,
              offset=None, order=None, layout=None) -> Field:
        """A field whose elements are `n` x `m` matrices of `dtype` (`offset`, `order` as in
        `sd.field`; `layout` as in `Vector.field`)."""
        from .field import QUANT, is_quant_dtype
        if is_quant_dtype(dtype):  # components of a quantized type (spirad.data.quant)
            return QUANT.quant_vector_field(dtype, (n, m), shape, needs_grad, name, needs_dual, offset)
        return placed_field(MatrixType(n, m, dtype), shape, needs_grad, name, needs_dual, offset,
                            order, _soa(layout))

    @staticmethod
    def ndarray(n, m, dtype, shape, needs_grad=False, needs_dual=False) -> Ndarray:
        """An ndarray whose elements are `n` x `m` matrices of `dtype`."""
        return Ndarray(MatrixType(n, m, dtype), shape, needs_grad, needs_dual=needs_dual)

    @staticmethod
    def tensor(n, m, dtype, shape, **kwargs):
        """Quadrants' `qd.Matrix.tensor(n, m, dtype, shape, backend=...)` (spirad.data.tensor)."""
        from .tensor import matrix_tensor
        return matrix_tensor(n, m, dtype, shape, **kwargs)

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

    @staticmethod
    def one(dt, n, m=None):
        """The matrix of ones, `n` x `n` (or `n` x `m`), of type `dt`."""
        return matrix_value(np.ones((n, n if m is None else m)), dt)


_CompoundType._makers.update(value=matrix_value, field=Field, ndarray=Ndarray)
HOST_ELEMENT[0] = host_element
