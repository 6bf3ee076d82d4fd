"""Kernel argument annotations and compound element types (`sd.types.*`)."""
from __future__ import annotations

from dataclasses import dataclass

from kernel_ir.dtypes import (DType, f16, f32, f64, i8, i16, i32, i64, u1, u8, u16, u32,  # noqa: F401
                              u64)  # (ti.types.f32)


class _CompoundType:
    """Shared behaviour of vector / matrix types (`sd.types.vector(3, float)`, `sd.math.vec3`):
    calling one builds a value (`vec3(1, 2, 3)`, `vec3(0)`, `vec3(v2, 1)`; in kernels too), and
    `.field(shape=...)` / `.ndarray(shape=...)` create arrays of that element type. This module
    imports nothing of spirad: `spirad.data.matrix` installs the constructors (`_makers`)."""

    _makers: dict = {}  # 'value' / 'field' / 'ndarray' -> callable, set by spirad.data.matrix

    def flat_values(self, args) -> list:
        """The components `args` give (scalars, sequences or vectors are concatenated; a single
        scalar fills every component)."""
        import numpy as np
        flat = []
        for a in args:
            if isinstance(a, (list, tuple, np.ndarray)):
                flat.extend(np.asarray(a, dtype=object).reshape(-1).tolist())
            else:
                flat.append(a)
        size = self.n * (self.m if isinstance(self, MatrixType) else 1)
        if len(flat) == 1:
            flat = flat * size
        if len(flat) != size:
            from kernel_ir.errors import SpiradTypeError
            raise SpiradTypeError(f"{self} takes {size} components, got {len(flat)}")
        return flat

    def __call__(self, *args):
        import numpy as np
        data = np.array(self.flat_values(args), dtype=float).reshape(self.comp_shape)
        return self._makers["value"](data, self.dtype)

    def field(self, shape=None, needs_grad=False, name="", needs_dual=False):
        return self._makers["field"](self, shape, needs_grad, name, needs_dual=needs_dual)

    def ndarray(self, shape, needs_grad=False, needs_dual=False):
        return self._makers["ndarray"](self, shape, needs_grad, needs_dual=needs_dual)


@dataclass(frozen=True)
class VectorType(_CompoundType):
    """Element type of a vector field / ndarray: n components of `dtype`."""
    n: int
    dtype: DType

    @property
    def comp_shape(self) -> tuple:
        """The element shape, (n,)."""
        return (self.n,)


@dataclass(frozen=True)
class MatrixType(_CompoundType):
    """Element type of a matrix field / ndarray: `n` x `m` components of `dtype`
    (`sd.types.matrix(2, 2, float)`, `sd.math.mat3`)."""
    n: int
    m: int
    dtype: DType

    @property
    def comp_shape(self) -> tuple:
        """The element shape, (n, m)."""
        return (self.n, self.m)


@dataclass(frozen=True)
class NdarrayType:
    """`types.ndarray(dtype=None, ndim=None, needs_grad=None)`: any ndarray unless dtype / ndim
    pin it down; `needs_grad=True` / `False` requires an ndarray with / without a `.grad`."""
    dtype: object = None
    ndim: int | None = None
    needs_grad: bool | None = None
    element_dim: int | None = None  # Taichi's element_dim: numpy / torch arrays of a scalar
    #   dtype are read with their last 1 (vector) or 2 (matrix) axes as the element
    boundary: str = "unsafe"  # "clamp": every index clamped into the shape (Taichi's)


@dataclass(frozen=True)
class Template:
    """`template()`: the argument is bound at compile time (fields, Python values)."""


