"""Adstacks and atomics of reverse-mode range tasks in SPMD lanes (`llvm_codegen.spmd`).

Why one entry count per stack mostly suffices: where a stack's pushes and pops all run under
uniform control (every IF condition and loop bound around them the same in all lanes), every
lane pushes and pops it the same number of times; the count, the capacity test and hence
overflow detection stay scalar and exact (a lane overflows exactly when all do, at the same push
as the scalar path). A stack pushed or popped under a partial mask (`spmd_control`: a per-lane
trip count, a branch that differs between lanes) instead has a `<W x i64>` count
(`setup_lane_counts`, `Analysis.lane_stacks`): a push is a masked scatter at each active lane's
own entry, a pop decrements the active lanes' non-zero counts, a top read is a masked gather; an
active lane at capacity records the overflow through the scalar path's helper (same task and
stack) and writes nothing.

Heap layout (DESIGN §4 allows it): a worker of a W-lane task owns W heap rows, laid out
lane-interleaved: byte offsets and strides of the sizer's layout are scaled by W, and entry j of
lane l of a stack is element `j*W + l` of its region, so a push of W lanes at one count is one
vector store and a top read one vector load. The CPU backend sizes the heap for `workers * W`
rows (`spirad.backends.cpu`). `setup_adstacks` does the scaling (`lower_adstack.lanes_of`).

A stack is *varying* (`spmd.analyze`) when a varying value is pushed or accumulated into it or
an op on it runs under a partial mask; its LOAD_TOP / LOAD_TOP_ADJ results are then varying
too. A uniform stack (e.g. a loop bound saved for the reverse loop) keeps the scalar rules and
uses lane 0's slots only, so a RANGE_FOR bound read back from it stays uniform. With cap == 0
the vector reads are masked loads / gathers under an all-false mask (they read no memory and
give 0), matching the scalar rule's 0.

ATOMIC_ADD on lanes (`spmd._spmd_atomic_add`) runs lane by lane in lane order.
"""
from __future__ import annotations

from llvmlite import ir

from kernel_ir.ops import Op

from .lltypes import I32, I64, PTR, mem_type, reg_type
from .context import entry_alloca
from .lower_adstack import LOWER_ADSTACK, _entry_ptr, _heap_adjoints, _overflow_helper, \
    _stack, _top_index
from .lower_ops import convert


def _vec_to_mem(ctx, v, dt):
    if dt.is_bool:
        return ctx.b.zext(v, ir.VectorType(I32, ctx.width))
    return v


def vec_from_mem(ctx, v, dt):
    if dt.is_bool:
        zero = ir.Constant(ir.VectorType(I32, ctx.width), [ir.Constant(I32, 0)] * ctx.width)
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
    if n.srcs[0] in ctx.lane_stacks:
        return _push_lanes(ctx, n)
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
        zero = ir.Constant(ir.VectorType(mem_type(s.dtype), w), None)  # zeroinitializer
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
    v = b.call(fn, [p, ir.Constant(I32, align), mask, ir.Constant(vt, None)])
    return convert(ctx, vec_from_mem(ctx, v, s.dtype), s.dtype, node_dtype or s.dtype)


def _load_top(ctx, n):
    if not _varying(ctx, n):
        return LOWER_ADSTACK[Op.ADSTACK_LOAD_TOP](ctx, n)
    s = _stack(ctx, n)
    if n.srcs[0] in ctx.lane_stacks:
        return _gather_top(ctx, s, s.entries, n.dtype)
    return _read_top(ctx, s, s.entries, n.dtype)


def _load_top_adj(ctx, n):
    s = _stack(ctx, n)
    if not _varying(ctx, n) or not s.dtype.is_float:
        return LOWER_ADSTACK[Op.ADSTACK_LOAD_TOP_ADJ](ctx, n)
    _heap_adjoints(s, n)
    if n.srcs[0] in ctx.lane_stacks:
        return _gather_top(ctx, s, s.adjoints, n.dtype)
    return _read_top(ctx, s, s.adjoints, n.dtype)


