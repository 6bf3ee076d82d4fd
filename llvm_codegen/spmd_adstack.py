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

Heap layout (architecture §4 allows it): a worker of a W-lane task owns W heap rows, laid out
lane-interleaved: byte offsets and strides of the sizer's layout are scaled by W, and entry j of
lane l of a stack is element `j*W + l` of its region, so a push of W lanes at one count is one
vector store and a top read one vector load. The CPU backend sizes the heap for `workers * W`
rows (`spirad.backends.cpu`). `setup_adstacks` does the scaling (by `FnContext.width`).

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

from .context import entry_alloca
from .freeze import freeze
from .lltypes import I32, I64, PTR, elem_info, mem_type
from .lower_adstack import LOWER_ADSTACK, emit_push, entry_ptr, record_overflow, \
    require_heap_adjoints, stack_of, top_index
from .lower_memory import from_memory, to_memory
from .lower_ops import convert
from .spmd_control import any_lane
from .splat import splat, zeros


def _varying(ctx, n):
    return n.srcs[0] in ctx.varying


def _vstore(ctx, v, p):
    ctx.b.store(v, p, align=elem_info(v.type.element)[1])


def _push(ctx, n):
    if n.srcs[0] in ctx.lane_stacks:
        return _push_lanes(ctx, n)
    if not _varying(ctx, n):
        return LOWER_ADSTACK[Op.ADSTACK_PUSH](ctx, n)
    s, b, w = stack_of(ctx, n), ctx.b, ctx.width

    def store(cnt):  # one count for all lanes: a vector store of the W lanes' entries
        v = convert(ctx, ctx.value(n.srcs[1]), n.srcs[1].dtype, s.dtype)
        _vstore(ctx, to_memory(b, v, s.dtype), entry_ptr(ctx, s.entries, cnt, s.dtype, w))
        if s.adjoints is not None:
            zero = zeros(ir.VectorType(mem_type(s.dtype), w))
            _vstore(ctx, zero, entry_ptr(ctx, s.adjoints, cnt, s.dtype, w))
    emit_push(ctx, s, store)


def _read_top(ctx, s, base, node_dtype):
    """All lanes of entry max(count-1, 0); 0 when cap == 0 (an all-false masked load)."""
    b, w = ctx.b, ctx.width
    mt = mem_type(s.dtype)
    p = entry_ptr(ctx, base, top_index(ctx, s), s.dtype, w)
    mask = ctx.broadcast(b.not_(s.empty_cap))
    v = masked(ctx, "load", mt, [p, mask])
    return convert(ctx, from_memory(b, v, s.dtype), s.dtype, node_dtype or s.dtype)


def _load_top(ctx, n):
    if not _varying(ctx, n):
        return LOWER_ADSTACK[Op.ADSTACK_LOAD_TOP](ctx, n)
    s = stack_of(ctx, n)
    if n.srcs[0] in ctx.lane_stacks:
        return _gather_top(ctx, s, s.entries, n.dtype)
    return _read_top(ctx, s, s.entries, n.dtype)


def _load_top_adj(ctx, n):
    s = stack_of(ctx, n)
    if not _varying(ctx, n) or not s.dtype.is_float:
        return LOWER_ADSTACK[Op.ADSTACK_LOAD_TOP_ADJ](ctx, n)
    require_heap_adjoints(s, n)
    if n.srcs[0] in ctx.lane_stacks:
        return _gather_top(ctx, s, s.adjoints, n.dtype)
    return _read_top(ctx, s, s.adjoints, n.dtype)


def _acc_adj(ctx, n):
    if not _varying(ctx, n):
        return LOWER_ADSTACK[Op.ADSTACK_ACC_ADJ](ctx, n)
    s, b, w = stack_of(ctx, n), ctx.b, ctx.width
    require_heap_adjoints(s, n)
    if n.srcs[0] in ctx.lane_stacks:
        return _acc_lanes(ctx, n, s)
    write, merge = ctx.block("ad.acc"), ctx.block("ad.accd")
    b.cbranch(s.empty_cap, merge, write)
    b.position_at_end(write)
    p = entry_ptr(ctx, s.adjoints, top_index(ctx, s), s.dtype, w)
    align = elem_info(mem_type(s.dtype))[1]
    old = b.load(p, typ=ctx.reg_type(s.dtype), align=align)
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
            ctx.entry_b.store(zeros(vt), s.count)


def _counts(ctx, s):
    return ctx.b.load(s.count, typ=ir.VectorType(I64, ctx.width))


