"""Derivative rules: one record per op, read by reverse mode (`VJP_RULES`, autodiff/adjoint.py)
and forward mode (`JVP_RULES`, forward_mode.py), so the two modes cannot disagree.

A record gives, per source of the op, the *linear map* its derivative applies to a seed — an
adjoint in reverse mode, a tangent in forward mode (for one scalar op both are the same map):

    Derivative(partials, linear=False, reads=..., uses_out=...)
    partials(e, x, out) -> (map or None per source)       map(e, v, to) -> node

`e` is an `Emit` (kernel_ir.builder), `x` the op's primal sources and `out` its result; a map
receives the seed `v` and the dtype `to` of what it must return (the source's dtype in reverse
mode, the result's in forward mode: they differ only for CAST). None: no derivative flows to
that source (integers, conditions, zero derivatives). Two maps are recognised by the modes:
`IDENTITY` (the seed itself: ADD) and `NEGATE` (its negation: SUB's right side, where forward
mode emits one subtraction); a `Route(cond, first)` passes the seed where `cond` holds (or
where it does not), else 0 — forward mode merges the routes of one condition into one select
(MIN / MAX / SELECT).

    VJP_RULES[op](e, adj, x, out) -> [adjoint per source]
    JVP_RULES[op](e, x, tangents, out) -> tangent (None: zero)

Reverse mode also asks the record which primals it must recompute: `reads(k, srcs, varying)`
(the map of source k reads the primal of source k's partner or itself; `varying(n)`: can an
adjoint flow out of n) and `uses_out(srcs, varying)` (a map reads the result), and treats
`linear` ops (ADD, SUB, NEG, CAST) as reading nothing when it decides which locals need an
adstack. A `singular` op (its derivative can be inf or NaN: sqrt or log at 0, division by 0,
pow, atan2 at the origin, asin / acos at +-1) contributes 0 where its seed is 0, in both modes. The float math functions (sin, exp, log1p, ...) get their records from
`kernel_ir.mathfns`, where each function's slope sits next to its definition. Conventions at
kinks: min / max give the first operand on a tie, abs' slope is sign(x) — 0 at +-0, as Taichi's
(its adjoint and its tangent of abs both multiply by sgn(x)) — floor's is 0, pow's derivative in
the exponent is taken only where the base is positive.
"""
from __future__ import annotations

from typing import Callable

from kernel_ir.mathfns import MATH
from kernel_ir.ops import Op


def IDENTITY(e, v, to):
    return v


def NEGATE(e, v, to):
    return e.neg(v)


class Route:
    """The seed where `cond` holds (first=True) or where it does not (first=False), else 0."""
    __slots__ = ("cond", "first")

    def __init__(self, cond, first: bool):
        self.cond, self.first = cond, first

    def __call__(self, e, v, to):
        z = e.const(0.0, v.dtype)
        return e.select(self.cond, v, z) if self.first else e.select(self.cond, z, v)


def _all_read(k, srcs, varying) -> bool:
    return True


def _none_read(k, srcs, varying) -> bool:
    return False


def _no_out(srcs, varying) -> bool:
    return False


def _out(srcs, varying) -> bool:
    return True


