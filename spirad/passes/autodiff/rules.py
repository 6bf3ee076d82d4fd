"""Derivative rules: one entry per op, `VJP_RULES[op](e, adj, x, out) -> [adjoint per source]`.

`e` is an `Emit` helper (it appends nodes to the reverse code), `adj` the adjoint of the op's
result, `x` the recomputed primal sources and `out` the recomputed primal result. An entry in the
returned list is None where that source gets no adjoint (integers, conditions). An op that is not
in the table and has a float result raises a clear "not differentiable" error.
"""
from __future__ import annotations

from kernel_ir.ops import Op


def _lin(*signs):
    def rule(e, a, x, out):
        return [a if s > 0 else e.neg(a) for s in signs]
    return rule


def _known(v) -> bool:
    """False for a primal the adjoint pass did not recompute (its partner cannot vary)."""
    return hasattr(v, "op")


def _mul(e, a, x, out):
    return [e.mul(a, x[1]) if _known(x[1]) else None, e.mul(a, x[0]) if _known(x[0]) else None]


def _div(e, a, x, out):
    # out = x0 / x1: d/dx0 = 1/x1, d/dx1 = -out/x1
    return [e.div(a, x[1]), e.neg(e.div(e.mul(a, out), x[1])) if _known(out) else None]


def _pow(e, a, x, out):
    # d/dx0 = x1 * x0^(x1-1); d/dx1 = out * log(x0) (only where x0 > 0)
    b, ex = x
    d0 = e.mul(a, e.mul(ex, e.op(Op.POW, b, e.sub(ex, e.const(1.0, b.dtype)))))
    pos = e.cmp(Op.CMP_GT, b, e.const(0.0, b.dtype))
    safe = e.select(pos, b, e.const(1.0, b.dtype))
    d1 = e.select(pos, e.mul(a, e.mul(out, e.op(Op.LOG, safe))), e.const(0.0, b.dtype))
    return [d0, d1]


def _atan2(e, a, x, out):
    y, xx = x
    r2 = e.add(e.mul(xx, xx), e.mul(y, y))
    return [e.div(e.mul(a, xx), r2), e.neg(e.div(e.mul(a, y), r2))]


def _minmax(cmp):
    def rule(e, a, x, out):
        # the gradient goes to the operand that won (ties: the first)
        first = e.cmp(cmp, x[0], x[1])
        z = e.const(0.0, a.dtype)
        return [e.select(first, a, z), e.select(first, z, a)]
    return rule


def _unary(fn):
    def rule(e, a, x, out):
        return [e.mul(a, fn(e, x[0], out))]
    return rule


def _select(e, a, x, out):
    z = e.const(0.0, a.dtype)
    return [None, e.select(x[0], a, z), e.select(x[0], z, a)]


def _cast(e, a, x, out):
    src = x[0].dtype
    return [e.cast(a, src) if src.is_float else None]


def _abs(e, x, out):
    one, m1 = e.const(1.0, x.dtype), e.const(-1.0, x.dtype)
    return e.select(e.cmp(Op.CMP_GE, x, e.const(0.0, x.dtype)), one, m1)


def _zero_safe(rule):
    """`rule` whose contributions are 0 where the adjoint is 0: ops whose derivative can be
    infinite or NaN (sqrt or log at 0, division by 0, pow, asin / acos at +-1) would otherwise
    give 0 * inf = NaN for a value that does not reach the loss, as the branch `select` drops
    in `sd.select(x > 0, sd.sqrt(x), 0)` (NaN there in Taichi and JAX). A non-zero (or NaN)
    adjoint still meets the derivative, so a singular value that reaches the loss still gives
    inf / NaN."""
    def safe(e, a, x, out):
        gs = rule(e, a, x, out)
        if not any(g is not None for g in gs):
            return gs
        zero = e.const(0.0, a.dtype)
        dead = e.cmp(Op.CMP_EQ, a, zero)
        return [None if g is None else e.select(dead, zero, g) for g in gs]
    return safe


VJP_RULES = {
    Op.ADD: _lin(1, 1), Op.SUB: _lin(1, -1), Op.NEG: _lin(-1), Op.MUL: _mul,
    Op.DIV: _zero_safe(_div), Op.POW: _zero_safe(_pow), Op.ATAN2: _zero_safe(_atan2),
    Op.MIN: _minmax(Op.CMP_LE), Op.MAX: _minmax(Op.CMP_GE),
    Op.SELECT: _select, Op.CAST: _cast,
    Op.SIN: _unary(lambda e, x, o: e.op(Op.COS, x)),
    Op.COS: _unary(lambda e, x, o: e.neg(e.op(Op.SIN, x))),
    Op.TAN: _unary(lambda e, x, o: e.add(e.const(1.0, x.dtype), e.mul(o, o))),
    Op.TANH: _unary(lambda e, x, o: e.sub(e.const(1.0, x.dtype), e.mul(o, o))),
    Op.ASIN: _zero_safe(_unary(lambda e, x, o: e.op(Op.RSQRT, e.sub(e.const(1.0, x.dtype),
                                                                     e.mul(x, x))))),
    Op.ACOS: _zero_safe(_unary(lambda e, x, o: e.neg(e.op(Op.RSQRT, e.sub(e.const(1.0, x.dtype),
                                                                           e.mul(x, x)))))),
    Op.EXP: _unary(lambda e, x, o: o),
    Op.LOG: _zero_safe(_unary(lambda e, x, o: e.div(e.const(1.0, x.dtype), x))),
    Op.SQRT: _zero_safe(_unary(lambda e, x, o: e.div(e.const(0.5, x.dtype), o))),
    Op.RSQRT: _zero_safe(_unary(lambda e, x, o: e.mul(e.const(-0.5, x.dtype), e.div(o, x)))),
    Op.ABS: _unary(_abs),
    Op.FLOOR: _unary(lambda e, x, o: e.const(0.0, x.dtype)),
    Op.MOD: lambda e, a, x, out: [a, e.neg(e.mul(a, e.op(Op.FLOOR, e.div(x[0], x[1]))))],
    Op.FLOORDIV: lambda e, a, x, out: [e.const(0.0, a.dtype), e.const(0.0, a.dtype)],
}