def _splat64(ctx, v):
    return splat(ir.Constant(I64, v), ctx.width)


def _lane_ptrs(ctx, base, entry, dt):
    """`<W x ptr>`: lane l's element `entry[l]*W + l` of the lane-interleaved region."""
    b, w = ctx.b, ctx.width
    iota = ir.Constant(ir.VectorType(I64, w), [ir.Constant(I64, k) for k in range(w)])
    idx = b.add(b.mul(entry, _splat64(ctx, w)), iota)
    p = b.gep(base, [idx], inbounds=True, source_etype=mem_type(dt))
    p.type = ir.VectorType(PTR, w)  # llvmlite types a vector GEP as one pointer
    return p


def masked(ctx, kind, mt, args):
    """A masked `kind` access of W lanes of memory type `mt`: 'load' (ptr, mask), 'gather'
    (ptrs, mask), 'store' (value, ptr, mask), 'scatter' (value, ptrs, mask). Inactive lanes
    touch no memory; loaded inactive lanes are 0 (frozen)."""
    w, (sfx, align) = ctx.width, elem_info(mt)
    vt = ir.VectorType(mt, w)
    a = ir.Constant(I32, align)
    if kind == "load":    # (ptr, mask)
        fn = ctx.lib.declare(f"llvm.masked.load.v{w}{sfx}.p0", vt, [PTR, I32, args[1].type, vt])
        return freeze(ctx.b, ctx.b.call(fn, [args[0], a, args[1], zeros(vt)]))
    if kind == "gather":  # (ptrs, mask)
        fn = ctx.lib.declare(f"llvm.masked.gather.v{w}{sfx}.v{w}p0", vt,
                             [args[0].type, I32, args[1].type, vt])
        return freeze(ctx.b, ctx.b.call(fn, [args[0], a, args[1], zeros(vt)]))
    if kind == "store":   # (value, ptr, mask)
        fn = ctx.lib.declare(f"llvm.masked.store.v{w}{sfx}.p0", ir.VoidType(),
                             [vt, PTR, I32, args[2].type])
    else:                 # scatter: (value, ptrs, mask)
        fn = ctx.lib.declare(f"llvm.masked.scatter.v{w}{sfx}.v{w}p0", ir.VoidType(),
                             [vt, args[1].type, I32, args[2].type])
    return ctx.b.call(fn, [args[0], args[1], a, args[2]])


def _reduce(ctx, op, v):
    fn = ctx.lib.declare(f"llvm.vector.reduce.{op}.v{ctx.width}i64", I64, [v.type])
    return ctx.b.call(fn, [v])


def _rows(ctx, entry, mask, emit):
    """Run `emit(one, e)` for an access of each active lane l at its entry `entry[l]`: when
    all active lanes share one entry e (lanes in step, the common case) `one` is True and the
    access is a plain masked vector load / store at element e*W; otherwise gather / scatter.
    Returns the phi of emit's results (or None)."""
    b = ctx.b
    hi = _reduce(ctx, "umax", b.select(mask, entry, _splat64(ctx, 0)))
    lo = _reduce(ctx, "umin", b.select(mask, entry, _splat64(ctx, -1)))
    one_bb, many_bb, done = ctx.block("ad.row"), ctx.block("ad.rows"), ctx.block("ad.rowsd")
    b.cbranch(b.icmp_unsigned("==", hi, lo), one_bb, many_bb)
    out = []
    for bb, one in ((one_bb, True), (many_bb, False)):
        b.position_at_end(bb)
        out.append((emit(one, hi), b.block))
        b.branch(done)
    b.position_at_end(done)
    if out[0][0] is None:
        return None
    phi = b.phi(out[0][0].type)
    for v, bb in out:
        phi.add_incoming(v, bb)
    return phi


def _row_load(ctx, one, e, base, entry, mask, dt):
    if one:
        return masked(ctx, "load", mem_type(dt), [entry_ptr(ctx, base, e, dt, ctx.width), mask])
    return masked(ctx, "gather", mem_type(dt), [_lane_ptrs(ctx, base, entry, dt), mask])


