"""f64 pow: exp(y log|x|) with log|x| and the product in double-double, table-free.

Why double-double: the result's relative error is the absolute error of t = y log|x|, and |t|
reaches 745, so log|x| needs ~2**-70 relative accuracy (a plain f64 log gives 2**-53, i.e. up to
2**9.5 ulps of the result). Lane-wise through the emitter, so one body serves scalars and vectors.

log|x|: |x| = 2**e * m, m in [sqrt(1/2), sqrt(2)) (subnormals pre-scaled by 2**52), s = (m-1)/(m+1)
as hi + lo (the division's residual by fma), then log m = 2s + s z (2/3 + 2z/5 + z^2 Q(z)),
z = s^2 <= 0.0295, with the steps from 2z/5 on carried in double-double (Q's share of log m is
below 2**-18, so Q itself is a plain f64 polynomial: its rounding is 2**-70 of log m); plus
e*ln2 with a 42-bit ln2_hi (e*ln2_hi exact).
t = y * log|x| as hi + lo (fma).
exp(t_hi + t_lo): k = rint(t_hi / ln2), r = t_hi - k ln2_hi (exact) + (t_lo - k ln2_lo) as
hi + lo; e**r = 1 + r + r^2/2 + r^3 E(r) with 1 + r + r^2/2 summed exactly and one final
rounding, then scaled by 2**k in two exact steps (overflow is inf); results below 2**-1022 are
rounded once on the subnormal grid (through 1 + y, see `_exp_dd`), not twice.
Special cases (zeros, infinities, NaN, negative bases, |x| = 1) as C99 / numpy, with the f32
pow's selects (`emitter.is_int`, `is_odd_int`).
"""
from __future__ import annotations

import math
import struct
from fractions import Fraction

from .coefficients import COEFFS
from .emitter import MathEmitter as Em, is_int as _is_int, is_odd_int as _is_odd_int

LN2 = (0.6931471805599453, 2.3190468138462996e-17)  # ln 2 as hi + lo (hi = round(ln 2))


def _truncate(v: float, bits: int) -> float:
    """v with its significand cut to `bits` bits (so small integer multiples are exact)."""
    (i,) = struct.unpack("<q", struct.pack("<d", v))
    i &= ~((1 << (53 - bits)) - 1)
    return struct.unpack("<d", struct.pack("<q", i))[0]


def _ln2_parts():
    """(ln2_hi with 42 significant bits, ln2 - ln2_hi rounded): k * ln2_hi is exact for |k| < 2**11."""
    ln2 = Fraction(LN2[0]) + Fraction(LN2[1])
    hi = _truncate(LN2[0], 42)
    return hi, float(ln2 - Fraction(hi))


_LN2_HI, _LN2_LO = _ln2_parts()
_TAYLOR = (Fraction(2, 5), Fraction(2, 3))  # log m's terms in s z, innermost first


# -- double-double arithmetic (error-free transformations; hi + lo carries ~106 bits) -----------
def two_sum(em: Em, a, b):
    s = em.add(a, b)
    bb = em.sub(s, a)
    return s, em.add(em.sub(a, em.sub(s, bb)), em.sub(b, bb))


def fast_two_sum(em: Em, a, b):
    """Exact a + b as hi + lo, valid when |a| >= |b| (or a = 0)."""
    s = em.add(a, b)
    return s, em.sub(b, em.sub(s, a))


def two_prod(em: Em, a, b):
    p = em.mul(a, b)
    return p, em.exact_fma(a, b, em.neg(p))


def dd_mul(em: Em, ah, al, bh, bl):
    p, e = two_prod(em, ah, bh)
    e = em.add(e, em.fma(ah, bl, em.mul(al, bh)))
    return fast_two_sum(em, p, e)


def dd_add(em: Em, ah, al, bh, bl):
    s, e = two_sum(em, ah, bh)
    return fast_two_sum(em, s, em.add(e, em.add(al, bl)))


def _log_dd(em: Em, ax):
    """log(ax) as hi + lo for finite ax > 0 (other lanes: garbage, the caller selects)."""
    tiny = em.lt(ax, em.c(2.0 ** -1022))
    xs = em.sel(tiny, em.mul(ax, em.c(2.0 ** 52)), ax)
    eadj = em.sel(tiny, em.c(-52.0), em.c(0.0))
    sqrt_half = em.bits(em.c(math.sqrt(0.5)))
    ix = em.iadd(em.bits(xs), em.isub(em.bits(em.c(1.0)), sqrt_half))
    e = em.isub(em.iashr(ix, em.ci(52)), em.ci(1023))
    m = em.from_bits(em.iadd(em.iand(ix, em.ci((1 << 52) - 1)), sqrt_half))
    ef = em.add(em.itof(e), eadj)
    f = em.sub(m, em.c(1.0))                      # exact (Sterbenz)
    dh, dl = two_sum(em, m, em.c(1.0))            # m + 1, exact as hi + lo
    sh = em.div(f, dh)
    sl = em.div(em.sub(em.exact_fma(em.neg(sh), dh, f), em.mul(sh, dl)), dh)
    zh, zl = dd_mul(em, sh, sl, sh, sl)
    ph, pl = em.horner(zh, COEFFS[("powlog", "f64")]), em.c(0.0)
    for c in _TAYLOR:                             # exact Taylor terms (Q holds the rest)
        ch, cl = (em.c(v) for v in em.split((c,), 2))
        ph, pl = dd_mul(em, ph, pl, zh, zl)
        ph, pl = dd_add(em, ph, pl, ch, cl)
    th, tl = dd_mul(em, sh, sl, zh, zl)
    th, tl = dd_mul(em, th, tl, ph, pl)
    lh, ll = dd_add(em, em.add(sh, sh), em.add(sl, sl), th, tl)
    hi, lo = two_sum(em, em.mul(ef, em.c(_LN2_HI)), lh)   # ef * ln2_hi exact
    lo = em.add(lo, em.fma(ef, em.c(_LN2_LO), ll))
    return fast_two_sum(em, hi, lo)


