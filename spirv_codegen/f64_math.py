"""Transcendental functions as SPIR-V helper functions (f64; atan2/asin/acos/tanh also f32).

GLSL.std.450 Sin/Cos/Tan/Tanh/Asin/Acos/Atan2/Exp/Log/Pow take 16/32-bit floats only, so f64
kernels call these instead. Each is built once per module (`Emitter.call`), is loop-free (so it
never counts against lavapipe's loop cap) and needs Float64 only: bit manipulation goes through
`uvec2` bitcasts, not Int64.

Methods (relative error about 1e-16..1e-15 on sane inputs; all handle NaN, ±inf, ±0):
* exp: k = round(x / ln2), Cody–Waite r = x - k·ln2 (ln2 split hi/lo), Taylor to r^13 on
  |r| <= ln2/2, scaled by 2^k as two exact power-of-two factors (gradual underflow kept).
* log: x = m·2^e with m in [sqrt(1/2), sqrt(2)) from the exponent bits (subnormals pre-scaled by
  2^54); log(m) = f - s(f - R), s = f/(2+f), R the atanh series in s^2 to s^24;
  e·ln2 added as hi + (lo + log m).
* sin/cos/tan: k = round(2x/pi), three-part Cody–Waite reduction (exact products for
  |x| < ~1.6e6; accuracy degrades slowly beyond), Taylor polynomials to r^19 / r^20 on
  |r| <= pi/4, quadrant by k mod 4.
* atan2: t = min/max of |x|,|y| in [0, 1]; above 2-sqrt(3) reduced by the pi/6 identity;
  Taylor to u^29; octant/quadrant fix-ups with pi/2 and pi split hi/lo; C's special cases.
* asin(x) = atan2(x, sqrt((1-x)(1+x))), acos(x) = atan2(sqrt((1-x)(1+x)), x).
* tanh: e = expm1(2|x|) (Taylor below 0.5, exp(2|x|) - 1 above), tanh = e / (e + 2).
"""
from __future__ import annotations

import math

from kernel_ir.dtypes import f64, i32, u1, u32

LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
INV_LN2 = 1.44269504088896338700e+00
PIO2_1 = 1.57079632673412561417e+00
PIO2_2 = 6.07710050630396597660e-11
PIO2_3 = 2.02226624871116645580e-21
PIO2_HI = 1.5707963267948966
PIO2_LO = 6.123233995736766e-17
PI_HI = 3.141592653589793
PI_LO = 1.2246467991473532e-16
SQRT3 = 1.7320508075688772
TAN_PI12 = 0.2679491924311227  # 2 - sqrt(3)


class _F:
    """Terse float arithmetic (f64 unless told) on an Emitter."""

    def __init__(self, E, dt=f64):
        self.E = E
        self.dt = dt

    def c(self, v):
        return self.E.c(v, self.dt)

    def add(self, a, b):
        return self.E.op("OpFAdd", self.dt, a, b)

    def sub(self, a, b):
        return self.E.op("OpFSub", self.dt, a, b)

    def mul(self, a, b):
        return self.E.op("OpFMul", self.dt, a, b)

    def div(self, a, b):
        return self.E.op("OpFDiv", self.dt, a, b)

    def neg(self, a):
        return self.E.op("OpFNegate", self.dt, a)

    def sel(self, c, a, b):
        return self.E.sel(c, a, b, self.dt)

    def lt(self, a, b):
        return self.E.fcmp("LessThan", a, b)

    def gt(self, a, b):
        return self.E.fcmp("GreaterThan", a, b)

    def eq(self, a, b):
        return self.E.fcmp("Equal", a, b)

    def g(self, name, *xs):
        return self.E.glsl(name, self.dt, *xs)

    def poly(self, x, coeffs):
        """coeffs[0] + x*(coeffs[1] + x*(...)) by Horner."""
        acc = self.c(coeffs[-1])
        for co in reversed(coeffs[:-1]):
            acc = self.add(self.c(co), self.mul(x, acc))
        return acc

    def finite(self, x):
        E = self.E
        return E.bnot(E.bor(E.isnan(x), E.isinf(x)))

    def pow2(self, k):
        """2^k for an i32 k in the normal exponent range, built from its bits."""
        E = self.E
        e = E.op("OpBitcast", u32, E.op("OpIAdd", i32, k, E.c(1023, i32)))
        return E.f64_from_words(E.c(0, u32), E.op("OpShiftLeftLogical", u32, e, E.c(20, u32)))


