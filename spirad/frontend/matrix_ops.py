"""Vector / matrix methods and products Quadrants programs use beyond Taichi's basics:
`m.fill(x)`, `v.any()`, `v.all()`, `v @ w` (the dot product), `v @ m` (a row vector times a
matrix) and `sd.math.outer(a, b)`. Registered into `expr.VEC_METHODS`; `matmul` is called by
`ExprVisitor.matmul` for the vector cases."""
from __future__ import annotations

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradTypeError
from kernel_ir.ops import Op
from .values import GlobalElem, Slot, SlotView, VecVal


def _m_fill(v, obj, args, node):
    """`x.fill(value)`: every component of a local, a view of one or a field element."""
    if len(args) != 1:
        raise v.ctx.error(SpiradTypeError, "fill(value) takes one value", node)
    if not isinstance(obj, (Slot, SlotView, GlobalElem)):
        raise v.ctx.error(SpiradTypeError, "fill() needs a local variable or a field element", node)
    v.store_into(obj, v.rvalue(args[0]))


def _reduce_bool(op, what):
    def m(v, obj, args, node):
        if args:
            raise v.ctx.error(SpiradTypeError, f"{what}() takes no arguments", node)
        comps = v.rvalue(obj).comps
        acc = v.to_cond(comps[0])
        for c in comps[1:]:
            acc = v.ctx.b.binary(op, acc, v.to_cond(c))
        return acc
    return m


def matmul_vectors(v, a: VecVal, b: VecVal, node):
    """`a @ b` where one side is a vector: vec @ vec is the dot product, vec @ mat a row vector
    times the matrix. Returns None for the matrix cases (handled by the caller)."""
    sa, sb = a.shape, b.shape
    if len(sa) == 1 and len(sb) == 1:
        if sa != sb:
            raise v.ctx.error(SpiradTypeError, f"@ shape mismatch {sa} @ {sb}", node)
        return v._dot(a.comps, b.comps)
    if len(sa) == 1 and len(sb) == 2:
        if sa[0] != sb[0]:
            raise v.ctx.error(SpiradTypeError, f"@ shape mismatch {sa} @ {sb}", node)
        return VecVal(tuple(v._dot(a.comps, b.comps[c::sb[1]]) for c in range(sb[1])), (sb[1],))
    return None


def outer(v, a, b, node):
    """`sd.math.outer(a, b)` / `a.outer_product(b)`: the matrix a_i b_j."""
    a, b = v.rvalue(a), v.rvalue(b)
    if not (isinstance(a, VecVal) and isinstance(b, VecVal) and len(a.shape) == len(b.shape) == 1):
        raise v.ctx.error(SpiradTypeError, "outer(a, b) needs two vectors", node)
    comps = tuple(v.binop(Op.MUL, x, y) for x in a.comps for y in b.comps)
    return VecVal(comps, (a.shape[0], b.shape[0]))


METHODS = {"fill": _m_fill, "any": _reduce_bool(Op.OR, "any"), "all": _reduce_bool(Op.AND, "all")}