def _acc_adj(ctx, n):
    if not _varying(ctx, n):
        return LOWER_ADSTACK[Op.ADSTACK_ACC_ADJ](ctx, n)
    s, b, w = _stack(ctx, n), ctx.b, ctx.width
    _heap_adjoints(s, n)
    if n.srcs[0] in ctx.lane_stacks:
        return _acc_lanes(ctx, n, s)
    write, merge = ctx.block("ad.acc"), ctx.block("ad.accd")
    b.cbranch(s.empty_cap, merge, write)
    b.position_at_end(write)
    p = _entry_ptr(ctx, s.adjoints, _top_index(ctx, s), s.dtype, w)
    align = _elem(mem_type(s.dtype))[1]
    old = b.load(p, typ=reg_type(s.dtype), align=align)
    new = b.fadd(old, convert(ctx, ctx.value(n.srcs[1]), n.srcs[1].dtype, s.dtype))
    if ctx.masked:  # the row's lanes are this worker's: inactive lanes write their old value
        new = b.select(ctx.mask, new, old)
    _vstore(ctx, new, p)
    b.branch(merge)
    b.position_at_end(merge)


# -- per-lane entry counts (stacks pushed / popped under a partial mask) -----------------------
def setup_lane_counts(ctx):
    """Give each stack of `ctx.lane_stacks` a `<W x i64>` count (an entry-block alloca, zeroed
    there) in place of the scalar one `lower_adstack.setup_adstacks` made."""
    if ctx.adstack is None:
        return
    vt = ir.VectorType(I64, ctx.width)
    for a, s in ctx.adstack.stacks.items():
        if a in ctx.lane_stacks:
            s.count = entry_alloca(ctx.entry_b, ctx.lib.target, vt, name=f"ad.lcount{s.index}")
            ctx.entry_b.store(ir.Constant(vt, None), s.count)


def _counts(ctx, s):
    return ctx.b.load(s.count, typ=ir.VectorType(I64, ctx.width))


def _splat64(ctx, v):
    return ir.Constant(ir.VectorType(I64, ctx.width), [ir.Constant(I64, v)] * ctx.width)


def _lane_ptrs(ctx, base, entry, dt):
    """`<W x ptr>`: lane l's element `entry[l]*W + l` of the lane-interleaved region."""
    b, w = ctx.b, ctx.width
    iota = ir.Constant(ir.VectorType(I64, w), [ir.Constant(I64, k) for k in range(w)])
    idx = b.add(b.mul(entry, _splat64(ctx, w)), iota)
    p = b.gep(base, [idx], inbounds=True, source_etype=mem_type(dt))
    p.type = ir.VectorType(PTR, w)  # llvmlite types a vector GEP as one pointer
    return p


def _gather(ctx, ptrs, mask, dt):
    mt = mem_type(dt)
    vt = ir.VectorType(mt, ctx.width)
    sfx, align = _elem(mt)
    fn = ctx.lib.declare(f"llvm.masked.gather.v{ctx.width}{sfx}.v{ctx.width}p0", vt,
                         [ptrs.type, I32, mask.type, vt])
    return ctx.b.call(fn, [ptrs, ir.Constant(I32, align), mask, ir.Constant(vt, None)])


def _scatter(ctx, v, ptrs, mask):
    sfx, align = _elem(v.type.element)
    fn = ctx.lib.declare(f"llvm.masked.scatter.v{ctx.width}{sfx}.v{ctx.width}p0", ir.VoidType(),
                         [v.type, ptrs.type, I32, mask.type])
    ctx.b.call(fn, [v, ptrs, ir.Constant(I32, align), mask])


def _top_entries(ctx, s):
    """max(count - 1, 0) per lane."""
    vt = ir.VectorType(I64, ctx.width)
    fn = ctx.lib.declare(f"llvm.usub.sat.v{ctx.width}i64", vt, [vt, vt])
    return ctx.b.call(fn, [_counts(ctx, s), _splat64(ctx, 1)])


