"""Shape-generic LLVM IR building blocks for the vector math functions.

`Em(builder, ty)` emits into `builder` for one float type `ty`: `float`, `double` or a vector of
them (`<W x float>`); every helper works lane-wise, so one function body serves scalars and every
vector width. Integer views (`bits`, `from_bits`) use the same-width integer type (i32 lanes for
f32, i64 for f64) so a lane keeps its position under bitcasts.

Only exact operations and explicit `llvm.fma` are used; no fast-math flags, so NaN, infinities
and signed zeros follow IEEE 754 as numpy does.
"""
from __future__ import annotations

import struct

from llvmlite import ir

from ..splat import splat
from . import lanes_support

F32, F64 = ir.FloatType(), ir.DoubleType()


def scalar_of(ty: ir.Type) -> ir.Type:
    return ty.element if isinstance(ty, ir.VectorType) else ty


def lanes_of(ty: ir.Type) -> int:
    return ty.count if isinstance(ty, ir.VectorType) else 1


def type_suffix(ty: ir.Type) -> str:
    """`f32`, `f64`, `v8f32`, ... (the overload suffix LLVM uses for intrinsics)."""
    s = "f32" if scalar_of(ty) == F32 else "f64"
    return f"v{ty.count}{s}" if isinstance(ty, ir.VectorType) else s


def round_to(v: float, ty: ir.Type) -> float:
    """`v` rounded to the scalar precision of `ty` (what an LLVM float constant holds)."""
    if scalar_of(ty) == F32:
        return struct.unpack("f", struct.pack("f", v))[0]
    return float(v)


