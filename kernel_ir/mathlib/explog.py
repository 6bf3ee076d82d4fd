"""exp, log, pow, tanh.

exp: x = k*ln2 + r, |r| <= ln2/2 (two-part ln2, fma), e**r = 1 + r + r^2 P(r), scaled by 2**k in
two exact steps so subnormal results round once and overflow gives inf.
log: x = 2**e * m with m in [sqrt(1/2), sqrt(2)) (subnormals pre-scaled), f = m - 1,
s = f/(2+f), log(1+f) = f - f^2/2 + s (f^2/2 + R(s^2)) (the fdlibm arrangement).
pow (f32): exp(y log|x|) in f64, rounded once to f32, with C99/numpy special cases; f64 pow is
`powd.py` (double-double log and exp).
tanh: |x| < 0.55 odd polynomial, else 1 - 2/(exp(2|x|) + 1), signed.
"""
from __future__ import annotations

import math

from . import powd
from .coefficients import COEFFS
from .emitter import MathEmitter as Em, is_int as _is_int, is_odd_int as _is_odd_int

# (lowest clamp, highest clamp): beyond them exp is 0 / inf in this precision
_EXP_CLAMP = {False: (-105.0, 89.0), True: (-750.0, 710.0)}
_LN2_HI_LO = {False: (0.693145751953125, 1.428606765330187045e-06),            # 0x3f317200
              True: (6.93147180369123816490e-01, 1.90821492927058770002e-10)}   # fdlibm


def _key(em, name):
    return (name, "f64" if em.is64 else "f32")


def exp(em: Em, x):
    lo, hi = _EXP_CLAMP[em.is64]
    xc = em.sel(em.gt(x, em.c(hi)), em.c(hi), x)
    xc = em.sel(em.lt(xc, em.c(lo)), em.c(lo), xc)  # NaN stays NaN
    kf = em.rint(em.mul(xc, em.c(1.0 / math.log(2.0))))
    l1, l2 = _LN2_HI_LO[em.is64]
    r = em.fma(em.neg(kf), em.c(l1), xc)
    r = em.fma(em.neg(kf), em.c(l2), r)
    p = em.fma(em.mul(r, r), em.horner(r, COEFFS[_key(em, "exp")]), r)
    p = em.add(em.c(1.0), p)
    k = em.to_int(kf)
    k1 = em.iashr(k, em.ci(1))
    k2 = em.isub(k, k1)
    return em.mul(em.mul(p, em.pow2i(k1)), em.pow2i(k2))


def log(em: Em, x):
    tiny = em.lt(x, em.c(2.0 ** (1 - em.bias)))  # subnormal (and zero / negative) lanes
    xs = em.sel(tiny, em.mul(x, em.c(2.0 ** em.mant)), x)
    eadj = em.sel(tiny, em.c(-float(em.mant)), em.c(0.0))
    sqrt_half = em.bits(em.c(math.sqrt(0.5)))
    one = em.bits(em.c(1.0))
    ix = em.iadd(em.bits(xs), em.isub(one, sqrt_half))
    e = em.isub(em.iashr(ix, em.ci(em.mant)), em.ci(em.bias))
    mbits = em.iadd(em.iand(ix, em.ci((1 << em.mant) - 1)), sqrt_half)
    m = em.from_bits(mbits)
    ef = em.add(em.itof(e), eadj)
    f = em.sub(m, em.c(1.0))
    s = em.div(f, em.add(em.c(2.0), f))
    z = em.mul(s, s)
    R = em.mul(z, em.horner(z, COEFFS[_key(em, "log")]))
    hfsq = em.mul(em.mul(f, f), em.c(0.5))
    l1, l2 = _LN2_HI_LO[em.is64]
    inner = em.fma(s, em.add(hfsq, R), em.mul(ef, em.c(l2)))
    res = em.fma(ef, em.c(l1), em.sub(f, em.sub(hfsq, inner)))
    res = em.sel(em.eq(x, em.c(math.inf)), x, res)
    res = em.sel(em.eq(x, em.c(0.0)), em.c(-math.inf), res)
    return em.sel(em.ult(x, em.c(0.0)), em.c(math.nan), res)


def pow(em: Em, x, y):
    """f32 pow through f64 exp/log; f64 lanes go to `powd.pow` (double-double)."""
    if em.is64:
        return powd.pow(em, x, y)
    ed = em.widened()
    ax = em.fpext(em.fabs(x))
    yd = em.fpext(y)
    r = em.fptrunc(exp(ed, ed.mul(yd, log(ed, ax))))
    r = em.sel(_is_odd_int(em, y), em.copysign(r, x), r)
    finite_neg = em.and_(em.lt(x, em.c(0.0)), em.gt(x, em.c(-math.inf)))  # pow(-inf, y) is |x|**y
    neg_nonint = em.and_(finite_neg, em.not_(_is_int(em, y)))
    r = em.sel(neg_nonint, em.c(math.nan), r)
    one_inf = em.and_(em.eq(em.fabs(x), em.c(1.0)), em.eq(em.fabs(y), em.c(math.inf)))
    r = em.sel(one_inf, em.c(1.0), r)
    is_one = em.or_(em.eq(y, em.c(0.0)), em.eq(x, em.c(1.0)))
    return em.sel(is_one, em.c(1.0), r)


def tanh(em: Em, x):
    ax = em.fabs(x)
    z = em.mul(x, x)
    small = em.fma(em.mul(x, z), em.horner(z, COEFFS[_key(em, "tanh")]), x)
    e = exp(em, em.add(ax, ax))
    large = em.sub(em.c(1.0), em.div(em.c(2.0), em.add(e, em.c(1.0))))
    res = em.sel(em.lt(ax, em.c(0.55)), small, em.copysign(large, x))
    return em.keep_zero(x, res)
