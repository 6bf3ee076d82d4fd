"""The emitter the math algorithms are written against: one description, two code generators.

`MathEmitter` lists the primitives an algorithm of `kernel_ir.mathlib` may use — lane-wise
float arithmetic, comparisons and selects, bit views of the same width (i32 lanes for f32, i64
for f64), a handful of integer ops — and builds the derived helpers (polynomials, constant
splits, powers of two, the integer tests of pow) from them. `llvm_codegen.vecmath` implements it
with llvmlite (scalars and `<W x T>` vectors), `spirv_codegen.mathlib_em` with SPIR-V ops
(scalars), so the LLVM vector path and the SPIR-V path run the same algorithm with one accuracy
table (`kernel_ir.mathlib.BOUND_ULP`).

Only exact operations and explicit fused multiply-adds are used; no fast-math, so NaN,
infinities and signed zeros follow IEEE 754 as numpy does.
"""
from __future__ import annotations

import struct


def round_to(v: float, is64: bool) -> float:
    """`v` rounded to f64 or f32 (what a float constant of that precision holds)."""
    return float(v) if is64 else struct.unpack("f", struct.pack("f", v))[0]


class MathEmitter:
    """Values are the code generator's own (ids, llvmlite values); masks are its booleans.

    Subclasses set `is64` and implement every method below marked *primitive*."""
    is64: bool = False

    @property
    def nbits(self) -> int:
        return 64 if self.is64 else 32

    @property
    def mant(self) -> int:
        return 52 if self.is64 else 23

    @property
    def bias(self) -> int:
        return 1023 if self.is64 else 127

    # -- primitives ----------------------------------------------------------------------------
    def c(self, v: float): raise NotImplementedError          # float constant (every lane)
    def ci(self, v: int): raise NotImplementedError           # same-width int constant
    def add(self, a, b): raise NotImplementedError
    def sub(self, a, b): raise NotImplementedError
    def mul(self, a, b): raise NotImplementedError
    def div(self, a, b): raise NotImplementedError
    def neg(self, a): raise NotImplementedError
    def fma(self, a, b, c): raise NotImplementedError         # a * b + c, one rounding
    def fabs(self, a): raise NotImplementedError
    def sqrt(self, a): raise NotImplementedError
    def rint(self, a): raise NotImplementedError              # round half to even
    def floor(self, a): raise NotImplementedError
    def copysign(self, mag, sign): raise NotImplementedError
    def lt(self, a, b): raise NotImplementedError             # ordered compares (NaN: false)
    def le(self, a, b): raise NotImplementedError
    def gt(self, a, b): raise NotImplementedError
    def eq(self, a, b): raise NotImplementedError
    def ult(self, a, b): raise NotImplementedError            # unordered a < b (NaN: true)
    def uge(self, a, b): raise NotImplementedError            # unordered a >= b (NaN: true)
    def isnan(self, a): raise NotImplementedError
    def or_(self, a, b): raise NotImplementedError            # masks
    def and_(self, a, b): raise NotImplementedError
    def not_(self, a): raise NotImplementedError
    def sel(self, m, a, b): raise NotImplementedError         # m ? a : b, floats or ints
    def bits(self, a): raise NotImplementedError              # float -> same-width int (bitcast)
    def from_bits(self, i): raise NotImplementedError
    def iadd(self, a, b): raise NotImplementedError           # same-width ints, wrapping
    def isub(self, a, b): raise NotImplementedError
    def iand(self, a, b): raise NotImplementedError
    def ixor(self, a, b): raise NotImplementedError
    def ishl(self, a, b): raise NotImplementedError
    def iashr(self, a, b): raise NotImplementedError          # arithmetic shift right
    def ine(self, a, b): raise NotImplementedError            # int a != b
    def ilt(self, a, b): raise NotImplementedError            # signed int a < b
    def itof(self, i): raise NotImplementedError              # signed int -> float
    def ftoi(self, a): raise NotImplementedError              # float -> signed int (truncating)
    def any(self, m): raise NotImplementedError               # some lane of the mask

    def widened(self) -> "MathEmitter":
        """An emitter of f64 with the same lanes (the f32 pow computes in f64)."""
        raise NotImplementedError

    def fpext(self, a): raise NotImplementedError             # to `widened()`'s type
    def fptrunc(self, a): raise NotImplementedError           # from `widened()`'s type

    def exact_fma(self, a, b, c):
        """a * b + c where the algorithm needs the product's low part exactly (a Cody-Waite
        reduction step, the error of a product or quotient); default: the fused `fma`. An
        emitter whose fma may round the product first (GLSL.std.450's Fma is allowed to, and
        lavapipe's f64 one does) computes it from the exact product (`two_prod_exact`)."""
        return self.fma(a, b, c)

    def two_prod_exact(self, a, b):
        """(p, e): p = a * b rounded and e its exact error, without a fused multiply-add
        (Veltkamp splitting, Dekker's product); needs |a|, |b| < 2**(max exponent - 27)."""
        cst = self.c(2.0 ** 27 + 1 if self.is64 else 2.0 ** 12 + 1)

        def split(x):
            t = self.mul(cst, x)
            hi = self.sub(t, self.sub(t, x))
            return hi, self.sub(x, hi)
        p = self.mul(a, b)
        (ah, al), (bh, bl) = split(a), split(b)
        e = self.add(self.add(self.add(self.sub(self.mul(ah, bh), p), self.mul(ah, bl)),
                              self.mul(al, bh)), self.mul(al, bl))
        return p, e

    def libm_where(self, mask, res, libm_name: str, *args):
        """`res` with the lanes where `mask` holds computed by the C library's `libm_name`
        (arguments the fast reduction does not cover); default: `res` as it is."""
        return res

    # -- derived -------------------------------------------------------------------------------
    def split(self, v, parts: int = 3):
        """`v` (a float, or a tuple of floats whose exact sum is meant) as a sum of `parts`
        constants of this precision (Cody-Waite style), the first ones exact."""
        from fractions import Fraction  # here: only constants need it (import time)
        rest = sum((Fraction(t) for t in (v if isinstance(v, tuple) else (v,))), Fraction(0))
        out = []
        for _ in range(parts):
            p = round_to(float(rest), self.is64)
            out.append(p)
            rest -= Fraction(p)
        return out

    def horner(self, x, coeffs):
        """coeffs[0]*x**(n-1) + ... + coeffs[-1] with fused multiply-adds."""
        acc = self.c(coeffs[0])
        for k in coeffs[1:]:
            acc = self.fma(acc, x, self.c(k))
        return acc

    def estrin(self, x, coeffs):
        """The polynomial of `horner`, evaluated pairwise (Estrin): p = A(x) * x**k + B(x) with
        both halves in parallel, so the dependent chain is ~log2(n) fmas instead of n - 1
        (what matters inside a loop-carried chain such as sin(sin(...)))."""
        n = len(coeffs)
        if n <= 2:
            return self.horner(x, coeffs)
        k = n // 2
        hi, lo = coeffs[:n - k], coeffs[n - k:]
        xk = x
        for _ in range(k - 1):
            xk = self.mul(xk, x)
        return self.fma(self.estrin(x, hi), xk, self.estrin(x, lo))

    def signbit(self, a):
        """Mask of lanes whose sign bit is set (true for -0.0 and negative NaNs)."""
        return self.ilt(self.bits(a), self.ci(0))

    def to_int(self, kf, mask_ok=None):
        """Truncation of an integral float; lanes where it is NaN (or outside `mask_ok`)
        become 0 (never poison)."""
        safe = self.sel(self.eq(kf, kf) if mask_ok is None else mask_ok, kf, self.c(0.0))
        return self.ftoi(safe)

    def pow2i(self, k):
        """2.0**k for integer lanes k in the normal exponent range."""
        return self.from_bits(self.ishl(self.iadd(k, self.ci(self.bias)), self.ci(self.mant)))

    def keep_zero(self, x, res):
        """Odd functions: f(+-0) = +-0 exactly (polynomial tails can lose the sign of zero)."""
        return self.sel(self.eq(x, self.c(0.0)), x, res)

    def odd_lane(self, q):
        """Mask of the lanes where the integer q is odd."""
        return self.ine(self.iand(q, self.ci(1)), self.ci(0))


def is_int(em: MathEmitter, y):
    """Lanes where y is an integer (true for +-inf, false for NaN): pow's special cases."""
    return em.eq(em.floor(y), y)


def is_odd_int(em: MathEmitter, y):
    small = em.lt(em.fabs(y), em.c(2.0 ** (em.mant + 1)))  # larger floats are all even
    k = em.to_int(y, mask_ok=small)
    odd = em.odd_lane(k)
    return em.and_(em.and_(small, is_int(em, y)), odd)
