"""Type rules of the kernel language, kept apart from the AST visitor (as in Triton).

* Python literals are *weak*: an int literal takes the other operand's type when that is numeric;
  a float literal takes the other operand's float type, or `default_fp` against an int. Next to
  a type narrower than the default (the 8- and 16-bit types) a literal takes the default, as all
  literals do in Taichi: `u8 + 1` is an i32, `f16 * 0.5` an f32 (what Taichi computes).
  Alone, int literals are `default_ip` and float literals `default_fp` (Taichi's rule).
* Between two typed values: a float beats an int; among floats or among ints the wider wins; at
  equal width, signed vs unsigned gives unsigned (C's rule); u1 promotes to the other type.
* `/` always produces a float (the promoted float type, or `default_fp` for two ints); `//`, `%`
  keep the promoted type; comparisons give u1; bit ops need ints or bools.
"""
from __future__ import annotations

from kernel_ir import dtypes as T
from kernel_ir.dtypes import DType


def promote(a: DType, b: DType) -> DType:
    if a == b:
        return a
    if a == T.u1:
        return b
    if b == T.u1:
        return a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            return a if a.bits >= b.bits else b
        return a if a.is_float else b
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return a if not a.is_signed else b


def literal_type(value, other: DType | None, default_fp: DType, default_ip: DType) -> DType:
    """The type a Python literal takes next to an operand of type `other` (None: alone)."""
    if isinstance(value, bool):
        return T.u1 if other is None or other == T.u1 else other
    if isinstance(value, int):
        if other is None or other == T.u1 or other.is_int and _narrow(other, default_ip):
            return default_ip
        return other
    if isinstance(value, float):
        if other is not None and other.is_float and not _narrow(other, default_fp):
            return other
        return default_fp
    raise TypeError(f"unsupported literal {value!r}")


def _narrow(t: DType, default: DType) -> bool:
    """An 8- or 16-bit type narrower than the default of its family: a literal beside it takes
    the default (Taichi's literal types; the wider types keep spirad's weak literals)."""
    return t.bits < 32 and t.bits < default.bits


def true_div_type(a: DType, b: DType, default_fp: DType) -> DType:
    """`a / b`: a float; two ints give `default_fp`. An f16 beside an int gives `default_fp`
    (Taichi counts each int operand as `default_fp`: f16 / i32 is an f32)."""
    t = promote(a, b)
    if not t.is_float or (not (a.is_float and b.is_float) and _narrow(t, default_fp)):
        return default_fp
    return t
