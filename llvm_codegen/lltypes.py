"""IR dtypes as LLVM types: the register type of a value and the type it has in memory."""
from __future__ import annotations

from llvmlite import ir

from kernel_ir.dtypes import DType

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()

_REG = {"f32": F32, "f64": F64, "i32": I32, "i64": I64, "u32": I32, "u1": I1}
_MEM = {**_REG, "u1": I32}  # bools live in memory as 4-byte 0/1


def reg_type(dt: DType) -> ir.Type:
    return _REG[dt.name]


def mem_type(dt: DType) -> ir.Type:
    return _MEM[dt.name]


def const(dt: DType, v) -> ir.Constant:
    """An LLVM constant of `dt` holding python value `v` (ints wrap to the width)."""
    if dt.is_float:
        return ir.Constant(reg_type(dt), float(v))
    if dt.is_bool:
        return ir.Constant(I1, 1 if v else 0)
    return ir.Constant(reg_type(dt), int(v) & ((1 << dt.bits) - 1))


def suffix(dt: DType) -> str:
    """Overload suffix of an LLVM intrinsic for `dt` (`llvm.sin.f32`, `llvm.smax.i64`)."""
    return dt.name if dt.is_float else f"i{reg_type(dt).width}"
