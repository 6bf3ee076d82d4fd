"""atan, atan2, asin, acos.

atan: |x| reduced to [0, tan(pi/8)] by atan(a) = pi/2 - atan(1/a) (a > tan(3pi/8)) or
pi/4 + atan((a-1)/(a+1)) (a > tan(pi/8)), then a + a^3 P(a^2); pi/2 and pi/4 as hi + lo.
atan2: the same core on min(|x|,|y|)/max(|x|,|y|) in [0, 1], placed in its octant; the C99 /
numpy results for zeros, infinities and NaN.
asin: |x| <= 1/2 odd polynomial, else pi/2 - 2 asin(sqrt((1-|x|)/2)); acos from the same core.
"""
from __future__ import annotations

import math

from .coefficients import COEFFS
from .emitter import MathEmitter as Em

_T3PI8 = 1.0 + math.sqrt(2.0)   # tan(3pi/8)
_TPI8 = math.sqrt(2.0) - 1.0    # tan(pi/8)
_PIO2 = (1.5707963267948966, 6.123233995736766e-17)
_PIO4 = (0.7853981633974483, 3.061616997868383e-17)
_PI = (3.141592653589793, 1.2246467991473532e-16)


def _key(em, name):
    return (name, "f64" if em.is64 else "f32")


def _hilo(em, v):
    return em.split(v, 2)


def _odd_poly(em, a, name):
    z = em.mul(a, a)
    return em.fma(em.mul(a, z), em.horner(z, COEFFS[_key(em, name)]), a)


def _atan_pos(em: Em, a, upto_one: bool = False):
    """atan(a) for a >= 0 (a <= 1 when `upto_one`), NaN propagated."""
    mid = em.gt(a, em.c(_TPI8))
    t_mid = em.div(em.sub(a, em.c(1.0)), em.add(a, em.c(1.0)))
    (h4, l4), (h2, l2) = _hilo(em, _PIO4), _hilo(em, _PIO2)
    t, hi, lo = em.sel(mid, t_mid, a), em.sel(mid, em.c(h4), em.c(0.0)), em.sel(mid, em.c(l4), em.c(0.0))
    if not upto_one:
        far = em.gt(a, em.c(_T3PI8))
        t = em.sel(far, em.div(em.c(-1.0), a), t)
        hi, lo = em.sel(far, em.c(h2), hi), em.sel(far, em.c(l2), lo)
    p = _odd_poly(em, t, "atan")
    return em.add(hi, em.add(p, lo))


def atan(em: Em, x):
    return em.copysign(_atan_pos(em, em.fabs(x)), x)


def atan2(em: Em, y, x):
    ax, ay = em.fabs(x), em.fabs(y)
    swap = em.gt(ay, ax)
    num, den = em.sel(swap, ax, ay), em.sel(swap, ay, ax)
    a = em.div(num, den)
    a = em.sel(em.eq(den, em.c(0.0)), em.c(0.0), a)                       # both zero
    a = em.sel(em.eq(num, em.c(math.inf)), em.c(1.0), a)                  # both infinite
    r = _atan_pos(em, a, upto_one=True)
    (h2, l2), (hp, lp) = _hilo(em, _PIO2), _hilo(em, _PI)
    r = em.sel(swap, em.add(em.sub(em.c(h2), r), em.c(l2)), r)
    r = em.sel(em.signbit(x), em.add(em.sub(em.c(hp), r), em.c(lp)), r)
    r = em.copysign(r, y)
    return em.sel(em.or_(em.isnan(x), em.isnan(y)), em.add(x, y), r)


def _asin_parts(em: Em, ax):
    """(small, asin of the small branch, 2*asin(s) of the large branch, s): ax = |x|."""
    small = em.le(ax, em.c(0.5))
    ps = _odd_poly(em, ax, "asin")
    z = em.mul(em.sub(em.c(1.0), ax), em.c(0.5))
    s = em.sqrt(z)
    twice = em.mul(em.c(2.0), _odd_poly(em, s, "asin"))
    return small, ps, twice


def asin(em: Em, x):
    ax = em.fabs(x)
    small, ps, twice = _asin_parts(em, ax)
    h2, l2 = _hilo(em, _PIO2)
    large = em.sub(em.c(h2), em.sub(twice, em.c(l2)))
    return em.copysign(em.sel(small, ps, large), x)


def acos(em: Em, x):
    ax = em.fabs(x)
    small, _, twice = _asin_parts(em, ax)
    h2, l2 = _hilo(em, _PIO2)
    hp, lp = _hilo(em, _PI)
    mid = em.sub(em.c(h2), em.sub(_odd_poly(em, x, "asin"), em.c(l2)))
    neg = em.sub(em.c(hp), em.sub(twice, em.c(lp)))
    return em.sel(small, mid, em.sel(em.signbit(x), neg, twice))
