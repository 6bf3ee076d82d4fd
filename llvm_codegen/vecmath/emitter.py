"""`kernel_ir.mathlib.emitter.MathEmitter` over llvmlite: the math algorithms as LLVM IR.

`Em(builder, ty)` emits into `builder` for one float type `ty`: `float`, `double` or a vector of
them (`<W x float>`); every primitive works lane-wise, so one function body serves scalars and
every vector width. Integer views (`bits`, `from_bits`) use the same-width integer type (i32
lanes for f32, i64 for f64) so a lane keeps its position under bitcasts.

Only exact operations and explicit `llvm.fma` are used; no fast-math flags, so NaN, infinities
and signed zeros follow IEEE 754 as numpy does. Lanes past the fast reduction can call libm
(`libm_where`: a cold block; the vector lane loop is `lanes_support`'s helper).
"""
from __future__ import annotations

from llvmlite import ir

from kernel_ir.mathlib.emitter import MathEmitter

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


class Em(MathEmitter):
    def __init__(self, b: ir.IRBuilder, ty: ir.Type):
        self.b, self.ty = b, ty
        self.st = scalar_of(ty)
        self.n = lanes_of(ty)
        self.is64 = self.st == F64
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
    def ult(self, a, b): return self.b.fcmp_unordered("<", a, b)
    def uge(self, a, b): return self.b.fcmp_unordered(">=", a, b)
    def or_(self, a, b): return self.b.or_(a, b)
    def and_(self, a, b): return self.b.and_(a, b)
    def not_(self, a): return self.b.not_(a)
    def iadd(self, a, b): return self.b.add(a, b)
    def isub(self, a, b): return self.b.sub(a, b)
    def iand(self, a, b): return self.b.and_(a, b)
    def ixor(self, a, b): return self.b.xor(a, b)
    def ishl(self, a, b): return self.b.shl(a, b)
    def iashr(self, a, b): return self.b.ashr(a, b)
    def ine(self, a, b): return self.b.icmp_unsigned("!=", a, b)
    def ilt(self, a, b): return self.b.icmp_signed("<", a, b)
    def itof(self, i): return self.b.sitofp(i, self.ty)
    def ftoi(self, a): return self.b.fptosi(a, self.ity)

    def widened(self) -> "Em":
        return Em(self.b, ir.VectorType(F64, self.n) if self.n > 1 else F64)

    def fpext(self, a):
        return self.b.fpext(a, self.widened().ty)

    def fptrunc(self, a):
        return self.b.fptrunc(a, self.ty)

    def bits(self, a):
        return self.b.bitcast(a, self.ity)

    def from_bits(self, i):
        return self.b.bitcast(i, self.ty)

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