def _exp_dd(em: Em, th, tl):
    """exp(th + tl); |tl| <= ulp(th), th already clamped to [-750, 710] (NaN propagates)."""
    kf = em.rint(em.mul(th, em.c(1.0 / math.log(2.0))))
    r1 = em.fma(em.neg(kf), em.c(_LN2_HI), th)            # exact: k * ln2_hi has 42 bits
    rh, rl = two_sum(em, r1, em.fma(em.neg(kf), em.c(_LN2_LO), tl))
    qh, ql = two_prod(em, rh, rh)
    qh, ql = em.mul(qh, em.c(0.5)), em.mul(ql, em.c(0.5))  # r^2 / 2, exact
    tail = em.mul(em.mul(rh, qh), em.c(2.0))               # r^3
    tail = em.mul(tail, em.horner(rh, COEFFS[("powexp", "f64")]))
    a, ae = fast_two_sum(em, em.c(1.0), rh)
    s, se = fast_two_sum(em, a, qh)
    low = em.add(em.add(tail, em.fma(rl, s, ql)), em.add(ae, se))
    v = em.add(s, low)
    k = em.to_int(kf)
    k1 = em.iashr(k, em.ci(1))
    res = em.mul(em.mul(v, em.pow2i(k1)), em.pow2i(em.isub(k, k1)))
    # Subnormal results: rounding v to 53 bits and then to the subnormal grid would round twice
    # (up to 0.75 ulp just below 2**-1022). Instead y = (s + low) * 2**(k + 1022) < 1 is rounded
    # once on the grid of 1 + y (2**-52, which is 2**-1074 after the exact scaling by 2**-1022).
    deep = em.ilt(k, em.ci(-1021))
    sc = em.pow2i(em.sel(deep, em.iadd(k, em.ci(1022)), em.ci(0)))
    yh, yl = em.mul(s, sc), em.mul(low, sc)
    hi = em.add(em.c(1.0), yh)
    lo = em.add(em.add(em.sub(em.c(1.0), hi), yh), yl)   # (1 - hi) + yh: 1 + yh's rounding error
    tiny = em.mul(em.sub(em.add(hi, lo), em.c(1.0)), em.c(2.0 ** -1022))
    return em.sel(em.and_(deep, em.lt(yh, em.c(1.0))), tiny, res)


def pow(em: Em, x, y):
    """x ** y for f64 lanes (the C99 / numpy special cases included)."""
    if not em.is64:
        raise RuntimeError("vecmath.powd: f64 only")
    ax = em.fabs(x)
    lh, ll = _log_dd(em, ax)
    inf = em.c(math.inf)
    nonfinite = em.uge(ax, inf)       # +inf or NaN: log is ax itself
    lh = em.sel(nonfinite, ax, lh)
    lh = em.sel(em.eq(ax, em.c(0.0)), em.c(-math.inf), lh)
    ll = em.sel(em.or_(nonfinite, em.eq(ax, em.c(0.0))), em.c(0.0), ll)
    th, tl = two_prod(em, y, lh)
    tl = em.fma(y, ll, tl)
    over, under = em.gt(th, em.c(710.0)), em.lt(th, em.c(-750.0))
    th = em.sel(over, em.c(710.0), em.sel(under, em.c(-750.0), th))
    tl = em.sel(em.or_(over, under), em.c(0.0), tl)
    r = _exp_dd(em, th, tl)
    # r >= 0: an odd integer y gives it x's sign (as one copysign: lavapipe miscompiled the
    # equivalent select(odd, copysign(r, x), r) of f64 values)
    r = em.copysign(r, em.sel(_is_odd_int(em, y), x, em.c(1.0)))
    finite_neg = em.and_(em.lt(x, em.c(0.0)), em.gt(x, em.neg(inf)))  # pow(-inf, y) is |x|**y
    r = em.sel(em.and_(finite_neg, em.not_(_is_int(em, y))), em.c(math.nan), r)
    one_inf = em.and_(em.eq(ax, em.c(1.0)), em.eq(em.fabs(y), inf))
    r = em.sel(one_inf, em.c(1.0), r)
    is_one = em.or_(em.eq(y, em.c(0.0)), em.eq(x, em.c(1.0)))
    return em.sel(is_one, em.c(1.0), r)
