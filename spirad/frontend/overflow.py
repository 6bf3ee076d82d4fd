"""Taichi's debug-mode integer overflow checks: under `init(debug=True, check_overflow=True)`
(the default through the Taichi alias: SPIRAD_CHECK_OVERFLOW), a user's `+`, `-`, `*`
and `<<` on integer kernel values prints "Addition overflow detected" (Subtraction /
Multiplication / Shift left) with the source line when the exact result does not fit the
result type, and the kernel goes on with the wrapped value, as Taichi 1.7.4 does.

Why exact tests on the wrapped result rather than a wider type: 64-bit operands have no wider
type on every arch, so each test reads the operands and the result in the result type itself
(two's complement identities; the multiplication test divides only by a divisor that cannot
trap). Without them nothing is added. Off by default in spirad: the checks put a branch and a
print after every integer operation, and spirad's debug mode is for bounds and asserts. Only the operator expressions the user wrote are checked
(`build_BinOp`; not `+=`, as in Taichi's tests), never the index arithmetic spirad emits itself.
"""
from __future__ import annotations

from kernel_ir.nodes import Node
from kernel_ir.ops import Op
from kernel_ir.source import format_loc

NAMES = {Op.ADD: "Addition", Op.SUB: "Subtraction", Op.MUL: "Multiplication",
         Op.SHL: "Shift left"}


def check(v, op, a, b, r, node) -> None:
    """Emit the check of `r = a op b` (kernel values; `r` a scalar node) when debug is on."""
    if not (v.ctx.state.debug and v.ctx.state.options.check_overflow) or op not in NAMES:
        return
    if not isinstance(r, Node) or not r.dtype.is_int:  # vectors, constants, floats: unchecked
        return
    dt = r.dtype
    bld = v.ctx.b
    x = bld.cast(_node(v, a, dt), dt)
    y = bld.cast(_node(v, b, dt), dt)
    bad = _overflows(bld, op, x, y, r, dt)
    from .formatting import emit_text
    with bld.if_(bad) as (then, _):
        with then:
            emit_text(v, node, f"{NAMES[op]} overflow detected in {format_loc(v.ctx.loc(node))}")


def _node(v, a, dt):
    """A kernel node for operand `a` (a Python constant becomes a constant of `dt`)."""
    a = v.rvalue(a)
    return v.ctx.b.const(a, dt) if not hasattr(a, "dtype") else a


def _overflows(bld, op, x, y, r, dt):
    """u1: whether `x op y` (in `dt`) wrapped to `r`."""
    c = lambda val: bld.const(val, dt)  # noqa: E731
    lt, ne, eq = Op.CMP_LT, Op.CMP_NE, Op.CMP_EQ
    signed = dt.is_signed
    if op == Op.ADD:
        if signed:  # both operands' signs differ from the result's
            return bld.binary(lt, bld.binary(Op.AND, bld.binary(Op.XOR, x, r),
                                             bld.binary(Op.XOR, y, r)), c(0))
        return bld.binary(lt, r, x)
    if op == Op.SUB:
        if signed:  # the operands' signs differ and the result's differs from x's
            return bld.binary(lt, bld.binary(Op.AND, bld.binary(Op.XOR, x, y),
                                             bld.binary(Op.XOR, x, r)), c(0))
        return bld.binary(lt, x, y)
    if op == Op.SHL:  # shifting back does not give x (shifts past the width give 0)
        return bld.binary(ne, bld.binary(Op.SHR, r, y), x)
    # MUL: r / x == y exactly when nothing wrapped (|r - x y| would be a multiple of 2^bits
    # smaller than |x|); x == 0 never wraps; x == -1 (signed) wraps only for y == MIN, and is
    # not divided by (MIN / -1 traps)
    trivial = bld.binary(eq, x, c(0))
    if signed:
        minus1 = bld.binary(eq, x, c(-1))
        trivial = bld.binary(Op.OR, trivial, minus1)
    safe = bld.select(trivial, c(1), x)
    bad = bld.binary(Op.AND, bld.unary(Op.NOT, trivial),
                     bld.binary(ne, bld.binary(Op.FLOORDIV, r, safe), y))
    if signed:
        least = -(1 << (dt.bits - 1))
        bad = bld.binary(Op.OR, bad, bld.binary(Op.AND, minus1, bld.binary(eq, y, c(least))))
    return bad
