"""Kernel argument annotations and compound element types (`sd.types.*`)."""
from __future__ import annotations

from dataclasses import dataclass

from kernel_ir.dtypes import DType


@dataclass(frozen=True)
class VectorType:
    """Element type of a vector field / ndarray: n components of `dtype`."""
    n: int
    dtype: DType

    @property
    def comp_shape(self) -> tuple:
        return (self.n,)


@dataclass(frozen=True)
class MatrixType:
    n: int
    m: int
    dtype: DType

    @property
    def comp_shape(self) -> tuple:
        return (self.n, self.m)


@dataclass(frozen=True)
class NdarrayType:
    """`types.ndarray(dtype=None, ndim=None, needs_grad=None)`: any ndarray unless dtype / ndim
    pin it down; `needs_grad=True` / `False` requires an ndarray with / without a `.grad`."""
    dtype: object = None
    ndim: int | None = None
    needs_grad: bool | None = None


@dataclass(frozen=True)
class Template:
    """`template()`: the argument is bound at compile time (fields, Python values)."""


def ndarray(dtype=None, ndim=None, needs_grad=None) -> NdarrayType:
    return NdarrayType(dtype, ndim, needs_grad)


def template() -> Template:
    return Template()


def vector(n: int, dtype) -> VectorType:
    return VectorType(n, dtype)


def matrix(n: int, m: int, dtype) -> MatrixType:
    return MatrixType(n, m, dtype)
