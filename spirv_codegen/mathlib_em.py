"""`kernel_ir.mathlib.emitter.MathEmitter` over SPIR-V: the math algorithms the CPU's vector path
runs (`llvm_codegen.vecmath`), emitted as SPIR-V helper functions.

GLSL.std.450's Sin / Cos / Tan / Exp / Log / Pow take 16/32-bit floats only, so f64 kernels use
these; atan2 / asin / acos / tanh use them at both widths (lavapipe's f32 Atan2 is off by ~2e-5
relative, Asin / Acos by ~4e-4, Tanh by ~5e-6 near 0). Each function is built once per module
(`Emitter.call`) and is loop-free (it never counts against lavapipe's loop cap).

Values are scalars (one invocation); integer views are i32 for f32 and i64 for f64 (the Int64
capability, which every device with Float64 that spirad has met also has). Every float
arithmetic result is decorated NoContraction: the double-double steps of f64 pow and the
Cody-Waite reductions rely on exact IEEE rounding, which a driver's fast algebra (Mesa
simplifies `(a + b) - a` to `b` otherwise) would break. SPIR-V has no libm: sin / cos / tan of
|x| past the fast reduction's range (2**17 f32, 2**26 f64) lose accuracy (the CPU calls libm
there).
"""
from __future__ import annotations

from kernel_ir.dtypes import f64, i32, i64, u1
from kernel_ir.mathlib import FUNCTIONS
from kernel_ir.mathlib.emitter import MathEmitter

from .emitter import Emitter


class SpirvEm(MathEmitter):
    def __init__(self, E: Emitter, dt):
        self.E, self.dt = E, dt
        self.is64 = dt.bits == 64
        self.it = i64 if self.is64 else i32
        self._ints: set = set()  # ids of integer values (a select needs its result type)
        # NoContraction where the algorithms need exact IEEE steps: f64 (double-double pow, the
        # Cody-Waite reductions); the f32 functions here have none (and naga takes no decoration)
        self.exact = self.is64 and not E.profile.float_specials_by_bitcast

    def _float(self, name, *args):
        r = self.E.op(name, self.dt, *args)
        if self.exact:
            self.E.m.decorate(r, "NoContraction")
        return r

    def _int(self, name, *args):
        r = self.E.op(name, self.it, *args)
        self._ints.add(r)
        return r

    def _glsl(self, name, *args):
        r = self.E.glsl(name, self.dt, *args)
        if self.exact:  # (Mesa keeps an exact ffma fused)
            self.E.m.decorate(r, "NoContraction")
        return r

    # -- primitives ----------------------------------------------------------------------------
    def c(self, v):
        return self.E.c(v, self.dt)

    def ci(self, v):
        v = int(v) & ((1 << self.nbits) - 1)
        if v >= 1 << (self.nbits - 1):
            v -= 1 << self.nbits
        r = self.E.c(v, self.it)
        self._ints.add(r)
        return r

    def add(self, a, b): return self._float("OpFAdd", a, b)
    def sub(self, a, b): return self._float("OpFSub", a, b)
    def mul(self, a, b): return self._float("OpFMul", a, b)
    def div(self, a, b): return self._float("OpFDiv", a, b)
    def neg(self, a): return self._float("OpFNegate", a)
    def fma(self, a, b, c): return self._glsl("Fma", a, b, c)
    def fabs(self, a): return self._glsl("FAbs", a)
    def sqrt(self, a): return self._glsl("Sqrt", a)
    def rint(self, a): return self._glsl("RoundEven", a)
    def floor(self, a): return self._glsl("Floor", a)

    def copysign(self, mag, sign):
        top = self.ci(1 << (self.nbits - 1))
        m = self.iand(self.bits(mag), self.ci(~(1 << (self.nbits - 1))))
        return self.from_bits(self._int("OpBitwiseOr", m, self.iand(self.bits(sign), top)))

    def lt(self, a, b): return self.E.op("OpFOrdLessThan", u1, a, b)
    def le(self, a, b): return self.E.op("OpFOrdLessThanEqual", u1, a, b)
    def gt(self, a, b): return self.E.op("OpFOrdGreaterThan", u1, a, b)
    def eq(self, a, b): return self.E.op("OpFOrdEqual", u1, a, b)
    def ult(self, a, b): return self.E.bnot(self.E.op("OpFOrdGreaterThanEqual", u1, a, b))
    def uge(self, a, b): return self.E.bnot(self.E.op("OpFOrdLessThan", u1, a, b))
    def isnan(self, a): return self.E.isnan(a)
    def or_(self, a, b): return self.E.bor(a, b)
    def and_(self, a, b): return self.E.band(a, b)
    def not_(self, a): return self.E.bnot(a)

    def sel(self, m, a, b):
        if a in self._ints:
            return self._int("OpSelect", m, a, b)
        return self.E.op("OpSelect", self.dt, m, a, b)

    def bits(self, a): return self._int("OpBitcast", a)
    def from_bits(self, i): return self.E.op("OpBitcast", self.dt, i)
    def iadd(self, a, b): return self._int("OpIAdd", a, b)
    def isub(self, a, b): return self._int("OpISub", a, b)
    def iand(self, a, b): return self._int("OpBitwiseAnd", a, b)
    def ixor(self, a, b): return self._int("OpBitwiseXor", a, b)
    def ishl(self, a, b): return self._int("OpShiftLeftLogical", a, b)
    def iashr(self, a, b): return self._int("OpShiftRightArithmetic", a, b)
    def ine(self, a, b): return self.E.op("OpINotEqual", u1, a, b)
    def ilt(self, a, b): return self.E.op("OpSLessThan", u1, a, b)
    def itof(self, i): return self.E.op("OpConvertSToF", self.dt, i)
    def ftoi(self, a): return self._int("OpConvertFToS", a)

    def exact_fma(self, a, b, c):
        """GLSL's Fma may round the product first (lavapipe's f64 one does): a * b + c from
        the exact product p + e instead, (c + p) + e — exact where the algorithm needs it (c
        cancels p: a reduction step, a product's or quotient's error)."""
        p, e = self.two_prod_exact(a, b)
        return self.add(self.add(c, p), e)

    def any(self, m):
        return m

    def widened(self) -> "SpirvEm":
        return SpirvEm(self.E, f64)

    def fpext(self, a): return self.E.op("OpFConvert", f64, a)
    def fptrunc(self, a): return self.E.op("OpFConvert", self.dt, a)


def call(E: Emitter, name: str, dt, *args) -> int:
    """`name` (a `kernel_ir.mathlib` function) of `args` of dtype `dt`: a call of the module's
    helper function `<name>_<dt>` (built on first use)."""
    arity, build = FUNCTIONS[name]
    return E.call(f"{name}_{dt.name}", dt, (dt,) * arity,
                  lambda sub, *params: build(SpirvEm(sub, dt), *params), *args)
