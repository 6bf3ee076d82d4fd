"""IR dtypes as LLVM types: the register type of a value and the type it has in memory.

Lanes: inside `lanes(W)` (the SPMD lowering, `llvm_codegen.spmd`, around a varying node) the
register type of a dtype is `<W x T>`, constants are splats and intrinsic suffixes are vector
ones, so the scalar lowering rules emit lane-wise code unchanged. Memory types stay scalar.
"""
from __future__ import annotations

import contextlib
import threading

from llvmlite import ir

from kernel_ir.dtypes import DType

from .splat import splat

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()

_REG = {"f32": F32, "f64": F64, "i32": I32, "i64": I64, "u32": I32, "u64": I64, "u1": I1}
_MEM = {**_REG, "u1": I32}  # bools live in memory as 4-byte 0/1


_STATE = threading.local()


def current_lanes() -> int:
    return getattr(_STATE, "lanes", 1)


@contextlib.contextmanager
def lanes(w: int):
    """Register types are `<w x T>` inside (w == 1: scalars)."""
    old = current_lanes()
    _STATE.lanes = w
    try:
        yield
    finally:
        _STATE.lanes = old


def scalar_reg_type(dt: DType) -> ir.Type:
    return _REG[dt.name]


def reg_type(dt: DType) -> ir.Type:
    w = current_lanes()
    return _REG[dt.name] if w == 1 else ir.VectorType(_REG[dt.name], w)


def mem_type(dt: DType) -> ir.Type:
    return _MEM[dt.name]


def const(dt: DType, v) -> ir.Constant:
    """An LLVM constant of `dt` holding python value `v` (ints wrap to the width); a splat
    inside `lanes(W)`."""
    if dt.is_float:
        c = ir.Constant(scalar_reg_type(dt), float(v))
    elif dt.is_bool:
        c = ir.Constant(I1, 1 if v else 0)
    else:
        c = ir.Constant(scalar_reg_type(dt), int(v) & ((1 << dt.bits) - 1))
    w = current_lanes()
    return splat(c, w)


def suffix(dt: DType) -> str:
    """Overload suffix of an LLVM intrinsic for `dt` (`llvm.sin.f32`, `llvm.smax.i64`,
    `llvm.sin.v16f32` inside `lanes(16)`)."""
    s = dt.name if dt.is_float else f"i{scalar_reg_type(dt).width}"
    w = current_lanes()
    return s if w == 1 else f"v{w}{s}"
