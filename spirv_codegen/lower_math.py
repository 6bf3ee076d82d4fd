"""Pure ops (unary, binary, compare, cast, select) lowered to SPIR-V, matching the interpreter.

Dispatch is by tables keyed by `(op, kind)` where kind is the operand dtype's kind ('f', 'i',
'u', 'b'): a str value is a single SPIR-V opcode; a callable is a handler
`fn(E, dt, *xs) -> id`. Semantics that SPIR-V leaves undefined are made explicit here:

* integer DIV/FLOORDIV/MOD: divisor 0 is replaced by 1 (the IR leaves it undefined; this avoids
  a trap), `INT_MIN / -1` wraps; FLOORDIV/MOD floor with Python's sign rules;
* shifts by >= the bit width give 0 (SHL, logical SHR) or the sign fill (arithmetic SHR);
* float MIN/MAX return the non-NaN operand (fmin/fmax), built from FMin/FMax plus IsNan selects
  (NMin/NMax would do, but naga's SPIR-V front end does not take them);
* float->int CAST truncates and wraps modulo 2^bits; NaN/inf give 0 (as `cast_value`);
* SQRT/LOG/ASIN/ACOS outside their domain give NaN (-inf for log 0); ATAN2 follows C's special
  cases; f64 SIN/COS/TAN/EXP/LOG/POW and ATAN2/ASIN/ACOS/TANH at both widths run our own
  algorithms (`kernel_ir.mathlib`, the CPU's vector math: `mathlib_em`); f32 POW follows C `pow`
  (negative base with integral exponent, zero base, y == 0, x == 1) around GLSL's Pow, and
  takes an integral exponent below 32 in magnitude by repeated squaring (`_pow_by_squaring`).
"""
from __future__ import annotations

from kernel_ir.dtypes import BY_NAME, f32, f64, i32, i64, u1, u32
from kernel_ir.mathfns import MATH
from kernel_ir.ops import Op

from . import mathlib_em
from .emitter import U64, Emitter, float_below


# -- integer division family ---------------------------------------------------------------
def _safe_divisor(E: Emitter, dt, b):
    """(divisor with 0 and -1 replaced by 1, is_minus_one)."""
    zero = E.op("OpIEqual", u1, b, E.c(0, dt))
    if dt.kind == "u":
        return E.sel(zero, E.c(1, dt), b, dt), None
    m1 = E.op("OpIEqual", u1, b, E.c(-1, dt))
    return E.sel(E.bor(zero, m1), E.c(1, dt), b, dt), m1


def _idiv(E, dt, a, b):
    bs, m1 = _safe_divisor(E, dt, b)
    if m1 is None:
        return E.op("OpUDiv", dt, a, bs)
    return E.sel(m1, E.op("OpSNegate", dt, a), E.op("OpSDiv", dt, a, bs), dt)


def _imod(E, dt, a, b):
    bs, m1 = _safe_divisor(E, dt, b)
    if m1 is None:
        return E.op("OpUMod", dt, a, bs)
    r = E.op("OpSRem", dt, a, bs)
    zero = E.c(0, dt)
    fix = E.band(E.op("OpINotEqual", u1, r, zero),
                 E.op("OpLogicalNotEqual", u1, E.op("OpSLessThan", u1, r, zero),
                      E.op("OpSLessThan", u1, b, zero)))
    return E.sel(fix, E.op("OpIAdd", dt, r, b), r, dt)


def _ifloordiv(E, dt, a, b):
    bs, m1 = _safe_divisor(E, dt, b)
    if m1 is None:
        return E.op("OpUDiv", dt, a, bs)
    q = E.op("OpSDiv", dt, a, bs)
    r = E.op("OpSRem", dt, a, bs)
    zero = E.c(0, dt)
    fix = E.band(E.op("OpINotEqual", u1, r, zero),
                 E.op("OpLogicalNotEqual", u1, E.op("OpSLessThan", u1, r, zero),
                      E.op("OpSLessThan", u1, b, zero)))
    q = E.sel(fix, E.op("OpISub", dt, q, E.c(1, dt)), q, dt)
    return E.sel(m1, E.op("OpSNegate", dt, a), q, dt)


