"""Type rules of the kernel language, kept apart from the AST visitor (as in Triton).

* Python literals are *weak*: an int literal takes the other operand's type when that is numeric;
  a float literal takes the other operand's float type, or `default_fp` against an int.
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
        if other is None or other == T.u1:
            return default_ip
        return other
    if isinstance(value, float):
        if other is not None and other.is_float:
            return other
        return default_fp
    raise TypeError(f"unsupported literal {value!r}")


def true_div_type(t: DType, default_fp: DType) -> DType:
    return t if t.is_float else default_fp
