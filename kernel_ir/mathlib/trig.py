"""sin, cos, tan: Cody-Waite reduction by multiples of pi/2 (three-part constant, fma), then
minimax polynomials on [-pi/4, pi/4] selected and signed by the quadrant.

The reduction keeps the bound up to |x| <= HUGE (f32 2**17, f64 2**26); beyond, lanes take
libm in a cold block (Payne-Hanek reduction is not worth its code for arguments that rare).
"""
from __future__ import annotations

import math

from .coefficients import COEFFS
from .emitter import MathEmitter as Em

HUGE = {False: 2.0 ** 17, True: 2.0 ** 26}


def _reduce(em: Em, x):
    """(r, q, big): x = q*pi/2 + r with |r| <= ~pi/4, q as an integer lane (its low bits),
    big = |x| > HUGE (NaN lanes are not big; their r is NaN). Lanes that are big get garbage
    here and are replaced by libm.

    The nearest integer comes from the shifter trick: t = fma(x, 2/pi, 1.5 * 2**m) rounds
    x*2/pi to an integer in its last mantissa bits (|x*2/pi| < 2**(m-1) below HUGE), so k is
    t - shifter (+0 for k = 0, which keeps r = x for x = -0) and the quadrant is t's bits:
    shorter than roundeven + a NaN-safe fptosi."""
    ax = em.fabs(x)
    # finite lanes only: +-inf come out NaN from the fast path (t, kf = inf, r = inf - inf),
    # so libm is never called where it would set errno (`vecmath` marks these readnone)
    big = em.and_(em.gt(ax, em.c(HUGE[em.is64])), em.lt(ax, em.c(math.inf)))
    shifter = em.c(1.5 * 2.0 ** em.mant)
    t = em.fma(x, em.c(2.0 / math.pi), shifter)
    kf = em.sub(t, shifter)
    p1, p2, p3 = em.split(_PIO2_64, 3)
    r = em.exact_fma(em.neg(kf), em.c(p1), x)
    r = em.exact_fma(em.neg(kf), em.c(p2), r)
    r = em.exact_fma(em.neg(kf), em.c(p3), r)
    return r, em.bits(t), big


# pi/2 to ~160 bits as three doubles (f64 split of the exact value; math.pi is only 53 bits)
_PIO2_64 = (1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33)


def _sin_poly(em, r, z):
    key = ("sin", "f64" if em.is64 else "f32")
    return em.fma(em.mul(r, z), em.estrin(z, COEFFS[key]), r)


def _cos_poly(em, z):
    key = ("cos", "f64" if em.is64 else "f32")
    # 1 - z/2 + z^2 Q(z): w = 1 - z/2 rounded (fma), its rounding error e = (1 - w) - z/2
    # exactly (1 - w is exact for w >= 1/2, then one fma), e and the tail (< 0.016) added to w
    # last, so w's rounding is not the final one
    w = em.fma(z, em.c(-0.5), em.c(1.0))
    e = em.fma(z, em.c(-0.5), em.sub(em.c(1.0), w))
    return em.add(w, em.fma(em.mul(z, z), em.estrin(z, COEFFS[key]), e))


def _cores(em: Em, x):
    """(sin core, cos core, quadrant, big) of x: one reduction serves sin and cos."""
    r, q, big = _reduce(em, x)
    z = em.mul(r, r)
    return _sin_poly(em, r, z), _cos_poly(em, z), q, big


def _place(em: Em, s, c, q, shift: int):
    """The result for quadrant q + shift (shift 1: cos(x) = sin(x + pi/2))."""
    q = em.iadd(q, em.ci(shift))
    res = em.sel(em.odd_lane(q), c, s)
    sign = em.ishl(em.iand(q, em.ci(2)), em.ci(em.nbits - 2))
    return em.from_bits(em.ixor(em.bits(res), sign))


def sin(em: Em, x):
    s, c, q, big = _cores(em, x)
    return em.keep_zero(x, em.libm_where(big, _place(em, s, c, q, 0), "sin", x))


def cos(em: Em, x):
    s, c, q, big = _cores(em, x)
    return em.libm_where(big, _place(em, s, c, q, 1), "cos", x)


def sincos(em: Em, x):
    """(sin x, cos x) from one reduction: the reverse pass of a kernel with sin(v) needs cos(v)
    at the same v (the codegen pairs them, `vecmath.sincos_function`)."""
    s, c, q, big = _cores(em, x)
    sx = em.keep_zero(x, em.libm_where(big, _place(em, s, c, q, 0), "sin", x))
    return sx, em.libm_where(big, _place(em, s, c, q, 1), "cos", x)


def tan(em: Em, x):
    r, q, big = _reduce(em, x)
    z = em.mul(r, r)
    key = ("tan", "f64" if em.is64 else "f32")
    t = em.fma(em.mul(r, z), em.horner(z, COEFFS[key]), r)
    res = em.sel(em.odd_lane(q), em.div(em.c(-1.0), t), t)
    return em.keep_zero(x, em.libm_where(big, res, "tan", x))