def _ffloordiv(E, dt, a, b):
    return E.glsl("Floor", dt, E.op("OpFDiv", dt, a, b))


def _fmod(E, dt, a, b):
    fl = E.glsl("Floor", dt, E.op("OpFDiv", dt, a, b))
    return E.op("OpFSub", dt, a, E.op("OpFMul", dt, fl, b))


# -- shifts --------------------------------------------------------------------------------
def _shift_parts(E, dt, b):
    """(amount clamped to bits-1, amount < bits), treating the amount as unsigned."""
    ut = BY_NAME[f"u{dt.bits}"]
    bu = b if dt.kind == "u" else E.op("OpBitcast", ut, b)
    ok = E.op("OpULessThan", u1, bu, E.c(dt.bits, ut))
    return E.sel(ok, b, E.c(dt.bits - 1, dt), dt), ok


def _shl(E, dt, a, b):
    s, ok = _shift_parts(E, dt, b)
    return E.sel(ok, E.op("OpShiftLeftLogical", dt, a, s), E.c(0, dt), dt)


def _shr(E, dt, a, b):
    s, ok = _shift_parts(E, dt, b)
    if dt.kind == "i":
        return E.op("OpShiftRightArithmetic", dt, a, s)
    return E.sel(ok, E.op("OpShiftRightLogical", dt, a, s), E.c(0, dt), dt)


# -- min / max -----------------------------------------------------------------------------
def _fminmax(name):
    def f(E, dt, a, b):
        r = E.glsl(name, dt, a, b)
        r = E.sel(E.isnan(b), a, r, dt)
        return E.sel(E.isnan(a), b, r, dt)
    return f


# -- pow -----------------------------------------------------------------------------------
def _ipow_build(dt):
    def build(E: Emitter, base, e):
        r, b = E.c(1, dt), base
        one = E.c(1, dt)
        nbits = dt.bits - 1 if dt.kind == "i" else dt.bits
        for k in range(nbits):
            bit = E.op("OpINotEqual", u1, E.op("OpBitwiseAnd", dt, E.op("OpShiftRightLogical", dt,
                                                                         e, E.c(k, dt)), one),
                       E.c(0, dt))
            r = E.sel(bit, E.op("OpIMul", dt, r, b), r, dt)
            if k + 1 < nbits:
                b = E.op("OpIMul", dt, b, b)
        if dt.kind == "i":  # negative exponent: Python gives a float; the IR casts it back
            odd = E.op("OpINotEqual", u1, E.op("OpBitwiseAnd", dt, e, one), E.c(0, dt))
            rneg = E.sel(E.op("OpIEqual", u1, base, one), one,
                         E.sel(E.op("OpIEqual", u1, base, E.c(-1, dt)),
                               E.sel(odd, E.c(-1, dt), one, dt), E.c(0, dt), dt), dt)
            r = E.sel(E.op("OpSLessThan", u1, e, E.c(0, dt)), rneg, r, dt)
        return r
    return build


def _ipow(E, dt, a, b):
    return E.call(f"ipow_{dt.name}", dt, (dt, dt), _ipow_build(dt), a, b)


_SQUARING_BITS = 5  # |y| < 32: at most 9 roundings, where lavapipe's Pow was off by ~17 ulp


