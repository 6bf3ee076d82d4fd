"""Encode / decode of quantized types (Taichi's `ti.types.quant`, spirad.types), written once.

A quantized value lives in a bit-field of an unsigned word (u32, or u64 with `max_num_bits=64`):
`quant.int(bits, signed)` stores its two's complement low bits (wrapping on overflow);
`quant.fixed(bits, signed, max_value | scale)` stores `round(v / scale)` (half away from zero,
Taichi's `rounding_prepare`) as such an int and reads `digits * scale`; `quant.float(exp, frac,
signed)` stores an exponent field and `frac` digit bits (the sign bit among them when signed),
rounded to nearest, flushed to zero when the exponent underflows; with a *shared exponent*
several floats keep one exponent (the largest of theirs) and each its digits aligned to it.
The bit manipulations follow Taichi's LLVM code generator (codegen_llvm_quant.cpp), so a value
reads back as Taichi's does.

Every function here is written over an arithmetic object `A` (`NumpyArith` below for host
reads and writes; `spirad.frontend.quant_ops.IRArith` in kernels), so host I/O and kernels
encode and decode with the same code (engineering 15: one definition).
"""
from __future__ import annotations

import numpy as np

from kernel_ir import dtypes as T

from ..types import QuantFixed, QuantFloat, QuantInt  # noqa: F401 - the types the codec reads

QUANT_TYPES = (QuantInt, QuantFixed, QuantFloat)


# -- the codec, over an arithmetic object A ------------------------------------------------------
# A: c(v, dt), add sub and_ or_ xor shl shr min max (same dtype; shr arithmetic on signed),
# ne eq lt (-> bool), sel(cond, a, b), cast(x, dt), f32_bits(x) -> u32, f32_from_bits(u) -> f32,
# clz(u32) -> i32.

U32, I32 = T.u32, T.i32


def extract(A, word, offset, width: int, signed: bool, wdt):
    """The `width` bits at `offset` of `word` (dtype `wdt`): u32, or i32 sign-extended."""
    low = A.cast(A.and_(A.shr(word, offset), A.c((1 << width) - 1, wdt)), U32)
    if not signed or width == 32:
        return A.cast(low, I32) if signed else low
    s = A.c(32 - width, I32)
    return A.shr(A.shl(A.cast(low, I32), s), s)


def to_fixed_digits(A, q: QuantFixed, v):
    """Taichi's to_quant_fixed: v / scale rounded half away from zero, as i32 (signed) / u32."""
    x = A.mul(A.cast(v, q.compute), A.c(1.0 / q.scale, q.compute))
    half = A.sel(A.lt(A.c(0.0, q.compute), x), A.c(0.5, q.compute), A.c(-0.5, q.compute))
    return A.cast(A.add(x, half), I32 if q.signed else U32)


def encode(A, q, v):
    """The member's bits (u32, low `q.width` bits set at most) of the compute value `v`. A float
    returns (digits, exponent) for its two fields."""
    mask = A.c((1 << q.width) - 1, U32) if q.width < 32 else None
    if isinstance(q, QuantInt):
        d = A.cast(A.cast(A.cast(v, q.compute), I32 if q.signed else U32), U32)
        return d if mask is None else A.and_(d, mask)
    if isinstance(q, QuantFixed):
        d = A.cast(to_fixed_digits(A, q, v), U32)
        return d if mask is None else A.and_(d, mask)
    return encode_float(A, q, v)


def encode_float(A, q: QuantFloat, v):
    """(digits, exponent) of a float with its own exponent (Taichi's BitStructStoreStmt)."""
    d = q.digit_bits
    b = A.f32_bits(A.cast(v, T.f32))
    if d < 23:  # round to nearest: a carry out of the digits bumps the exponent, as wanted
        b = A.add(b, A.c(1 << (22 - d), U32))
    e = A.cast(A.and_(A.shr(b, A.c(23, U32)), A.c(0xFF, U32)), I32)
    digits = A.and_(A.shr(b, A.c(23 - d, U32)), A.c((1 << d) - 1, U32))
    if q.signed:
        digits = A.or_(digits, A.shr(A.and_(b, A.c(0x80000000, U32)), A.c(31 - d, U32)))
    e = A.sub(e, A.sel(A.ne(e, A.c(0, I32)), A.c(q.exponent_offset, I32), A.c(0, I32)))
    e = A.max(e, A.c(0, I32))
    digits = A.sel(A.ne(e, A.c(0, I32)), digits, A.c(0, U32))  # flush to zero
    return digits, A.and_(A.cast(e, U32), A.c((1 << q.exp) - 1, U32))


def decode(A, q, digits, exponent=None, shared=False):
    """The compute value of a member from its field bits: `digits` (u32 or, for a signed int /
    fixed, the sign-extended i32 of `extract`), `exponent` (u32) for a float."""
    if isinstance(q, QuantInt):
        return A.cast(digits, q.compute)
    if isinstance(q, QuantFixed):
        return A.mul(A.cast(digits, q.compute), A.c(q.scale, q.compute))
    return decode_shared(A, q, digits, exponent) if shared else decode_float(A, q, digits, exponent)


def _exp_offset(A, q: QuantFloat, e):
    off = A.c(q.exponent_offset, I32)
    if q.exp < 8:  # zeros: an exponent field of 0 stays 0
        off = A.sel(A.ne(e, A.c(0, U32)), off, A.c(0, I32))
    return off