class Derivative:
    """One op's record (the module). A plain class, not a dataclass: this module is imported at
    a process's first gradient compile, and making two dataclasses there (their generated
    methods are compiled with exec) took about 1 ms of it."""
    __slots__ = ("partials", "linear", "reads", "uses_out", "singular")

    def __init__(self, partials: Callable, linear: bool = False, reads: Callable = _all_read,
                 uses_out: Callable = _no_out, singular: bool = False):
        self.partials = partials
        self.linear = linear
        self.reads = reads
        self.uses_out = uses_out
        self.singular = singular  # the derivative can be inf / NaN (sqrt or log at 0, x / 0)

    def vjp(self, e, adj, x, out):
        gs = [None if m is None else m(e, adj, s.dtype)
              for m, s in zip(self.partials(e, x, out), x)]
        if not self.singular or all(g is None for g in gs):
            return gs
        zero = e.const(0.0, adj.dtype)
        dead = e.cmp(Op.CMP_EQ, adj, zero)
        return [None if g is None else e.select(dead, zero, g) for g in gs]

    def jvp(self, e, x, t, out):
        maps = self.partials(e, x, out)
        if self.singular:
            maps = tuple(None if m is None else _zero_safe(m) for m in maps)
        terms = [(m, v) for m, v in zip(maps, t) if m is not None and v is not None]
        routes = [m for m, _ in terms if isinstance(m, Route)]
        if routes and len(routes) == len(terms) and len({id(r.cond) for r in routes}) == 1:
            z = e.const(0.0, out.dtype)  # routes of one condition: one select
            first = next((v for m, v in terms if m.first), z)
            second = next((v for m, v in terms if not m.first), z)
            return e.select(routes[0].cond, first, second)
        acc = None
        for m, v in terms:
            if m is NEGATE:
                acc = e.neg(v) if acc is None else e.sub(acc, v)
            else:
                d = m(e, v, out.dtype)
                acc = d if acc is None else e.add(acc, d)
        return acc


def _zero_safe(m):
    """A singular op's map giving 0 for a zero seed: a value that does not reach the result
    (the branch `select` drops in `sd.select(x > 0, sd.sqrt(x), 0)`) must not turn a zero seed
    into 0 * inf = NaN (Taichi and JAX give NaN there); a non-zero seed still meets the
    derivative, so a singular value that reaches the result still gives inf / NaN."""
    def safe(e, v, to):
        g = m(e, v, to)
        zero = e.const(0.0, g.dtype)
        return e.select(e.cmp(Op.CMP_EQ, v, e.const(0.0, v.dtype)), zero, g)
    return safe


def _known(v) -> bool:
    """False for a primal reverse mode did not recompute (`reads` said it is not needed)."""
    return hasattr(v, "op")


def _unary(slope):
    """A function of one operand with derivative `slope(e, x, out)`: the seed times it."""
    return lambda e, x, out: (lambda e, v, to: e.mul(v, slope(e, x[0], out)),)


def constant_zero(v) -> bool:
    """A factor that is the constant 0 (or -0): the product's derivative with respect to the
    other factor is exactly zero, so no derivative flows there (as in Taichi, whose
    simplifier folds `0 * a` under its default fast_math). Only the derivative is dropped; the
    forward product keeps IEEE semantics (0 * inf is NaN). Why: DiffTaichi's `wave` multiplies
    a five-point stencil by `c * alpha * dt` with alpha = 0; its adjoint added the zero products
    into five neighbours per cell with atomics (on lavapipe: 1.7x the reverse kernel's time).
    What changes: a non-finite seed met by a constant zero no longer gives NaN there."""
    return _known(v) and v.op == Op.CONST and v.arg == 0


def _mul(e, x, out):
    return (lambda e, v, to: e.mul(v, x[1])) if _known(x[1]) and not constant_zero(x[1]) \
        else None, \
        (lambda e, v, to: e.mul(v, x[0])) if _known(x[0]) and not constant_zero(x[0]) else None


def _div(e, x, out):  # out = x0 / x1: d/dx0 = 1/x1, d/dx1 = -out/x1
    return (lambda e, v, to: e.div(v, x[1])), \
           (lambda e, v, to: e.neg(e.div(e.mul(v, out), x[1]))) if _known(out) else None


def _pow(e, x, out):  # d/dx0 = x1 * x0^(x1-1); d/dx1 = out * log(x0) (only where x0 > 0)
    b, ex = x

    def d_exp(e, v, to):
        pos = e.cmp(Op.CMP_GT, b, e.const(0.0, b.dtype))
        safe = e.select(pos, b, e.const(1.0, b.dtype))
        return e.select(pos, e.mul(v, e.mul(out, e.op(Op.LOG, safe))), e.const(0.0, b.dtype))
    return (lambda e, v, to: e.mul(v, e.mul(ex, e.op(Op.POW, b, e.sub(ex, e.const(1.0, b.dtype)))))), \
        d_exp