def _pow_by_squaring(E: Emitter, dt, ax, ay):
    """|x| ** n for an integral n = `ay` < 2**_SQUARING_BITS (a float), by repeated squaring
    (Taichi lowers a float base with an integer exponent so): a few correctly rounded products
    instead of GLSL's Pow, which is exp2(y * log2(x)) on lavapipe and loses ~1e-6 relative.
    The caller takes the reciprocal for a negative exponent and applies the sign of a negative
    base as for Pow."""
    one, two = E.c(1.0, dt), E.c(2.0, dt)
    r, p, rest = one, ax, ay
    for _ in range(_SQUARING_BITS):
        half = E.glsl("Floor", dt, E.op("OpFMul", dt, rest, E.c(0.5, dt)))
        bit = E.fcmp("NotEqual", E.op("OpFSub", dt, rest, E.op("OpFMul", dt, half, two)), E.c(0.0, dt))
        r = E.sel(bit, E.op("OpFMul", dt, r, p), r, dt)
        p, rest = E.op("OpFMul", dt, p, p), half
    return r


def _fpow_build(dt):
    def build(E: Emitter, x, y):
        one, zero = E.c(1.0, dt), E.c(0.0, dt)
        ax = E.glsl("FAbs", dt, x)
        axzero = E.fcmp("Equal", ax, zero)
        axs = E.sel(axzero, one, ax, dt)
        p = E.glsl("Pow", dt, axs, y)
        # zero base: y > 0 -> 0, y < 0 -> inf, y == 0 handled below
        pz = E.sel(E.fcmp("GreaterThan", y, zero), zero, E.inf(dt), dt)
        p = E.sel(axzero, pz, p, dt)
        fy = E.glsl("Floor", dt, y)
        yint = E.fcmp("Equal", fy, y)
        ay = E.glsl("FAbs", dt, y)
        small = E.band(yint, E.fcmp("LessThan", ay, E.c(float(2 ** _SQUARING_BITS), dt)))
        sq = _pow_by_squaring(E, dt, ax, ay)
        # an x ** |y| past the range (inf or 0) keeps Pow: its reciprocal may still be finite
        fits = E.band(E.fcmp("LessThan", sq, E.inf(dt)), E.fcmp("GreaterThan", sq, zero))
        sq = E.sel(E.fcmp("LessThan", y, zero), E.op("OpFDiv", dt, one, sq), sq, dt)
        p = E.sel(E.band(small, E.bor(fits, axzero)), sq, p, dt)
        half = E.op("OpFMul", dt, y, E.c(0.5, dt))
        yodd = E.band(yint, E.bnot(E.op("OpFOrdEqual", u1, E.glsl("Floor", dt, half), half)))
        pneg = E.sel(yint, E.sel(yodd, E.op("OpFNegate", dt, p), p, dt), E.nan(dt), dt)
        r = E.sel(E.fcmp("LessThan", x, zero), pneg, p, dt)
        negzero_odd = E.band(E.band(axzero, E.signbit(x, dt)), yodd)  # C: pow(-0, odd) keeps -
        r = E.sel(negzero_odd, E.op("OpFNegate", dt, r), r, dt)
        r = E.sel(E.isnan(y), y, r, dt)
        r = E.sel(E.fcmp("Equal", y, zero), one, r, dt)
        return E.sel(E.fcmp("Equal", x, one), one, r, dt)
    return build


def _fpow(E, dt, a, b):
    if dt == f64:
        return mathlib_em.call(E, "pow", dt, a, b)  # GLSL's Pow is f32 only
    return E.call(f"pow_{dt.name}", dt, (dt, dt), _fpow_build(dt), a, b)


# -- atan2 ---------------------------------------------------------------------------------
def _fatan2(E, dt, y, x):
    # own implementation for f32 too: lavapipe's Atan2 is off by ~2e-5 relative
    return mathlib_em.call(E, "atan2", dt, y, x)


# -- comparisons and bool arithmetic -------------------------------------------------------
_CMP_F = {Op.CMP_LT: "OpFOrdLessThan", Op.CMP_LE: "OpFOrdLessThanEqual",
          Op.CMP_GT: "OpFOrdGreaterThan", Op.CMP_GE: "OpFOrdGreaterThanEqual",
          Op.CMP_EQ: "OpFOrdEqual", Op.CMP_NE: "OpFUnordNotEqual"}
