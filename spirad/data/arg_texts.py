"""What an ndarray parameter's annotation does not take in the array passed for it, in Taichi's
words and error classes (issue #36): `Invalid value for argument a - required ...` as a
SpiradArgumentValueError (a TypeError and a ValueError, as Taichi's ValueError), and a scalar
element type that differs as Taichi's TypeError `Expect element type ... but get ...`. Shared by
spirad ndarrays (`spirad.kernel`) and numpy / torch arrays (`spirad.interop.arrays`); each text
ends with spirad's hint."""
from __future__ import annotations

from kernel_ir.errors import SpiradArgumentValueError, SpiradTypeError

_HINT = "; convert it or change the annotation"


def _spirad(name, want, want_comp, dtype, comp) -> str:
    return (f": argument '{name}' must have dtype {annotation_text(want, want_comp)}, got "
            f"{annotation_text(dtype, comp)}{_HINT}")


def annotation_text(dtype, comp) -> str:
    """Taichi's text of an element type: `VectorType[2, i32]`, `MatrixType[2,3, f32]`, `i32`."""
    if len(comp) == 1:
        return f"VectorType[{comp[0]}, {dtype}]"
    if len(comp) == 2:
        return f"MatrixType[{comp[0]},{comp[1]}, {dtype}]"
    return str(dtype)


def element_text(dtype, comp) -> str:
    """Taichi's text of an ndarray's element type: `[Tensor (3) i32]`, `[Tensor (2, 2) f32]`,
    `i32`."""
    if not comp:
        return str(dtype)
    return f"[Tensor ({', '.join(str(c) for c in comp)}) {dtype}]"


def ndarray_mismatch(name: str, ann, dtype, comp, shape, foreign: bool = False):
    """The error for ndarray `(dtype, comp, shape)` passed to parameter `name` annotated `ann`
    (an NdarrayType), or None when it fits; checked in Taichi's order (element type, then ndim).
    `foreign`: a numpy array's / torch tensor's alias, whose vector / matrix elements keep the
    array's scalar type (Taichi checks their shape only)."""
    if getattr(ann.dtype, "n", 0) is None:  # `types.vector()` / `types.matrix()`: any size
        kind = "VectorType" if len(ann.dtype.comp_shape) == 1 else "MatrixType"
        if len(comp) != len(ann.dtype.comp_shape):
            return SpiradArgumentValueError(
                f"Invalid value for argument {name} - required element type: {kind}, but "
                f"{annotation_text(dtype, comp)} is provided")
    elif ann.dtype is not None:
        from .field import resolve_dtype
        want, want_comp = resolve_dtype(ann.dtype)
        if want_comp and (want if not foreign else dtype, tuple(want_comp)) != \
                (dtype, tuple(comp)):
            return SpiradArgumentValueError(
                f"Invalid value for argument {name} - required element type: "
                f"{annotation_text(want, want_comp)}, but {annotation_text(dtype, comp)} is "
                f"provided{_spirad(name, want, want_comp, dtype, comp)}")
        if not want_comp and (want != dtype or comp):
            return SpiradTypeError(f"Expect element type {want} for argument {name}, but get "
                                   f"{element_text(dtype, comp)}"
                                   f"{_spirad(name, want, want_comp, dtype, comp)}")
    if ann.ndim is not None and ann.ndim != len(shape):
        return SpiradArgumentValueError(
            f"Invalid value for argument {name} - required ndim={ann.ndim}, but {len(shape)}d "
            f"ndarray with shape {tuple(shape)} is provided: argument '{name}' must have "
            f"{ann.ndim} dimension(s), got {len(shape)}")
    return None


def external_mismatch(what: str, name: str, arr, want, want_comp, ndim):
    """The error for host array `arr` (numpy / torch, as numpy) passed to parameter `name`
    annotated with element type `want` / `want_comp` (None: any) and `ndim` (None: any), or None
    when it fits; Taichi's order: dimensions, element shape, then the scalar type. `what` names
    the argument in spirad's hint."""
    k = len(want_comp or ())
    if k and ndim is not None and arr.ndim != ndim + k:
        return SpiradArgumentValueError(
            f"Invalid value for argument {name} - required array has ndim={ndim} element_dim={k}, "
            f"array with {arr.ndim} dimensions is provided ({what} has shape {arr.shape})")
    if k and arr.ndim < k:
        return SpiradArgumentValueError(
            f"Invalid value for argument {name} - required element_dim={k}, array with "
            f"{arr.ndim} dimensions is provided ({what} has shape {arr.shape})")
    if k and tuple(arr.shape[arr.ndim - k:]) != tuple(want_comp):
        return SpiradArgumentValueError(
            f"Invalid value for argument {name} - required element_shape={tuple(want_comp)}, "
            f"array with element shape of {tuple(arr.shape[arr.ndim - k:])} is provided "
            f"({what} has shape {arr.shape})")
    return None