def _live(ctx, s):
    """Active lanes, none when cap == 0 (then nothing is read or written: 0 as on the scalar
    path)."""
    return ctx.b.and_(ctx.mask, ctx.broadcast(ctx.b.not_(s.empty_cap)))


def _push_lanes(ctx, n):
    """Each active lane pushes at its own count; an active lane at capacity records the
    overflow (the scalar path's helper: same task and stack) and writes nothing."""
    s, b, w = _stack(ctx, n), ctx.b, ctx.width
    cnt = _counts(ctx, s)
    room = b.icmp_unsigned("<", cnt, ctx.broadcast(s.cap))
    full = b.and_(ctx.mask, b.not_(room))
    ovf, go = ctx.block("ad.loverflow"), ctx.block("ad.lpush")
    b.cbranch(_any(ctx, full), ovf, go).set_weights([1, 1 << 20])
    b.position_at_end(ovf)
    st = ctx.adstack
    b.call(_overflow_helper(ctx), [st.status, ir.Constant(I32, st.task_index),
                                   ir.Constant(I32, s.index)])
    b.branch(go)
    b.position_at_end(go)
    ok = b.and_(ctx.mask, room)
    v = convert(ctx, ctx.value(n.srcs[1]), n.srcs[1].dtype, s.dtype)
    _scatter(ctx, _vec_to_mem(ctx, v, s.dtype), _lane_ptrs(ctx, s.entries, cnt, s.dtype), ok)
    if s.adjoints is not None:
        zero = ir.Constant(ir.VectorType(mem_type(s.dtype), w), None)
        _scatter(ctx, zero, _lane_ptrs(ctx, s.adjoints, cnt, s.dtype), ok)
    b.store(b.add(cnt, b.zext(ok, cnt.type)), s.count)


def _gather_top(ctx, s, base, node_dtype):
    v = _gather(ctx, _lane_ptrs(ctx, base, _top_entries(ctx, s), s.dtype), _live(ctx, s), s.dtype)
    return convert(ctx, vec_from_mem(ctx, v, s.dtype), s.dtype, node_dtype or s.dtype)


def _acc_lanes(ctx, n, s):
    ptrs = _lane_ptrs(ctx, s.adjoints, _top_entries(ctx, s), s.dtype)
    live = _live(ctx, s)
    old = _gather(ctx, ptrs, live, s.dtype)
    _scatter(ctx, ctx.b.fadd(old, convert(ctx, ctx.value(n.srcs[1]), n.srcs[1].dtype, s.dtype)),
             ptrs, live)


def _any(ctx, m):
    fn = ctx.lib.declare(f"llvm.vector.reduce.or.v{ctx.width}i1", ir.IntType(1), [m.type])
    return ctx.b.call(fn, [m])


def _lane_alloca(ctx, n):
    if n not in ctx.lane_stacks:
        return LOWER_ADSTACK[Op.ADSTACK_ALLOCA](ctx, n)
    s = _stack(ctx, n)
    zero = ir.Constant(ir.VectorType(I64, ctx.width), None)
    if ctx.masked:
        zero = ctx.b.select(ctx.mask, zero, _counts(ctx, s))
    ctx.b.store(zero, s.count)


def _lane_pop(ctx, n):
    if n.srcs[0] not in ctx.lane_stacks:
        return LOWER_ADSTACK[Op.ADSTACK_POP](ctx, n)
    s, b = _stack(ctx, n), ctx.b
    cnt = _counts(ctx, s)
    dec = b.and_(ctx.mask, b.icmp_unsigned("!=", cnt, _splat64(ctx, 0)))
    b.store(b.sub(cnt, b.zext(dec, cnt.type)), s.count)


LANE_STACK_RULES = {Op.ADSTACK_ALLOCA: _lane_alloca, Op.ADSTACK_POP: _lane_pop}

SPMD_ADSTACK_RULES = {
    Op.ADSTACK_PUSH: _push, Op.ADSTACK_LOAD_TOP: _load_top,
    Op.ADSTACK_LOAD_TOP_ADJ: _load_top_adj, Op.ADSTACK_ACC_ADJ: _acc_adj,
}
