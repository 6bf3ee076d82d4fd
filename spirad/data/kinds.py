"""Taichi's classes of fields and ndarrays by element kind: `ScalarField`, `MatrixField`,
`ScalarNdarray`, `VectorNdarray`, `MatrixNdarray`.

spirad has one `Field` and one `Ndarray` class for every element type (the element shape is
`comp_shape`); Taichi has a subclass per kind, and programs test them
(`isinstance(x, ti.MatrixField)`). These are those subclasses: an object is an instance of one
when it is a Field / Ndarray of that kind, as Taichi's would be (`sd.Vector.field(...)` is a
MatrixField, `sd.Vector.ndarray(...)` a VectorNdarray), and their methods are Field's /
Ndarray's. They are not constructed: `sd.field`, `sd.Vector.field`, `sd.ndarray` make them.
"""
from __future__ import annotations

from .field import Field
from .ndarray import Ndarray


class _Kind(type):
    """`isinstance(obj, cls)`: `obj` is an instance of the class's spirad base (Field or
    Ndarray) whose element shape has `cls._axes` axes (None: one or two)."""

    def __instancecheck__(cls, obj):
        base = cls.__mro__[1]
        if not isinstance(obj, base):
            return False
        n = len(getattr(obj, "comp_shape", ()))
        return n in (1, 2) if cls._axes is None else n == cls._axes

    def __call__(cls, *args, **kwargs):
        from kernel_ir.errors import SpiradTypeError
        raise SpiradTypeError(f"{cls.__name__} is not constructed: make it with "
                              f"{cls._made_by}")


class ScalarField(Field, metaclass=_Kind):
    """Taichi's `ti.ScalarField`: a field of scalars (`sd.field(dtype, shape)`)."""
    _axes, _made_by = 0, "sd.field(dtype, shape)"


class MatrixField(Field, metaclass=_Kind):
    """Taichi's `ti.MatrixField`: a field of vectors or matrices (`sd.Vector.field`,
    `sd.Matrix.field`, `sd.field(vec3, ...)`)."""
    _axes, _made_by = None, "sd.Vector.field / sd.Matrix.field"


class ScalarNdarray(Ndarray, metaclass=_Kind):
    """Taichi's `ti.ScalarNdarray`: an ndarray of scalars (`sd.ndarray(dtype, shape)`)."""
    _axes, _made_by = 0, "sd.ndarray(dtype, shape)"


class VectorNdarray(Ndarray, metaclass=_Kind):
    """Taichi's `ti.VectorNdarray`: an ndarray of vectors (`sd.Vector.ndarray`)."""
    _axes, _made_by = 1, "sd.Vector.ndarray(n, dtype, shape)"


class MatrixNdarray(Ndarray, metaclass=_Kind):
    """Taichi's `ti.MatrixNdarray`: an ndarray of matrices (`sd.Matrix.ndarray`)."""
    _axes, _made_by = 2, "sd.Matrix.ndarray(n, m, dtype, shape)"
