"""`Vector` and `Matrix`: small, unrolled compound values.

Inside kernels `Vector([a, b, c])` / `Matrix([[...], ...])` build values the frontend unrolls into
scalars. From Python, `Vector.field(n, dtype, shape)` / `Matrix.field(n, m, dtype, shape)` and the
`.ndarray` variants create arrays whose elements are vectors or matrices.
"""
from __future__ import annotations

from .field import Field
from .ndarray import Ndarray
from .types import MatrixType, VectorType


class Vector:
    def __init__(self, *a, **k):
        from kernel_ir.errors import SpiradSyntaxError
        raise SpiradSyntaxError("sd.Vector(...) values exist only inside kernels and funcs")

    @staticmethod
    def field(n, dtype, shape=None, needs_grad=False, name="", needs_dual=False) -> Field:
        return Field(VectorType(n, dtype), shape, needs_grad, name, needs_dual=needs_dual)

    @staticmethod
    def ndarray(n, dtype, shape, needs_grad=False, needs_dual=False) -> Ndarray:
        return Ndarray(VectorType(n, dtype), shape, needs_grad, needs_dual=needs_dual)


class Matrix:
    def __init__(self, *a, **k):
        from kernel_ir.errors import SpiradSyntaxError
        raise SpiradSyntaxError("sd.Matrix(...) values exist only inside kernels and funcs")

    @staticmethod
    def field(n, m, dtype, shape=None, needs_grad=False, name="", needs_dual=False) -> Field:
        return Field(MatrixType(n, m, dtype), shape, needs_grad, name, needs_dual=needs_dual)

    @staticmethod
    def ndarray(n, m, dtype, shape, needs_grad=False, needs_dual=False) -> Ndarray:
        return Ndarray(MatrixType(n, m, dtype), shape, needs_grad, needs_dual=needs_dual)