# float != is lowered as not(==) (`_fne`), NaN-safe through naga, which translates
# OpFUnordNotEqual to an *ordered* comparison (NaN != NaN came out false on Metal's path)
_CMP_I = {Op.CMP_LT: "OpSLessThan", Op.CMP_LE: "OpSLessThanEqual", Op.CMP_GT: "OpSGreaterThan",
          Op.CMP_GE: "OpSGreaterThanEqual", Op.CMP_EQ: "OpIEqual", Op.CMP_NE: "OpINotEqual"}
_CMP_U = {Op.CMP_LT: "OpULessThan", Op.CMP_LE: "OpULessThanEqual", Op.CMP_GT: "OpUGreaterThan",
          Op.CMP_GE: "OpUGreaterThanEqual", Op.CMP_EQ: "OpIEqual", Op.CMP_NE: "OpINotEqual"}


def _bool_via_u32(op):
    """Ops on u1 that the interpreter defines through ints: compute on 0/1 u32, then != 0."""
    def f(E, dt, a, b):
        one, zero = E.c(1, u32), E.c(0, u32)
        ua, ub = E.sel(a, one, zero, u32), E.sel(b, one, zero, u32)
        r = lower_binary(E, op, u32, ua, ub)
        if op in _CMP_U:
            return r
        return E.op("OpINotEqual", u1, r, zero)
    return f


BINARY: dict = {}
for _op, _f, _i in ((Op.ADD, "OpFAdd", "OpIAdd"), (Op.SUB, "OpFSub", "OpISub"),
                    (Op.MUL, "OpFMul", "OpIMul")):
    BINARY[(_op, "f")], BINARY[(_op, "i")], BINARY[(_op, "u")] = _f, _i, _i
for _op, _name in ((Op.AND, "OpBitwiseAnd"), (Op.OR, "OpBitwiseOr"), (Op.XOR, "OpBitwiseXor")):
    BINARY[(_op, "i")] = BINARY[(_op, "u")] = _name
BINARY.update({
    (Op.AND, "b"): "OpLogicalAnd", (Op.OR, "b"): "OpLogicalOr", (Op.XOR, "b"): "OpLogicalNotEqual",
    (Op.CMP_EQ, "b"): "OpLogicalEqual", (Op.CMP_NE, "b"): "OpLogicalNotEqual",
    (Op.DIV, "f"): "OpFDiv", (Op.DIV, "i"): _idiv, (Op.DIV, "u"): _idiv,
    (Op.FLOORDIV, "f"): _ffloordiv, (Op.FLOORDIV, "i"): _ifloordiv, (Op.FLOORDIV, "u"): _idiv,
    (Op.MOD, "f"): _fmod, (Op.MOD, "i"): _imod, (Op.MOD, "u"): _imod,
    (Op.POW, "f"): _fpow, (Op.POW, "i"): _ipow, (Op.POW, "u"): _ipow,
    (Op.ATAN2, "f"): _fatan2,
    (Op.MIN, "f"): _fminmax("FMin"), (Op.MAX, "f"): _fminmax("FMax"),
    (Op.SHL, "i"): _shl, (Op.SHL, "u"): _shl, (Op.SHR, "i"): _shr, (Op.SHR, "u"): _shr,
})
for _op in _CMP_F:
    BINARY[(_op, "f")], BINARY[(_op, "i")], BINARY[(_op, "u")] = _CMP_F[_op], _CMP_I[_op], _CMP_U[_op]