def decode_float(A, q: QuantFloat, digits, e):
    d = q.digit_bits
    digits = A.shl(A.and_(A.cast(digits, U32), A.c((1 << q.frac) - 1, U32)), A.c(23 - d, U32))
    frac = A.and_(digits, A.c((1 << 23) - 1, U32))
    ev = A.cast(A.add(A.cast(e, I32), _exp_offset(A, q, e)), U32)
    bits = A.or_(A.shl(ev, A.c(23, U32)), frac)
    if q.signed:
        bits = A.or_(bits, A.shl(A.and_(digits, A.c(1 << 23, U32)), A.c(8, U32)))
    return A.f32_from_bits(bits)


def decode_shared(A, q: QuantFloat, raw, e):
    """A float whose exponent field is shared: its digits carry the leading 1 explicitly."""
    d = q.digit_bits
    raw = A.and_(A.cast(raw, U32), A.c((1 << q.frac) - 1, U32))
    digits, sign = raw, None
    if q.signed:
        sign = A.and_(digits, A.c(1 << d, U32))
        digits = A.shl(A.xor(digits, sign), A.c(1, U32))
        sign = A.shl(sign, A.c(31 - d, U32))
    extra = A.sub(A.c(31 - d, I32), A.clz(digits))
    off = A.add(_exp_offset(A, q, e), extra)
    if not q.signed:
        off = A.add(off, A.c(1, I32))
    shift = A.cast(A.max(A.sub(A.c(23 - d, I32), extra), A.c(0, I32)), U32)
    frac = A.and_(A.shl(digits, A.min(shift, A.c(31, U32))), A.c((1 << 23) - 1, U32))
    ev = A.cast(A.add(A.cast(e, I32), off), U32)
    bits = A.or_(A.shl(A.and_(ev, A.c(0xFF, U32)), A.c(23, U32)), frac)
    zero = A.or_b(A.eq(e, A.c(0, U32)), A.eq(raw, A.c(0, U32)))
    bits = A.sel(zero, A.c(0, U32), bits)
    if sign is not None:
        bits = A.or_(bits, sign)
    return A.f32_from_bits(bits)


def encode_shared(A, qs, values):
    """(exponent, [digits of each member]) of floats `values` (f32) sharing one exponent:
    the largest exponent of theirs, each one's digits shifted to it and rounded (Taichi's
    store_quant_floats_with_shared_exponents)."""
    bits = [A.f32_bits(A.cast(v, T.f32)) for v in values]
    exps = [A.and_(A.shr(b, A.c(23, U32)), A.c(0xFF, U32)) for b in bits]
    top = exps[0]
    for e in exps[1:]:
        top = A.max(top, e)
    q0 = qs[0]
    stored = A.sub(A.cast(top, I32), A.sel(A.ne(top, A.c(0, U32)), A.c(q0.exponent_offset, I32),
                                           A.c(0, I32)))
    stored = A.and_(A.cast(A.max(stored, A.c(0, I32)), U32), A.c((1 << q0.exp) - 1, U32))
    out = []
    for q, b, e in zip(qs, bits, exps):
        d = q.digit_bits
        full = A.or_(A.and_(b, A.c((1 << 23) - 1, U32)), A.c(1 << 23, U32))
        digits = A.shr(full, A.min(A.sub(top, e), A.c(31, U32)))
        rs = 24 - d
        digits = A.add(digits, A.c(1 << (rs - 1), U32))
        digits = A.min(digits, A.c((1 << 24) - 1, U32))
        digits = A.shr(digits, A.c(rs, U32))
        if q.signed:
            digits = A.or_(digits, A.shr(A.and_(b, A.c(0x80000000, U32)), A.c(31 - d, U32)))
        out.append(digits)
    return stored, out


class NumpyArith:
    """`A` over numpy values (host reads and writes; `spirad.data.quant`): fixed-width wrapping
    integers and f32, as the device computes them."""

    @staticmethod
    def c(v, dt):
        return dt.np.type(v & ((1 << dt.bits) - 1) if dt.kind == "u" else v)

    def _b(op):  # noqa: N805 - a helper building methods
        def f(self, a, b):
            with np.errstate(over="ignore"):
                r = op(a, b)
            return r.astype(np.result_type(a)) if hasattr(r, "astype") else r
        return f

    add = _b(np.add)
    sub = _b(np.subtract)
    mul = _b(np.multiply)
    and_ = _b(np.bitwise_and)
    or_ = _b(np.bitwise_or)
    xor = _b(np.bitwise_xor)
    min = _b(np.minimum)
    max = _b(np.maximum)

    @staticmethod
    def shl(a, s):
        return np.left_shift(a, np.asarray(s).astype(np.result_type(a)))

    @staticmethod
    def shr(a, s):
        return np.right_shift(a, np.asarray(s).astype(np.result_type(a)))

    @staticmethod
    def or_b(a, b):
        return np.logical_or(a, b)

    @staticmethod
    def ne(a, b):
        return np.not_equal(a, b)

    @staticmethod
    def eq(a, b):
        return np.equal(a, b)

    @staticmethod
    def lt(a, b):
        return np.less(a, b)

    @staticmethod
    def sel(c, a, b):
        return np.where(c, a, b).astype(np.result_type(a))

    @staticmethod
    def cast(x, dt):
        x = np.asarray(x)
        if dt.is_int and x.dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                return np.trunc(x).astype(np.int64).astype(dt.np)
        return x.astype(np.int64).astype(dt.np) if dt.is_int and x.dtype.kind in "iu" \
            and x.dtype.itemsize < 8 else x.astype(dt.np)

    @staticmethod
    def f32_bits(x):
        return np.asarray(x, np.float32).view(np.uint32)

    @staticmethod
    def f32_from_bits(u):
        return np.asarray(u, np.uint32).view(np.float32)

    @staticmethod
    def clz(u):
        u = np.asarray(u, np.uint64)
        n = np.full(u.shape, 32, np.int32)
        for k in range(32):
            n = np.where((u >> np.uint64(k)) != 0, np.int32(31 - k), n)
        return n
