"""`a if c else b` in kernels: only the chosen side runs, as in Taichi (`ifte`).

Taichi evaluates a conditional expression with a scalar condition as an if / else; evaluating
both sides and selecting reads (and, in the adjoint, writes gradients to) elements the condition
was written to avoid: DiffTaichi's `wave` guards `p[t, i, j] if 0 <= i < n ... else 0`, and its
adjoint then added into `p.grad[t, -1, j]`, outside the field (a crash on the CPU). So each side
is built into a region of its own: a side made only of pure ops and local loads is moved in front
(no IF: a `select`, as cheap as before, with nothing for reverse mode to keep); otherwise the
sides become an IF whose arms store their values into fresh locals, selected after it. A vector
condition selects element-wise with both sides evaluated (Taichi's `ti.select`).
"""
from __future__ import annotations

from kernel_ir.nodes import Block, Node, walk
from kernel_ir.ops import PURE, Op

from .values import VecVal


def build_conditional(v, node, c):
    """The value of the conditional expression `node` whose condition has the (kernel) value
    `c` (`v`: the expression visitor)."""
    return conditional_value(v, c, lambda: v.build(node.body), lambda: v.build(node.orelse))


def conditional_value(v, c, then, orelse):
    """`then() if c else orelse()` where only the chosen side's code runs: `then` / `orelse`
    build a side's value when called (also Python's `and` / `or` with
    short_circuit_operators=True, boolops.py)."""
    if isinstance(c, VecVal):
        return v.select(c, then(), orelse())
    b = v.ctx.b
    cond = v.to_cond(c)
    sides = []
    for side in (then, orelse):
        with b.region() as out:
            val = v.rvalue(side())
        sides.append((out[0], val))
    if all(_hoistable(block) for block, _ in sides):
        for block, _ in sides:
            for n in block.nodes:
                b.append(n)
        return v.select(c, sides[0][1], sides[1][1])
    arms, vals = [], []
    for block, val in sides:
        stores = []
        vals.append(_spill(b, val, stores))
        arms.append(Block(block.nodes + tuple(stores)))
    b.emit(Op.IF, None, (cond,), None, tuple(arms))
    return v.select(c, *(_unspill(b, x) for x in vals))


def _hoistable(block: Block) -> bool:
    return all(n.op in PURE or n.op == Op.LOAD for n in walk(block))


def _spill(b, val, stores):
    """`val` with every IR value replaced by a fresh local (declared in front of the IF) that
    `stores` (appended to the arm) fills."""
    if isinstance(val, Node):
        slot = b.alloca(val.dtype, "if_value")
        stores.append(Node(Op.STORE, None, (slot, val), None, (), b.loc))
        return slot
    if isinstance(val, VecVal):
        return VecVal(tuple(_spill(b, x, stores) for x in val.comps), val.shape)
    if isinstance(val, (tuple, list)):
        return tuple(_spill(b, x, stores) for x in val)
    return val  # a Python number (or what `select` then refuses)


def _unspill(b, val):
    if isinstance(val, Node):
        return b.load(val)
    if isinstance(val, VecVal):
        return VecVal(tuple(_unspill(b, x) for x in val.comps), val.shape)
    if isinstance(val, tuple):
        return tuple(_unspill(b, x) for x in val)
    return val