# -- exp / log -----------------------------------------------------------------------------
def _exp_build(E, x):
    F = _F(E)
    xc = F.sel(F.gt(x, F.c(710.0)), F.c(710.0), F.sel(F.lt(x, F.c(-746.0)), F.c(-746.0), x))
    xc = F.sel(E.isnan(x), F.c(0.0), xc)
    k = F.g("Round", F.mul(xc, F.c(INV_LN2)))
    r = F.sub(F.sub(xc, F.mul(k, F.c(LN2_HI))), F.mul(k, F.c(LN2_LO)))
    p = F.poly(r, [1.0 / math.factorial(n) for n in range(14)])
    ki = E.op("OpConvertFToS", i32, k)
    k1 = E.op("OpShiftRightArithmetic", i32, ki, E.c(1, i32))
    k2 = E.op("OpISub", i32, ki, k1)
    res = F.mul(F.mul(p, F.pow2(k1)), F.pow2(k2))
    return F.sel(E.isnan(x), x, res)


def exp(E, x):
    return E.call("exp_f64", f64, (f64,), _exp_build, x)


def _log_build(E, x):
    F = _F(E)
    tiny = F.lt(x, F.c(2.0 ** -1022))
    xs = F.sel(tiny, F.mul(x, F.c(2.0 ** 54)), x)
    v = E.fn.op("OpBitcast", E.t_uvec2(), xs)
    lo = E.op("OpCompositeExtract", u32, v, 0)
    hi = E.op("OpCompositeExtract", u32, v, 1)
    ebits = E.op("OpBitwiseAnd", u32, E.op("OpShiftRightLogical", u32, hi, E.c(20, u32)),
                 E.c(0x7FF, u32))
    e = E.op("OpISub", i32, E.op("OpBitcast", i32, ebits), E.c(1023, i32))
    mh = E.op("OpBitwiseOr", u32, E.op("OpBitwiseAnd", u32, hi, E.c(0x000FFFFF, u32)),
              E.c(0x3FF00000, u32))
    m = E.f64_from_words(lo, mh)
    big = F.gt(m, F.c(math.sqrt(2.0)))
    m = F.sel(big, F.mul(m, F.c(0.5)), m)
    e = E.op("OpIAdd", i32, e, E.sel(big, E.c(1, i32), E.c(0, i32), i32))
    e = E.op("OpIAdd", i32, e, E.sel(tiny, E.c(-54, i32), E.c(0, i32), i32))
    f = F.sub(m, F.c(1.0))
    s = F.div(f, F.add(F.c(2.0), f))
    z = F.mul(s, s)
    R = F.mul(z, F.poly(z, [2.0 / (2 * n + 1) for n in range(1, 13)]))
    logm = F.sub(f, F.mul(s, F.sub(f, R)))
    ef = E.op("OpConvertSToF", f64, e)
    res = F.add(F.mul(ef, F.c(LN2_HI)), F.add(F.mul(ef, F.c(LN2_LO)), logm))
    res = F.sel(E.isinf(x), x, res)
    res = F.sel(F.eq(x, F.c(0.0)), E.inf(f64, -1), res)
    res = F.sel(F.lt(x, F.c(0.0)), E.nan(f64), res)
    return F.sel(E.isnan(x), x, res)


def log(E, x):
    return E.call("log_f64", f64, (f64,), _log_build, x)


# -- sin / cos / tan -----------------------------------------------------------------------
_SIN = [(-1.0) ** n / math.factorial(2 * n + 1) for n in range(1, 10)]
_COS = [(-1.0) ** n / math.factorial(2 * n) for n in range(2, 11)]


def _reduce(E, x):
    """(finite, sin(r), cos(r), quadrant q in 0..3 as i32) for x = r + q*pi/2 (mod 2pi)."""
    F = _F(E)
    fin = F.finite(x)
    xf = F.sel(fin, x, F.c(0.0))
    k = F.g("FClamp", F.g("Round", F.mul(xf, F.c(2.0 / math.pi))), F.c(-2.0 ** 30), F.c(2.0 ** 30))
    r = F.sub(xf, F.mul(k, F.c(PIO2_1)))
    r = F.sub(r, F.mul(k, F.c(PIO2_2)))
    r = F.sub(r, F.mul(k, F.c(PIO2_3)))
    q = E.op("OpBitwiseAnd", i32, E.op("OpConvertFToS", i32, k), E.c(3, i32))
    z = F.mul(r, r)
    s = F.add(r, F.mul(F.mul(r, z), F.poly(z, _SIN)))
    hz = F.mul(z, F.c(0.5))
    w = F.sub(F.c(1.0), hz)
    c = F.add(w, F.add(F.sub(F.sub(F.c(1.0), w), hz), F.mul(F.mul(z, z), F.poly(z, _COS))))
    return fin, s, c, q


def _quadrant(E, q, vals):
    """vals[q] for q in 0..3."""
    F = _F(E)
    qi = [E.op("OpIEqual", u1, q, E.c(i, i32)) for i in range(3)]
    r = vals[3]
    for i in (2, 1, 0):
        r = F.sel(qi[i], vals[i], r)
    return r


def _sin_build(E, x):
    F = _F(E)
    fin, s, c, q = _reduce(E, x)
    r = _quadrant(E, q, [s, c, F.neg(s), F.neg(c)])
    r = F.sel(F.eq(x, F.c(0.0)), x, r)  # sin(-0) = -0
    return F.sel(fin, r, E.nan(f64))