def _row_store(ctx, one, e, base, entry, v, mask, dt):
    if one:
        masked(ctx, "store", mem_type(dt), [v, entry_ptr(ctx, base, e, dt, ctx.width), mask])
    else:
        masked(ctx, "scatter", mem_type(dt), [v, _lane_ptrs(ctx, base, entry, dt), mask])


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
    overflow (the scalar path's helper: same task and stack) and writes nothing. Fast path:
    the active lanes share one count below the capacity (one masked vector store)."""
    s, b, w = stack_of(ctx, n), ctx.b, ctx.width
    cnt, mask = _counts(ctx, s), ctx.mask
    v = to_memory(b, convert(ctx, ctx.value(n.srcs[1]), n.srcs[1].dtype, s.dtype), s.dtype)
    zero = ir.Constant(ir.VectorType(mem_type(s.dtype), w), None)
    hi = _reduce(ctx, "umax", b.select(mask, cnt, _splat64(ctx, 0)))
    lo = _reduce(ctx, "umin", b.select(mask, cnt, _splat64(ctx, -1)))
    fast = b.and_(b.icmp_unsigned("==", hi, lo), b.icmp_unsigned("<", hi, s.cap))
    one_bb, many_bb, done = ctx.block("ad.lpush"), ctx.block("ad.lpushs"), ctx.block("ad.lpushd")
    b.cbranch(fast, one_bb, many_bb).set_weights([1 << 10, 1])
    for bb, one in ((one_bb, True), (many_bb, False)):
        b.position_at_end(bb)
        ok = mask
        if not one:
            room = b.icmp_unsigned("<", cnt, ctx.broadcast(s.cap))
            ovf, go = ctx.block("ad.loverflow"), ctx.block("ad.lpushok")
            b.cbranch(any_lane(ctx, b.and_(mask, b.not_(room))), ovf, go).set_weights([1, 1 << 20])
            b.position_at_end(ovf)
            record_overflow(ctx, s)
            b.branch(go)
            b.position_at_end(go)
            ok = b.and_(mask, room)
        _row_store(ctx, one, hi, s.entries, cnt, v, ok, s.dtype)
        if s.adjoints is not None:
            _row_store(ctx, one, hi, s.adjoints, cnt, zero, ok, s.dtype)
        b.branch(done)
    b.position_at_end(done)
    ok = b.and_(mask, b.icmp_unsigned("<", cnt, ctx.broadcast(s.cap)))
    b.store(b.add(cnt, b.zext(ok, cnt.type)), s.count)


def _gather_top(ctx, s, base, node_dtype):
    top, live = _top_entries(ctx, s), _live(ctx, s)
    v = _rows(ctx, top, live, lambda one, e: _row_load(ctx, one, e, base, top, live, s.dtype))
    return convert(ctx, from_memory(ctx.b, v, s.dtype), s.dtype, node_dtype or s.dtype)


def _acc_lanes(ctx, n, s):
    top, live = _top_entries(ctx, s), _live(ctx, s)
    add = convert(ctx, ctx.value(n.srcs[1]), n.srcs[1].dtype, s.dtype)

    def emit(one, e):
        old = _row_load(ctx, one, e, s.adjoints, top, live, s.dtype)
        _row_store(ctx, one, e, s.adjoints, top, ctx.b.fadd(old, add), live, s.dtype)
    _rows(ctx, top, live, emit)


def _lane_alloca(ctx, n):
    if n not in ctx.lane_stacks:
        return LOWER_ADSTACK[Op.ADSTACK_ALLOCA](ctx, n)
    s = stack_of(ctx, n)
    zero = ir.Constant(ir.VectorType(I64, ctx.width), None)
    if ctx.masked:
        zero = ctx.b.select(ctx.mask, zero, _counts(ctx, s))
    ctx.b.store(zero, s.count)


def _lane_pop(ctx, n):
    if n.srcs[0] not in ctx.lane_stacks:
        return LOWER_ADSTACK[Op.ADSTACK_POP](ctx, n)
    s, b = stack_of(ctx, n), ctx.b
    cnt = _counts(ctx, s)
    dec = b.and_(ctx.mask, b.icmp_unsigned("!=", cnt, _splat64(ctx, 0)))
    b.store(b.sub(cnt, b.zext(dec, cnt.type)), s.count)


LANE_STACK_RULES = {Op.ADSTACK_ALLOCA: _lane_alloca, Op.ADSTACK_POP: _lane_pop}

SPMD_ADSTACK_RULES = {
    Op.ADSTACK_PUSH: _push, Op.ADSTACK_LOAD_TOP: _load_top,
    Op.ADSTACK_LOAD_TOP_ADJ: _load_top_adj, Op.ADSTACK_ACC_ADJ: _acc_adj,
}
