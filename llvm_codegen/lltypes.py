"""IR dtypes as LLVM types: the register type of a value and the type it has in memory.

Lanes are a parameter (engineering 17): `reg_type(dt, w)` is `<w x T>` for w > 1, `const(dt, v, w)` a
splat, `suffix(dt, w)` the vector suffix. A lowering rule passes its context's width
(`FnContext.lanes`: 1, or the SPMD task's W while `llvm_codegen.spmd` lowers a varying node), so
the scalar rules emit lane-wise code unchanged. Memory types stay scalar.
"""
from __future__ import annotations

from llvmlite import ir

from kernel_ir.dtypes import DType

from .splat import splat

I1, I8, I16 = ir.IntType(1), ir.IntType(8), ir.IntType(16)
I32, I64 = ir.IntType(32), ir.IntType(64)
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()

_REG = {"f32": F32, "f64": F64, "i32": I32, "i64": I64, "u32": I32, "u64": I64, "u1": I1,
        "f16": F16, "i8": I8, "u8": I8, "i16": I16, "u16": I16}
_MEM = {**_REG, "u1": I32}  # bools live in memory as 4-byte 0/1


def scalar_reg_type(dt: DType) -> ir.Type:
    return _REG[dt.name]


def reg_type(dt: DType, w: int = 1) -> ir.Type:
    return _REG[dt.name] if w == 1 else ir.VectorType(_REG[dt.name], w)


def mem_type(dt: DType) -> ir.Type:
    return _MEM[dt.name]


def const(dt: DType, v, w: int = 1) -> ir.Constant:
    """An LLVM constant of `dt` holding python value `v` (ints wrap to the width); a splat of
    `w` lanes for w > 1."""
    if dt.is_float:
        c = ir.Constant(scalar_reg_type(dt), float(v))
    elif dt.is_bool:
        c = ir.Constant(I1, 1 if v else 0)
    else:
        c = ir.Constant(scalar_reg_type(dt), int(v) & ((1 << dt.bits) - 1))
    return splat(c, w)


def suffix(dt: DType, w: int = 1) -> str:
    """Overload suffix of an LLVM intrinsic for `dt` (`llvm.sin.f32`, `llvm.smax.i64`,
    `llvm.sin.v16f32` for w = 16)."""
    s = dt.name if dt.is_float else f"i{scalar_reg_type(dt).width}"
    return s if w == 1 else f"v{w}{s}"


def elem_info(t: ir.Type) -> tuple:
    """(intrinsic suffix, alignment in bytes) of a scalar memory type (`llvm.masked.load.v8f32`)."""
    if isinstance(t, ir.HalfType):
        return "f16", 2
    if isinstance(t, ir.FloatType):
        return "f32", 4
    if isinstance(t, ir.DoubleType):
        return "f64", 8
    return f"i{t.width}", t.width // 8
