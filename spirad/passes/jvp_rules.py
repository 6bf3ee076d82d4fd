"""Forward-mode derivative rules: one entry per op, `JVP_RULES[op](e, x, t, out) -> tangent`.

`e` is an `Emit` helper (it appends nodes next to the primal op), `x` the op's primal sources,
`t` their tangents — None where a tangent is zero (integers, constants, values no dual reaches) —
and `out` the primal result. A rule returns the result's tangent, or None for zero. At least one
entry of `t` is not None when a rule is called. An op with a float result that is not in the
table raises a clear "not differentiable in forward mode" error (`passes/forward_mode`).

The rules mirror the reverse-mode table (`passes/autodiff/rules.py`) — same derivatives, same
conventions at kinks (min / max give the first operand on a tie, abs' slope at 0 is 1, floor's is
0, pow's derivative in the exponent is taken only where the base is positive) — so forward and
reverse mode agree on every kernel.
"""
from __future__ import annotations

from kernel_ir.ops import Op


def _plus(e, a, b):
    """a + b with None as zero."""
    if a is None:
        return b
    if b is None:
        return a
    return e.add(a, b)


def _times(e, t, f):
    """t * f with None as zero (`f` is built only when `t` is not None: pass a thunk)."""
    return None if t is None else e.mul(t, f())


def _add(e, x, t, out):
    return _plus(e, t[0], t[1])


def _sub(e, x, t, out):
    if t[1] is None:
        return t[0]
    return e.neg(t[1]) if t[0] is None else e.sub(t[0], t[1])


def _neg(e, x, t, out):
    return e.neg(t[0])


def _mul(e, x, t, out):
    return _plus(e, _times(e, t[0], lambda: x[1]), _times(e, t[1], lambda: x[0]))


def _div(e, x, t, out):
    # d(a / b) = da / b - out * db / b
    da = None if t[0] is None else e.div(t[0], x[1])
    db = None if t[1] is None else e.neg(e.div(e.mul(out, t[1]), x[1]))
    return _plus(e, da, db)


def _pow(e, x, t, out):
    b, ex = x
    one, zero = e.const(1.0, b.dtype), e.const(0.0, b.dtype)
    d0 = _times(e, t[0], lambda: e.mul(ex, e.op(Op.POW, b, e.sub(ex, one))))
    d1 = None
    if t[1] is not None:
        pos = e.cmp(Op.CMP_GT, b, zero)
        safe = e.select(pos, b, one)
        d1 = e.select(pos, e.mul(t[1], e.mul(out, e.op(Op.LOG, safe))), zero)
    return _plus(e, d0, d1)


def _atan2(e, x, t, out):
    # atan2(y, x): dy * x / r2 - dx * y / r2
    y, xx = x
    r2 = e.add(e.mul(xx, xx), e.mul(y, y))
    dy = _times(e, t[0], lambda: e.div(xx, r2))
    dx = None if t[1] is None else e.neg(e.mul(t[1], e.div(y, r2)))
    return _plus(e, dy, dx)


def _minmax(cmp):
    def rule(e, x, t, out):
        first = e.cmp(cmp, x[0], x[1])  # ties: the first operand, as in reverse mode
        z = e.const(0.0, out.dtype)
        return e.select(first, t[0] if t[0] is not None else z, t[1] if t[1] is not None else z)
    return rule


def _mod(e, x, t, out):
    # a mod b = a - floor(a / b) * b
    db = None if t[1] is None else e.neg(e.mul(t[1], e.op(Op.FLOOR, e.div(x[0], x[1]))))
    return _plus(e, t[0], db)


def _select(e, x, t, out):
    z = e.const(0.0, out.dtype)
    return e.select(x[0], t[1] if t[1] is not None else z, t[2] if t[2] is not None else z)


def _cast(e, x, t, out):
    return e.cast(t[0], out.dtype) if x[0].dtype.is_float and out.dtype.is_float else None


def _unary(slope):
    def rule(e, x, t, out):
        return e.mul(t[0], slope(e, x[0], out))
    return rule


def _abs(e, x, out):
    return e.select(e.cmp(Op.CMP_GE, x, e.const(0.0, x.dtype)), e.const(1.0, x.dtype),
                    e.const(-1.0, x.dtype))


def _zero(e, x, t, out):
    return None


JVP_RULES = {
    Op.ADD: _add, Op.SUB: _sub, Op.NEG: _neg, Op.MUL: _mul, Op.DIV: _div, Op.POW: _pow,
    Op.ATAN2: _atan2, Op.MIN: _minmax(Op.CMP_LE), Op.MAX: _minmax(Op.CMP_GE), Op.MOD: _mod,
    Op.SELECT: _select, Op.CAST: _cast, Op.FLOOR: _zero, Op.FLOORDIV: _zero,
    Op.SIN: _unary(lambda e, x, o: e.op(Op.COS, x)),
    Op.COS: _unary(lambda e, x, o: e.neg(e.op(Op.SIN, x))),
    Op.TAN: _unary(lambda e, x, o: e.add(e.const(1.0, x.dtype), e.mul(o, o))),
    Op.TANH: _unary(lambda e, x, o: e.sub(e.const(1.0, x.dtype), e.mul(o, o))),
    Op.ASIN: _unary(lambda e, x, o: e.op(Op.RSQRT, e.sub(e.const(1.0, x.dtype), e.mul(x, x)))),
    Op.ACOS: _unary(lambda e, x, o: e.neg(e.op(Op.RSQRT, e.sub(e.const(1.0, x.dtype), e.mul(x, x))))),
    Op.EXP: _unary(lambda e, x, o: o),
    Op.LOG: _unary(lambda e, x, o: e.div(e.const(1.0, x.dtype), x)),
    Op.SQRT: _unary(lambda e, x, o: e.div(e.const(0.5, x.dtype), o)),
    Op.RSQRT: _unary(lambda e, x, o: e.mul(e.const(-0.5, x.dtype), e.div(o, x))),
    Op.ABS: _unary(_abs),
}