def _cos_build(E, x):
    F = _F(E)
    fin, s, c, q = _reduce(E, x)
    r = _quadrant(E, q, [c, F.neg(s), F.neg(c), s])
    return F.sel(fin, r, E.nan(f64))


def _tan_build(E, x):
    F = _F(E)
    fin, s, c, q = _reduce(E, x)
    odd = E.op("OpIEqual", u1, E.op("OpBitwiseAnd", i32, q, E.c(1, i32)), E.c(1, i32))
    r = F.sel(odd, F.neg(F.div(c, s)), F.div(s, c))
    r = F.sel(F.eq(x, F.c(0.0)), x, r)  # tan(-0) = -0
    return F.sel(fin, r, E.nan(f64))


def sin(E, x):
    return E.call("sin_f64", f64, (f64,), _sin_build, x)


def cos(E, x):
    return E.call("cos_f64", f64, (f64,), _cos_build, x)


def tan(E, x):
    return E.call("tan_f64", f64, (f64,), _tan_build, x)


# -- atan2 / asin / acos (f32 and f64) -----------------------------------------------------
_ATAN = [(-1.0) ** n / (2 * n + 1) for n in range(1, 15)]


def _atan01(F, t):
    """atan(t) for t in [0, 1]."""
    big = F.gt(t, F.c(TAN_PI12))
    tr = F.div(F.sub(F.mul(t, F.c(SQRT3)), F.c(1.0)), F.add(t, F.c(SQRT3)))
    u = F.sel(big, tr, t)
    z = F.mul(u, u)
    p = F.add(u, F.mul(F.mul(u, z), F.poly(z, _ATAN if F.dt == f64 else _ATAN[:6])))
    return F.sel(big, F.add(F.c(math.pi / 6), p), p)


def _atan2_build(dt):
    def build(E, y, x):
        F = _F(E, dt)
        ax, ay = F.g("FAbs", x), F.g("FAbs", y)
        mx, mn = F.g("FMax", ax, ay), F.g("FMin", ax, ay)
        a = _atan01(F, F.div(mn, mx))
        a = F.sel(F.eq(mx, F.c(0.0)), F.c(0.0), a)
        a = F.sel(E.band(E.isinf(ax), E.isinf(ay)), F.c(math.pi / 4), a)
        a = F.sel(F.gt(ay, ax), F.add(F.sub(F.c(PIO2_HI), a), F.c(PIO2_LO)), a)
        a = F.sel(E.signbit(x, dt), F.add(F.sub(F.c(PI_HI), a), F.c(PI_LO)), a)
        a = F.sel(E.signbit(y, dt), F.neg(a), a)
        return F.sel(E.bor(E.isnan(x), E.isnan(y)), F.add(x, y), a)
    return build


def atan2(E, y, x, dt=f64):
    return E.call(f"atan2_{dt.name}", dt, (dt, dt), _atan2_build(dt), y, x)


def _cosine_side(F, x):
    w = F.mul(F.sub(F.c(1.0), x), F.add(F.c(1.0), x))
    return F.g("Sqrt", F.g("FMax", w, F.c(0.0)))


def _arc_build(dt, is_asin):
    def build(E, x):
        F = _F(E, dt)
        side = _cosine_side(F, x)
        r = atan2(E, x, side, dt) if is_asin else atan2(E, side, x, dt)
        r = F.sel(F.gt(F.g("FAbs", x), F.c(1.0)), E.nan(dt), r)
        return F.sel(E.isnan(x), x, r)
    return build


def asin(E, x, dt=f64):
    return E.call(f"asin_{dt.name}", dt, (dt,), _arc_build(dt, True), x)


def acos(E, x, dt=f64):
    return E.call(f"acos_{dt.name}", dt, (dt,), _arc_build(dt, False), x)


# -- tanh (f32 and f64) --------------------------------------------------------------------
def _tanh_build(dt):
    def build(E, x):
        F = _F(E, dt)
        a = F.g("FAbs", x)
        y = F.add(a, a)
        nterms = 18 if dt == f64 else 10
        small = F.mul(y, F.poly(y, [1.0 / math.factorial(n) for n in range(1, nterms)]))
        ey = exp(E, y) if dt == f64 else F.g("Exp", y)
        e = F.sel(F.lt(a, F.c(0.25)), small, F.sub(ey, F.c(1.0)))
        t = F.div(e, F.add(e, F.c(2.0)))
        t = F.sel(F.gt(a, F.c(22.0 if dt == f64 else 10.0)), F.c(1.0), t)
        r = F.sel(E.signbit(x, dt), F.neg(t), t)
        return F.sel(E.isnan(x), x, r)
    return build


def tanh(E, x, dt=f64):
    return E.call(f"tanh_{dt.name}", dt, (dt,), _tanh_build(dt), x)