class Em:
    def __init__(self, b: ir.IRBuilder, ty: ir.Type):
        self.b, self.ty = b, ty
        self.st = scalar_of(ty)
        self.n = lanes_of(ty)
        self.is64 = self.st == F64
        self.nbits = 64 if self.is64 else 32
        self.mant = 52 if self.is64 else 23
        self.bias = 1023 if self.is64 else 127
        ist = ir.IntType(self.nbits)
        self.ity = ir.VectorType(ist, self.n) if self.n > 1 else ist
        self.bty = ir.VectorType(ir.IntType(1), self.n) if self.n > 1 else ir.IntType(1)
        self.module = b.module

    # -- constants ----------------------------------------------------------------------------
    def _splat(self, t, c):
        return splat(c, t.count) if isinstance(t, ir.VectorType) else c

    def c(self, v: float):
        return self._splat(self.ty, ir.Constant(self.st, float(v)))

    def ci(self, v: int):
        return self._splat(self.ity, ir.Constant(self.ity.element if self.n > 1 else self.ity,
                                                 int(v) & ((1 << self.nbits) - 1)))

    def split(self, v, parts: int = 3):
        """`v` (a float, or a tuple of floats whose exact sum is meant) as a sum of `parts`
        constants of this precision (Cody-Waite style), the first ones exact."""
        from fractions import Fraction  # here: only constants need it (import time)
        rest = sum((Fraction(t) for t in (v if isinstance(v, tuple) else (v,))), Fraction(0))
        out = []
        for _ in range(parts):
            p = round_to(float(rest), self.ty)
            out.append(p)
            rest -= Fraction(p)
        return out

    # -- intrinsics ---------------------------------------------------------------------------
    def intr(self, name: str, *args, ty=None):
        ty = ty or self.ty
        fname = f"llvm.{name}.{type_suffix(ty)}"
        fn = self.module.globals.get(fname)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ty, [ty] * len(args)), fname)
        return self.b.call(fn, list(args))

    def fma(self, a, b, c):
        return self.intr("fma", a, b, c)

    def fabs(self, a):
        return self.intr("fabs", a)

    def sqrt(self, a):
        return self.intr("sqrt", a)

    def rint(self, a):  # round half to even, no exceptions
        return self.intr("roundeven", a)

    def floor(self, a):
        return self.intr("floor", a)

    def copysign(self, mag, sign):
        return self.intr("copysign", mag, sign)

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

    def horner(self, x, coeffs):
        """coeffs[0]*x**(n-1) + ... + coeffs[-1] with fused multiply-adds."""
        acc = self.c(coeffs[0])
        for k in coeffs[1:]:
            acc = self.fma(acc, x, self.c(k))
        return acc

    # -- arithmetic and logic -----------------------------------------------------------------
    def add(self, a, b): return self.b.fadd(a, b)
    def sub(self, a, b): return self.b.fsub(a, b)
    def mul(self, a, b): return self.b.fmul(a, b)
    def div(self, a, b): return self.b.fdiv(a, b)
    def neg(self, a): return self.b.fneg(a)
    def sel(self, m, a, b): return self.b.select(m, a, b)
    def lt(self, a, b): return self.b.fcmp_ordered("<", a, b)
    def le(self, a, b): return self.b.fcmp_ordered("<=", a, b)
    def gt(self, a, b): return self.b.fcmp_ordered(">", a, b)
    def eq(self, a, b): return self.b.fcmp_ordered("==", a, b)
    def isnan(self, a): return self.b.fcmp_unordered("uno", a, a)
    def or_(self, a, b): return self.b.or_(a, b)
    def and_(self, a, b): return self.b.and_(a, b)

    def bits(self, a):
        return self.b.bitcast(a, self.ity)

    def from_bits(self, i):
        return self.b.bitcast(i, self.ty)

    def signbit(self, a):
        """Mask of lanes whose sign bit is set (true for -0.0 and negative NaNs)."""
        return self.b.icmp_signed("<", self.bits(a), self.ci(0))

    def to_int(self, kf, mask_ok=None):
        """fptosi of an integral float; lanes where it is NaN become 0 (never poison)."""
        safe = self.sel(self.eq(kf, kf) if mask_ok is None else mask_ok, kf, self.c(0.0))
        return self.b.fptosi(safe, self.ity)

    def pow2i(self, k):
        """2.0**k for integer lanes k in the normal exponent range."""
        e = self.b.add(k, self.ci(self.bias))
        return self.from_bits(self.b.shl(e, self.ci(self.mant)))

    def keep_zero(self, x, res):
        """Odd functions: f(+-0) = +-0 exactly (polynomial tails can lose the sign of zero)."""
        return self.sel(self.eq(x, self.c(0.0)), x, res)

    def any(self, m):
        """i1: some lane of the mask is set."""
        if self.n == 1:
            return m
        return self.b.icmp_unsigned("!=", self.b.bitcast(m, ir.IntType(self.n)),
                                    ir.Constant(ir.IntType(self.n), 0))

    def libm_where(self, mask, res, libm_name, *args):
        """Replace lanes of `res` where `mask` holds by the libm function on those lanes; the
        calls sit in a cold block that runs only when some lane needs it (huge arguments). For
        vectors the lane loop is `lanes_support`'s helper, compiled once per process."""
        b = self.b
        cname = libm_name + ("f" if not self.is64 else "")
        fn = self.module.globals.get(cname)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(self.st, [self.st] * len(args)), cname)
        here = b.block
        slow = b.append_basic_block("libm")
        done = b.append_basic_block("libm_done")
        br = b.cbranch(self.any(mask), slow, done)
        br.set_weights([1, 1 << 20])
        b.position_at_end(slow)
        if self.n == 1:
            out = b.call(fn, list(args))
        else:
            out = self._lanes_fallback(fn, mask, res, args)
        slow_end = b.block
        b.branch(done)
        b.position_at_end(done)
        phi = b.phi(self.ty)
        phi.add_incoming(res, here)
        phi.add_incoming(out, slow_end)
        return phi


    def _lanes_fallback(self, fn, mask, res, args):
        """`res` with the lanes where `mask` holds replaced by `fn` of those lanes, through
        `lanes_support`'s helper: the vectors pass through stack slots."""
        b = self.b
        p = ir.PointerType()
        slots = []
        for v in (res, *args):
            s = b.alloca(self.ty)
            b.store(v, s)
            slots.append(b.bitcast(s, p))
        slots += [slots[-1]] * (3 - len(slots))  # arity 1: the second input is unused
        prec = "f64" if self.is64 else "f32"
        sym = lanes_support.symbol(len(args), prec)
        helper = self.module.globals.get(sym)
        if helper is None:
            helper = ir.Function(self.module, lanes_support.helper_type(len(args), prec), sym)
        bits = b.zext(b.bitcast(mask, ir.IntType(self.n)), ir.IntType(64))
        b.call(helper, [fn, *slots, bits, ir.Constant(ir.IntType(32), self.n)])
        return b.load(b.bitcast(slots[0], self.ty.as_pointer()))


def is_int(em: Em, y):
    """Lanes where y is an integer (true for +-inf, false for NaN): pow's special cases."""
    return em.eq(em.floor(y), y)


def is_odd_int(em: Em, y):
    b = em.b
    small = em.lt(em.fabs(y), em.c(2.0 ** (em.mant + 1)))  # larger floats are all even
    k = em.to_int(y, mask_ok=small)
    odd = b.icmp_unsigned("!=", b.and_(k, em.ci(1)), em.ci(0))
    return em.and_(em.and_(small, is_int(em, y)), odd)
