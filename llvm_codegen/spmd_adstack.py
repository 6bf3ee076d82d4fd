"""Adstacks and atomics of reverse-mode range tasks in SPMD lanes (`llvm_codegen.spmd`).

Why this works with one entry count per stack: an SPMD task's control flow is uniform (every
IF condition and loop bound is the same in all lanes), so every lane pushes and pops the same
stacks the same number of times; the count, the capacity test and hence overflow detection stay
scalar and exact (a lane overflows exactly when all do, at the same push as the scalar path).

Heap layout (DESIGN §4 allows it): a worker of a W-lane task owns W heap rows, laid out
lane-interleaved: byte offsets and strides of the sizer's layout are scaled by W, and entry j of
lane l of a stack is element `j*W + l` of its region, so a push of W lanes is one vector store
and a top read one vector load. The CPU backend sizes the heap for `workers * W` rows
(`spirad.backends.cpu`). `setup_adstacks` does the scaling (`lower_adstack.lanes_of`).

A stack is *varying* (`spmd.analyze`) when a varying value is pushed or accumulated into it;
its LOAD_TOP / LOAD_TOP_ADJ results are then varying too. A uniform stack (e.g. a loop bound
saved for the reverse loop) keeps the scalar rules and uses lane 0's slots only, so a RANGE_FOR
bound read back from it stays uniform. With cap == 0 the vector reads are masked loads under an
all-false mask (they read no memory and give 0), matching the scalar rule's 0.

ATOMIC_ADD on lanes (`spmd._spmd_atomic_add`) runs lane by lane in lane order.
"""
from __future__ import annotations

from llvmlite import ir

from kernel_ir.ops import Op

from .lltypes import I32, I64, PTR, mem_type, reg_type
from .splat import zeros
from .lower_adstack import LOWER_ADSTACK, _entry_ptr, _heap_adjoints, _overflow_helper, \
    _stack, _top_index
from .lower_ops import convert


def _vec_to_mem(ctx, v, dt):
    if dt.is_bool:
        return ctx.b.zext(v, ir.VectorType(I32, ctx.width))
    return v


def vec_from_mem(ctx, v, dt):
    if dt.is_bool:
        zero = zeros(ir.VectorType(I32, ctx.width))
        return ctx.b.icmp_unsigned("!=", v, zero)
    return v


def _varying(ctx, n):
    return n.srcs[0] in ctx.varying


def _elem(t):
    if isinstance(t, ir.FloatType):
        return "f32", 4
    if isinstance(t, ir.DoubleType):
        return "f64", 8
    return f"i{t.width}", t.width // 8


def _vstore(ctx, v, p):
    ctx.b.store(v, p, align=_elem(v.type.element)[1])


def _push(ctx, n):
    if not _varying(ctx, n):
        return LOWER_ADSTACK[Op.ADSTACK_PUSH](ctx, n)
    s, b, w = _stack(ctx, n), ctx.b, ctx.width
    cnt = b.load(s.count, typ=I64)
    full = b.icmp_unsigned(">=", cnt, s.cap)
    ovf, ok, merge = ctx.block("ad.overflow"), ctx.block("ad.push"), ctx.block("ad.pushed")
    b.cbranch(full, ovf, ok).set_weights([1, 1 << 20])
    b.position_at_end(ovf)
    st = ctx.adstack
    b.call(_overflow_helper(ctx), [st.status, ir.Constant(I32, st.task_index),
                                   ir.Constant(I32, s.index)])
    b.branch(merge)
    b.position_at_end(ok)
    v = convert(ctx, ctx.value(n.srcs[1]), n.srcs[1].dtype, s.dtype)
    _vstore(ctx, _vec_to_mem(ctx, v, s.dtype), _entry_ptr(ctx, s.entries, cnt, s.dtype, w))
    if s.adjoints is not None:
        zero = zeros(ir.VectorType(mem_type(s.dtype), w))
        _vstore(ctx, zero, _entry_ptr(ctx, s.adjoints, cnt, s.dtype, w))
    b.store(b.add(cnt, ir.Constant(I64, 1), flags=["nuw"]), s.count)
    b.branch(merge)
    b.position_at_end(merge)


def _read_top(ctx, s, base, node_dtype):
    """All lanes of entry max(count-1, 0); 0 when cap == 0 (an all-false masked load)."""
    b, w = ctx.b, ctx.width
    mt = mem_type(s.dtype)
    vt = ir.VectorType(mt, w)
    p = _entry_ptr(ctx, base, _top_index(ctx, s), s.dtype, w)
    mask = ctx.broadcast(b.not_(s.empty_cap))
    sfx, align = _elem(mt)
    fn = ctx.lib.declare(f"llvm.masked.load.v{w}{sfx}.p0", vt, [PTR, I32, mask.type, vt])
    v = b.call(fn, [p, ir.Constant(I32, align), mask, zeros(vt)])
    return convert(ctx, vec_from_mem(ctx, v, s.dtype), s.dtype, node_dtype or s.dtype)


def _load_top(ctx, n):
    if not _varying(ctx, n):
        return LOWER_ADSTACK[Op.ADSTACK_LOAD_TOP](ctx, n)
    s = _stack(ctx, n)
    return _read_top(ctx, s, s.entries, n.dtype)


def _load_top_adj(ctx, n):
    s = _stack(ctx, n)
    if not _varying(ctx, n) or not s.dtype.is_float:
        return LOWER_ADSTACK[Op.ADSTACK_LOAD_TOP_ADJ](ctx, n)
    _heap_adjoints(s, n)
    return _read_top(ctx, s, s.adjoints, n.dtype)


def _acc_adj(ctx, n):
    if not _varying(ctx, n):
        return LOWER_ADSTACK[Op.ADSTACK_ACC_ADJ](ctx, n)
    s, b, w = _stack(ctx, n), ctx.b, ctx.width
    _heap_adjoints(s, n)
    write, merge = ctx.block("ad.acc"), ctx.block("ad.accd")
    b.cbranch(s.empty_cap, merge, write)
    b.position_at_end(write)
    p = _entry_ptr(ctx, s.adjoints, _top_index(ctx, s), s.dtype, w)
    align = _elem(mem_type(s.dtype))[1]
    old = b.load(p, typ=reg_type(s.dtype), align=align)
    _vstore(ctx, b.fadd(old, convert(ctx, ctx.value(n.srcs[1]), n.srcs[1].dtype, s.dtype)), p)
    b.branch(merge)
    b.position_at_end(merge)


SPMD_ADSTACK_RULES = {
    Op.ADSTACK_PUSH: _push, Op.ADSTACK_LOAD_TOP: _load_top,
    Op.ADSTACK_LOAD_TOP_ADJ: _load_top_adj, Op.ADSTACK_ACC_ADJ: _acc_adj,
}