BINARY[(Op.CMP_NE, "f")] = lambda E, dt, a, b: E.bnot(E.op("OpFOrdEqual", u1, a, b))
for _op, (_s, _u) in {Op.MIN: ("SMin", "UMin"), Op.MAX: ("SMax", "UMax")}.items():
    BINARY[(_op, "i")] = (lambda n: lambda E, dt, a, b: E.glsl(n, dt, a, b))(_s)
    BINARY[(_op, "u")] = (lambda n: lambda E, dt, a, b: E.glsl(n, dt, a, b))(_u)
for _op in (Op.ADD, Op.SUB, Op.MUL, Op.MIN, Op.MAX, Op.CMP_LT, Op.CMP_LE, Op.CMP_GT, Op.CMP_GE,
            Op.SHL, Op.SHR, Op.POW, Op.FLOORDIV, Op.MOD, Op.DIV):
    BINARY.setdefault((_op, "b"), _bool_via_u32(_op))


def lower_binary(E: Emitter, op: Op, dt, a: int, b: int) -> int:
    """`op(a, b)` with operand dtype `dt`."""
    h = BINARY.get((op, dt.kind))
    if h is None:
        raise RuntimeError(f"spirv_codegen: {op.name} on {dt} is not supported")
    if isinstance(h, str):
        rdt = u1 if op in _CMP_F or dt.kind == "b" else dt
        return E.op(h, rdt, a, b)
    return h(E, dt, a, b)


# -- unary ---------------------------------------------------------------------------------
def _glsl1(name):
    return lambda E, dt, x: E.glsl(name, dt, x)


def _f32_or_f64(name, guard=None):
    """GLSL.std.450 `name` for f32; for f64 (GLSL has none) `kernel_ir.mathlib`'s function."""
    def f(E, dt, x):
        if dt == f64:
            return mathlib_em.call(E, name.lower(), dt, x)
        r = E.glsl(name, dt, x)
        return guard(E, dt, x, r) if guard else r
    return f


def _sqrt(E, dt, x):
    neg = E.fcmp("LessThan", x, E.c(0.0, dt))
    r = E.glsl("Sqrt", dt, E.sel(neg, E.c(0.0, dt), x, dt))
    return E.sel(neg, E.nan(dt), r, dt)


def _rsqrt(E, dt, x):
    return E.op("OpFDiv", dt, E.c(1.0, dt), _sqrt(E, dt, x))


def _guard_log(E, dt, x, r):
    zero = E.c(0.0, dt)
    r = E.sel(E.fcmp("Equal", x, zero), E.inf(dt, -1), r, dt)
    return E.sel(E.fcmp("LessThan", x, zero), E.nan(dt), r, dt)


def _own(name):
    """Our implementation (`kernel_ir.mathlib`) for both widths (lavapipe's f32 Asin / Acos are
    off by ~4e-4, its Tanh by ~5e-6 relative near 0)."""
    return lambda E, dt, x: mathlib_em.call(E, name, dt, x)


# the math functions of `kernel_ir.mathfns` by their `lowering`: "native" is GLSL.std.450's for
# f32 (our mathlib's for f64), "mathlib" ours at both widths; these rules are our own
_MATH_RULES = {Op.SQRT: _sqrt, Op.RSQRT: _rsqrt, Op.LOG: _f32_or_f64("Log", _guard_log)}


def _math_rule(fn):
    if fn.op in _MATH_RULES:
        return _MATH_RULES[fn.op]
    return _f32_or_f64(fn.name.capitalize()) if fn.lowering == "native" else _own(fn.name)


def _iabs(E, dt, x):
    return x if dt.kind == "u" else E.glsl("SAbs", dt, x)


