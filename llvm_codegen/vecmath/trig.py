"""sin, cos, tan: Cody-Waite reduction by multiples of pi/2 (three-part constant, fma), then
minimax polynomials on [-pi/4, pi/4] selected and signed by the quadrant.

The reduction keeps the bound up to |x| <= HUGE (f32 2**17, f64 2**26); beyond, lanes take
libm in a cold block (Payne-Hanek reduction is not worth its code for arguments that rare).
"""
from __future__ import annotations

import math

from .coefficients import COEFFS
from .emitter import Em

HUGE = {False: 2.0 ** 17, True: 2.0 ** 26}


def _reduce(em: Em, x):
    """(r, q, big): x = q*pi/2 + r with |r| <= ~pi/4, q as an integer lane, big = |x| > HUGE
    (NaN lanes are not big; their r is NaN)."""
    ax = em.fabs(x)
    big = em.gt(ax, em.c(HUGE[em.is64]))
    kf = em.rint(em.mul(x, em.c(2.0 / math.pi)))
    kf = em.sel(big, em.c(0.0), kf)
    p1, p2, p3 = em.split(_PIO2_64, 3)
    r = em.fma(em.neg(kf), em.c(p1), x)
    r = em.fma(em.neg(kf), em.c(p2), r)
    r = em.fma(em.neg(kf), em.c(p3), r)
    return r, em.to_int(kf), big


# pi/2 to ~160 bits as three doubles (f64 split of the exact value; math.pi is only 53 bits)
_PIO2_64 = (1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33)


def _sin_poly(em, r, z):
    key = ("sin", "f64" if em.is64 else "f32")
    return em.fma(em.mul(r, z), em.horner(z, COEFFS[key]), r)


def _cos_poly(em, z):
    key = ("cos", "f64" if em.is64 else "f32")
    # 1 - z/2 + z^2 Q(z): form 1 - z/2 last so its rounding is the final one
    hz = em.mul(z, em.c(0.5))
    tail = em.mul(em.mul(z, z), em.horner(z, COEFFS[key]))
    w = em.sub(em.c(1.0), hz)
    return em.add(w, em.add(em.sub(em.sub(em.c(1.0), w), hz), tail))


def _sincos(em: Em, x, shift: int, libm: str):
    r, q, big = _reduce(em, x)
    z = em.mul(r, r)
    s, c = _sin_poly(em, r, z), _cos_poly(em, z)
    b = em.b
    q = b.add(q, em.ci(shift))
    odd = b.icmp_unsigned("!=", b.and_(q, em.ci(1)), em.ci(0))
    res = em.sel(odd, c, s)
    sign = b.shl(b.and_(q, em.ci(2)), em.ci(em.nbits - 2))
    res = em.from_bits(b.xor(em.bits(res), sign))
    return em.libm_where(big, res, libm, x)


def sin(em: Em, x):
    return em.keep_zero(x, _sincos(em, x, 0, "sin"))


def cos(em: Em, x):
    return _sincos(em, x, 1, "cos")


def tan(em: Em, x):
    r, q, big = _reduce(em, x)
    z = em.mul(r, r)
    key = ("tan", "f64" if em.is64 else "f32")
    t = em.fma(em.mul(r, z), em.horner(z, COEFFS[key]), r)
    b = em.b
    odd = b.icmp_unsigned("!=", b.and_(q, em.ci(1)), em.ci(0))
    res = em.sel(odd, em.div(em.c(-1.0), t), t)
    return em.keep_zero(x, em.libm_where(big, res, "tan", x))
