"""Kernel argument annotations and compound element types (`sd.types.*`)."""
from __future__ import annotations

import builtins
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


class Ref(Template):
    """`ref(dtype)`: a func parameter bound by reference (a template() parameter of that type)."""

    def __init__(self, dtype):
        self.dtype = dtype


def ref(dtype) -> Ref:
    """Taichi's `ti.ref(dtype)`: the annotation of a func / real_func parameter passed by
    reference: `a = v` or `a += v` in the func changes the caller's variable or element."""
    return Ref(dtype)


def vector(n: int = None, dtype=float, unpacked=False) -> VectorType:
    """The vector type of `n` components of `dtype` (an annotation, a field element type, a
    constructor); without a dtype (Quadrants) the default float type. `vector()` (Taichi's), as
    an ndarray annotation's dtype only: vectors of any size and type (one program each)."""
    return VectorType(None, None) if n is None else VectorType(n, dtype)


def matrix(n: int = None, m: int = None, dtype=float) -> MatrixType:
    """The matrix type of `n` x `m` components of `dtype`; `matrix()`, as an ndarray
    annotation's dtype only: matrices of any shape and type (one program each)."""
    return MatrixType(None, None, None) if n is None and m is None else MatrixType(n, m, dtype)


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



# -- quantized types (Taichi's `ti.types.quant`; bit-packed fields: spirad.data.quant) ------
@dataclass(frozen=True)
class QuantInt:
    """`quant.int(bits, signed, compute)`: a `bits`-wide integer read as `compute`."""
    bits: int
    signed: bool
    compute: object = None  # a DType; None: the default, fixed when a field is created

    @property
    def width(self) -> int:
        """Bits the value takes in its word."""
        return self.bits


@dataclass(frozen=True)
class QuantFixed:
    """`quant.fixed(bits, signed, max_value | scale, compute)`: `digits * scale` with `bits`-wide
    integer digits, read as `compute` (a float type)."""
    bits: int
    signed: bool
    scale: float
    compute: object = None  # a DType; None: the default, fixed when a field is created

    @property
    def width(self) -> int:
        """Bits the value takes in its word."""
        return self.bits


@dataclass(frozen=True)
class QuantFloat:
    """`quant.float(exp, frac, signed, compute)`: an `exp`-bit exponent and `frac` digit bits (one
    of them the sign when signed); f32 compute only (as Taichi)."""
    exp: int
    frac: int
    signed: bool
    compute: object = None  # a DType; None: the default, fixed when a field is created

    @property
    def width(self) -> int:
        """Bits of the digits field (the exponent field is apart: it may be shared)."""
        return self.frac

    @property
    def digit_bits(self) -> int:
        """Significand bits below the leading one (the sign takes one of `frac` when signed)."""
        return self.frac - int(self.signed)

    @property
    def exponent_offset(self) -> int:
        """f32's exponent bias minus this type's (Taichi's get_exponent_conversion_offset)."""
        return 127 - (1 << (self.exp - 1)) + 1


QUANT_TYPES = (QuantInt, QuantFixed, QuantFloat)


def _bad(msg):
    from kernel_ir.errors import SpiradValueError
    raise SpiradValueError(msg)


class _QuantNamespace:
    """`sd.types.quant` (Taichi's `ti.types.quant`): quantized types for bit-packed fields
    (`sd.BitpackedFields`, `root.quant_array`)."""

    @staticmethod
    def int(bits, signed=True, compute=None) -> QuantInt:  # noqa: A003 - Taichi's name
        """A `bits`-wide integer (1..32), `signed` or not, read as `compute` (default: i32 /
        u32)."""
        if not isinstance(bits, builtins.int) or not 1 <= bits <= 32:
            _bad(f"quant.int: bits must be an int in [1, 32], got {bits!r}")
        return QuantInt(bits, bool(signed), compute)

    @staticmethod
    def fixed(bits, signed=True, max_value=1.0, compute=None, scale=None) -> QuantFixed:
        """A fixed-point real: `bits`-wide integer digits times `scale` (default: `max_value` over
        2**(bits-1) when signed, 2**bits when not), read as `compute` (default f32)."""
        if not isinstance(bits, builtins.int) or not 1 <= bits <= 32:
            _bad(f"quant.fixed: bits must be an int in [1, 32], got {bits!r}")
        if scale is None:
            scale = max_value / 2 ** (bits - 1) if signed else max_value / 2 ** bits
        if compute is not None and not (isinstance(compute, DType) and compute.is_float):
            _bad(f"quant.fixed: compute must be a float type, got {compute}")
        return QuantFixed(bits, bool(signed), float(scale), compute)

    @staticmethod
    def float(exp, frac, signed=True, compute=None) -> QuantFloat:  # noqa: A003
        """A float with an `exp`-bit exponent (1..8) and `frac` digit bits (the sign among them
        when `signed`; at most 23 digits), computed in f32."""
        if not isinstance(exp, builtins.int) or not 1 <= exp <= 8:
            _bad(f"quant.float: exp must be an int in [1, 8], got {exp!r}")
        if not isinstance(frac, builtins.int) or not 1 <= frac - int(bool(signed)) <= 23:
            _bad(f"quant.float: frac must leave 1..23 digit bits (the sign takes one when "
                 f"signed), got frac={frac!r}, signed={signed}")
        if compute not in (None, f32):
            _bad(f"quant.float: compute must be f32 (as Taichi), got {compute}")
        return QuantFloat(exp, frac, bool(signed), f32)


quant = _QuantNamespace()


def texture(num_dimensions: int):
    """The annotation of a sampled texture parameter (Taichi's `ti.types.texture`):
    `tex.fetch(index, lod)`, `tex.sample_lod(uv, lod)` in the kernel (`spirad.texture`)."""
    return _makers_texture[0](num_dimensions)


def rw_texture(num_dimensions: int, fmt=None, lod: int = 0):
    """The annotation of a storage texture parameter (Taichi's `ti.types.rw_texture`):
    `tex.load(index)`, `tex.store(index, value)`, `for i, j in tex` (`spirad.texture`)."""
    return _makers_texture[1](num_dimensions, fmt, lod)


_makers_texture = [None, None]  # set by spirad.texture