UNARY: dict = {
    (Op.NEG, "f"): "OpFNegate", (Op.NEG, "i"): "OpSNegate", (Op.NEG, "u"): "OpSNegate",
    (Op.NOT, "i"): "OpNot", (Op.NOT, "u"): "OpNot", (Op.NOT, "b"): "OpLogicalNot",
    (Op.BIT_NOT, "i"): "OpNot", (Op.BIT_NOT, "u"): "OpNot", (Op.BIT_NOT, "b"): "OpLogicalNot",
    (Op.NEG, "b"): lambda E, dt, x: x,
    (Op.ABS, "f"): _glsl1("FAbs"), (Op.ABS, "i"): _iabs, (Op.ABS, "u"): _iabs,
    (Op.ABS, "b"): lambda E, dt, x: x,
    **{(Op.STOP_GRAD, k): (lambda E, dt, x: x) for k in "fiub"},  # derivatives only differ
    (Op.FLOOR, "f"): _glsl1("Floor"),
    **{(fn.op, "f"): _math_rule(fn) for fn in MATH if fn.lowering != "expanded"},
}


def lower_unary(E: Emitter, op: Op, dt, x: int) -> int:
    h = UNARY.get((op, dt.kind))
    if h is None:
        raise RuntimeError(f"spirv_codegen: {op.name} on {dt} is not supported")
    if isinstance(h, str):
        return E.op(h, dt, x)
    return h(E, dt, x)


# -- casts ---------------------------------------------------------------------------------
def _int_type(bits: int, signed: bool):
    return BY_NAME[f"{'i' if signed else 'u'}{bits}"]


def _f2i_build(src, dst):
    n = dst.bits
    si, ui = _int_type(n, True), _int_type(n, False)

    def build(E: Emitter, x):
        zero = E.c(0.0, src)
        fin = E.bnot(E.bor(E.isnan(x), E.isinf(x)))
        t = E.glsl("Trunc", src, E.sel(fin, x, zero, src))
        lo, hi = -(2.0 ** (n - 1)), 2.0 ** (n - 1)
        inr = E.band(E.fcmp("GreaterThanEqual", t, E.c(lo, src)), E.fcmp("LessThan", t, E.c(hi, src)))
        ts = E.glsl("FClamp", src, t, E.c(lo, src), E.c(float_below(hi, src), src))
        sbits = E.op("OpBitcast", ui, E.op("OpConvertFToS", si, ts))
        k = E.glsl("Floor", src, E.op("OpFMul", src, t, E.c(2.0 ** -n, src)))
        r = E.op("OpFSub", src, t, E.op("OpFMul", src, k, E.c(2.0 ** n, src)))
        r = E.glsl("FClamp", src, r, zero, E.c(float_below(2.0 ** n, src), src))
        ubits = E.op("OpConvertFToU", ui, r)
        bits = E.sel(inr, sbits, ubits, ui)
        return bits if dst.kind == "u" else E.op("OpBitcast", dst, bits)
    return build


def lower_cast(E: Emitter, x: int, src, dst) -> int:
    """CAST with `cast_value` semantics."""
    if src == dst:
        return x
    if dst.kind == "b":
        if src.kind == "f":
            return E.bnot(E.op("OpFOrdEqual", u1, x, E.c(0.0, src)))  # NaN -> True (see _CMP_F)
        return E.op("OpINotEqual", u1, x, E.c(0, src))
    if src.kind == "b":
        return E.sel(x, E.c(1, dst), E.c(0, dst), dst)
    if src.kind == "f" and dst.kind == "f":
        return E.op("OpFConvert", dst, x)
    if dst.kind == "f":
        return E.op("OpConvertSToF" if src.kind == "i" else "OpConvertUToF", dst, x)
    if src.kind == "f":
        return E.call(f"cast_{src.name}_{dst.name}", dst, (src,), _f2i_build(src, dst), x)
    # int -> int
    if src.bits == dst.bits:
        return E.op("OpBitcast", dst, x)
    if src.kind == "i":
        r = E.op("OpSConvert", _int_type(dst.bits, True), x)
        return r if dst.kind == "i" else E.op("OpBitcast", dst, r)
    r = E.op("OpUConvert", _int_type(dst.bits, False), x)
    return r if dst.kind == "u" else E.op("OpBitcast", dst, r)