def _atan2(e, x, out):  # atan2(y, x): dy * x / r2 - dx * y / r2
    y, xx = x
    r2 = e.add(e.mul(xx, xx), e.mul(y, y))
    return (lambda e, v, to: e.div(e.mul(v, xx), r2)), \
           (lambda e, v, to: e.neg(e.div(e.mul(v, y), r2)))


def _minmax(cmp):
    def partials(e, x, out):  # the derivative goes to the operand that won (ties: the first)
        first = e.cmp(cmp, x[0], x[1])
        return Route(first, True), Route(first, False)
    return partials


def _mod(e, x, out):  # a mod b = a - floor(a / b) * b
    return IDENTITY, lambda e, v, to: e.neg(e.mul(v, e.op(Op.FLOOR, e.div(x[0], x[1]))))


def _abs_slope(e, x, out):
    """sign(x): 1, -1, or 0 at +-0 (and NaN) — Taichi's slope of abs in both modes."""
    zero = e.const(0.0, x.dtype)
    neg = e.select(e.cmp(Op.CMP_LT, x, zero), e.const(-1.0, x.dtype), zero)
    return e.select(e.cmp(Op.CMP_GT, x, zero), e.const(1.0, x.dtype), neg)


def _mul_reads(k, srcs, varying) -> bool:  # d/dx0 = x1, d/dx1 = x0: x_k matters if the other varies
    return varying(srcs[1 - k])


def _div_reads(k, srcs, varying) -> bool:  # d/dx0 = 1/x1, d/dx1 = -out/x1
    return k == 1 or varying(srcs[1])


def _div_out(srcs, varying) -> bool:
    return varying(srcs[1])


def _zero(n):
    return lambda e, x, out: (None,) * n


DERIVATIVES = {
    Op.ADD: Derivative(lambda e, x, out: (IDENTITY, IDENTITY), linear=True, reads=_none_read),
    Op.SUB: Derivative(lambda e, x, out: (IDENTITY, NEGATE), linear=True, reads=_none_read),
    Op.NEG: Derivative(lambda e, x, out: (NEGATE,), linear=True, reads=_none_read),
    Op.CAST: Derivative(lambda e, x, out: ((lambda e, v, to: e.cast(v, to))
                                           if x[0].dtype.is_float else None,),
                        linear=True, reads=_none_read),
    Op.MUL: Derivative(_mul, reads=_mul_reads),
    Op.DIV: Derivative(_div, reads=_div_reads, uses_out=_div_out, singular=True),
    Op.POW: Derivative(_pow, uses_out=_out, singular=True),
    Op.ATAN2: Derivative(_atan2, singular=True),
    Op.MIN: Derivative(_minmax(Op.CMP_LE)),
    Op.MAX: Derivative(_minmax(Op.CMP_GE)),
    Op.SELECT: Derivative(lambda e, x, out: (None, Route(x[0], True), Route(x[0], False)),
                          reads=lambda k, srcs, varying: k == 0),
    Op.MOD: Derivative(_mod),
    Op.ABS: Derivative(_unary(_abs_slope)),
    Op.FLOOR: Derivative(_zero(1)),
    Op.STOP_GRAD: Derivative(_zero(1)),
    Op.BITCAST: Derivative(_zero(1)),  # one side is an integer: no derivative flows (Taichi's)
    Op.FLOORDIV: Derivative(_zero(2)),
    **{f.op: Derivative(_unary(f.slope), uses_out=_out if f.uses_out else _no_out,
                        singular=f.singular) for f in MATH},
}

VJP_RULES = {op: d.vjp for op, d in DERIVATIVES.items()}
JVP_RULES = {op: d.jvp for op, d in DERIVATIVES.items()}
LINEAR = frozenset(op for op, d in DERIVATIVES.items() if d.linear)