def ndarray(dtype=None, ndim=None, needs_grad=None, field_dim=None, element_dim=None,
            element_shape=None, layout=None, boundary=None) -> NdarrayType:
    """Taichi's older keywords are accepted: `field_dim` is `ndim`; `element_dim=1` / `2` (or
    `element_shape`) reads the last axes of a numpy / torch array of scalars as a vector /
    matrix element; `layout` is not checked. `boundary="clamp"` clamps every index of the
    ndarray into [0, shape - 1] per axis, reads and writes, as Taichi does (an index outside
    reads / writes the nearest edge element); "unsafe" (the default) does not."""
    if boundary not in (None, "unsafe", "clamp"):
        raise ValueError(f"ndarray(boundary={boundary!r}): use 'unsafe' or 'clamp'")
    if element_dim is None and element_shape is not None:
        element_dim = len(element_shape)
    if element_dim not in (None, 0, 1, 2):
        raise ValueError(f"ndarray(element_dim={element_dim}): use 0, 1 (vectors) or 2 (matrices)")
    return NdarrayType(dtype, ndim if ndim is not None else field_dim, needs_grad,
                       element_dim or None, boundary or "unsafe")


def is_signed(dt) -> bool:
    """`ti.types.is_signed(dt)`: a signed integer type (`dt` an integer type, as in Taichi)."""
    if dt.kind not in "iub":
        raise TypeError(f"is_signed takes an integer type, got {dt}")
    return dt.kind == "i"


def is_integral(dt) -> bool:
    """`ti.types.is_integral(dt)`: an integer type (u1 included)."""
    return dt.kind in "iub"


def is_real(dt) -> bool:
    """`ti.types.is_real(dt)`: a float type."""
    return dt.kind == "f"


def is_tensor(dt) -> bool:
    """`ti.types.is_tensor(dt)`: a vector / matrix type."""
    return isinstance(dt, (VectorType, MatrixType))


def template() -> Template:
    """The annotation of a parameter bound at compile time: fields, Python numbers, objects (a new
    value compiles a new program)."""
    return Template()


def vector(n: int, dtype=float, unpacked=False) -> VectorType:
    """The vector type of `n` components of `dtype` (an annotation, a field element type, a
    constructor); without a dtype (Quadrants) the default float type."""
    return VectorType(n, dtype)


def matrix(n: int, m: int, dtype=float) -> MatrixType:
    """The matrix type of `n` x `m` components of `dtype`."""
    return MatrixType(n, m, dtype)


def struct(**members):
    """`types.struct(a=float, v=vector(3, float))`: a struct type (`spirad.data.struct`)."""
    return _makers_struct[0](members)


_makers_struct = [None]  # set by spirad.data.struct (this module imports nothing of spirad)


def argpack(**members):
    """`types.argpack(a=sd.i32, arr=types.ndarray(...), s=S)`: an argument-pack type, a kernel
    parameter bundling values and ndarrays (`spirad.data.argpack`)."""
    return _makers_argpack[0](**members)


_makers_argpack = [None]  # set by spirad.data.argpack


def sparse_matrix_builder():
    """The annotation of a `sd.linalg.SparseMatrixBuilder` kernel parameter (Taichi's
    `ti.types.sparse_matrix_builder()`): `A[i, j] += v` in the kernel appends a triplet."""
    return _makers_sparse_builder[0]()


_makers_sparse_builder = [None]  # set by spirad.linalg.builder


class _PrimitiveTypes:
    """`types.primitive_types` (Quadrants): the scalar types by family."""
    real_types = (f16, f32, f64)
    integer_types = (i8, i16, i32, i64, u8, u16, u32, u64)
    all_types = (*real_types, *integer_types, u1)


primitive_types = _PrimitiveTypes()


@dataclass(frozen=True)
class _NDArrayAnnotation(NdarrayType):
    """`types.NDArray[dtype, ndim]` (Quadrants' subscript form of `types.ndarray(dtype, ndim)`);
    bare, `x: types.NDArray` is `types.ndarray()`: any ndarray, its dtype and ndim read at the
    launch (as in Quadrants)."""

    def __getitem__(self, key):
        dtype, ndim = key if isinstance(key, tuple) else (key, None)
        return NdarrayType(dtype, ndim, None)


NDArray = _NDArrayAnnotation()
Template = Template
