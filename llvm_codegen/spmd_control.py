"""Varying control flow in SPMD lanes (`llvm_codegen.spmd`): per-lane masks.

Why: an IF whose condition, or a loop whose trip count, differs between the W iterations of a
lane group cannot be a branch. Both sides of a varying IF run, each under the active-lanes
mask `ctx.mask` restricted to its lanes (a side is skipped by a branch when none of its lanes is
active: `llvm.vector.reduce.or`); a *varying loop* runs until no lane is left in it.

Analysis (`control`): a loop is varying when its bounds are (RANGE_FOR) or when a BREAK /
CONTINUE that targets it sits under a varying IF inside it; a top-level CONTINUE under a varying
IF makes the whole task body masked. A statement is *masked* (lowered under a partial mask) when
it sits under a varying IF, inside a varying loop, or in a task with a varying top-level
CONTINUE. `spmd.analyze` makes every local stored by a masked STORE varying (its slot is a
vector and the store a blend `select(mask, new, old)`), every adstack pushed or popped by a
masked op a per-lane-count stack (`spmd_adstack`), and the index of a RANGE_FOR with varying
bounds varying.

Lowering of a varying loop: its lanes live in a `<W x i1>` slot (the loop mask, initialised to
the mask at entry); each trip starts with the iteration mask `loop mask [& i < end]` (lanes that
reached their end leave the loop mask for good), stops when it is all false, and runs the body
under it. BREAK under mask m clears m from the loop and iteration masks, CONTINUE from the
iteration mask only; after a statement that may have done either, the current mask is
re-intersected with the iteration mask, so later statements skip those lanes. A RANGE_FOR with
uniform bounds keeps a scalar index even when varying for its jumps. BREAK / CONTINUE of a
uniform loop stay jumps (all active lanes take them together), as does a uniform top-level
CONTINUE (to the lane group's latch).

Nothing a lowered op does on an inactive lane traps: integer division already replaces a zero
divisor by 1 (`lower_ops._safe_divisor`), varying global accesses are masked or read element 0,
stores and atomics skip inactive lanes, and floating-point arithmetic does not trap.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from kernel_ir.ops import Op

from .lltypes import I1, const, reg_type
from .lower_control import LOWER_CONTROL
from .lower_ops import convert

_LOOPS = (Op.RANGE_FOR, Op.WHILE)


@dataclass
class Control:
    masked: frozenset = frozenset()   # nodes lowered under a partial mask
    loops: frozenset = frozenset()    # loops lowered with a loop mask
    top: bool = False                 # a varying top-level CONTINUE: the whole body masked


def control(task, varying) -> Control:
    """Which loops are varying and which nodes run under a partial mask (given `varying`)."""
    loops, top = set(), [False]

    def jumps(block, loop, rel):
        for n in block.nodes:
            if n.op == Op.IF:
                v = rel or n.srcs[0] in varying
                for blk in n.blocks:
                    jumps(blk, loop, v)
            elif n.op in _LOOPS:
                if n.op == Op.RANGE_FOR and any(s in varying for s in n.srcs):
                    loops.add(n)
                jumps(n.blocks[0], n, False)
            elif n.op in (Op.BREAK, Op.CONTINUE) and rel:
                if loop is None:
                    top[0] = True
                else:
                    loops.add(loop)
            else:
                for blk in n.blocks:
                    jumps(blk, loop, rel)

    jumps(task.body, None, False)
    masked = set()

    def mark(block, under):
        for n in block.nodes:
            if under:
                masked.add(n)
            if n.op == Op.IF:
                inner = under or n.srcs[0] in varying
            elif n.op in _LOOPS:
                inner = under or n in loops
            else:
                inner = under
            for blk in n.blocks:
                mark(blk, inner)

    mark(task.body, top[0])
    return Control(frozenset(masked), frozenset(loops), top[0])


# -- lowering ---------------------------------------------------------------------------------
@dataclass
class Frame:
    """A varying loop (or the task body with a varying top-level CONTINUE) being lowered."""
    loop_ptr: ir.Value   # <W x i1> slot: lanes still in the loop (None at the task level)
    iter_ptr: ir.Value   # <W x i1> slot: lanes still running this trip
    dirty: bool = False  # a masked BREAK / CONTINUE was lowered: re-read iter_ptr after nodes


def mask_type(ctx):
    return ir.VectorType(I1, ctx.width)


def any_lane(ctx, m):
    """i1: some lane of the `<W x i1>` mask `m` is set."""
    fn = ctx.lib.declare(f"llvm.vector.reduce.or.v{ctx.width}i1", I1, [m.type])
    return ctx.b.call(fn, [m])


def not_mask(ctx, m):
    return ctx.b.xor(m, ir.Constant(m.type, [ir.Constant(I1, 1)] * ctx.width))


def as_vector(ctx, node, dt):
    """`node`'s value converted to `dt`, as a `<W x T>` (broadcast when uniform)."""
    v = ctx.value(node)
    vec = isinstance(v.type, ir.VectorType)
    with ctx.at_lanes(ctx.width if vec else 1):
        v = convert(ctx, v, node.dtype, dt)
    return v if vec else ctx.broadcast(v)


def refresh(ctx):
    """After a node that may have run a masked BREAK / CONTINUE: drop the lanes that left, and
    when none is left skip the rest of the trip (to the loop's latch, or the lane group's at
    the top): the scalar path runs nothing after its jump, so neither may a uniform load here
    (its index may be valid only while some lane goes on)."""
    f = ctx.frames[-1] if ctx.frames else ctx.top_frame
    if f is not None and f.dirty:
        b = ctx.b
        if b.block.is_terminated:
            return
        live = b.load(f.iter_ptr, typ=mask_type(ctx))  # the lanes still in this trip
        ctx.mask = b.and_(ctx.mask, live)
        latch = ctx.loops[-1][0] if ctx.frames else ctx.top_continue
        rest = ctx.block("vjump.rest")
        b.cbranch(any_lane(ctx, live), rest, latch)  # (ctx.mask may be an IF side's only)
        b.position_at_end(rest)


def _if(ctx, n):
    b = ctx.b
    if n.srcs[0] not in ctx.varying:  # a branch; the mask is carried through
        m0 = ctx.mask  # (each side starts from it: a side's refreshed masks dominate no other)
        then_bb, else_bb, merge = ctx.block("then"), ctx.block("else"), ctx.block("endif")
        b.cbranch(ctx.value(n.srcs[0]), then_bb, else_bb)
        for bb, blk in ((then_bb, n.blocks[0]), (else_bb, n.blocks[1])):
            b.position_at_end(bb)
            ctx.mask = m0
            ctx.lower_block(blk)
            ctx.close_into(merge)
        b.position_at_end(merge)
        ctx.mask = m0
        return None
    c = ctx.value(n.srcs[0])
    m0, masked0 = ctx.mask, ctx.masked
    sides = ((b.and_(m0, c), n.blocks[0]), (b.and_(m0, not_mask(ctx, c)), n.blocks[1]))
    for m, blk in sides:
        if not blk.nodes:
            continue
        run, nxt = ctx.block("vif.run"), ctx.block("vif.next")
        b.cbranch(any_lane(ctx, m), run, nxt)
        b.position_at_end(run)
        ctx.mask, ctx.masked = m, True
        ctx.lower_block(blk)
        ctx.close_into(nxt)
        b.position_at_end(nxt)
        ctx.mask = m0
    ctx.mask, ctx.masked = m0, masked0


def _uniform_loop(ctx, n):
    m0 = ctx.mask
    ctx.frames.append(None)
    try:
        LOWER_CONTROL[n.op](ctx, n)
    finally:
        ctx.frames.pop()
    ctx.mask = m0


def _range_for(ctx, n):
    if n not in ctx.vloops:
        return _uniform_loop(ctx, n)
    idx = n.arg.index
    dt = idx.dtype
    b, w = ctx.b, ctx.width
    vec = idx in ctx.varying
    if vec:
        begin, end = (as_vector(ctx, s, dt) for s in n.srcs)
    else:
        begin, end = (convert(ctx, ctx.value(s), s.dtype, dt) for s in n.srcs)
    m0, masked0 = ctx.mask, ctx.masked
    frame = _frame(ctx, m0)
    pre = b.block
    head, body, latch, exit_ = (ctx.block(f"vfor.{s}") for s in ("head", "body", "latch", "exit"))
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(reg_type(dt, w if vec else 1), name="vfor.i")
    cmp = b.icmp_signed if dt.kind == "i" else b.icmp_unsigned
    lm = b.load(frame.loop_ptr, typ=mask_type(ctx))
    if vec:
        lm = b.and_(lm, cmp("<", i, end))
        b.store(lm, frame.loop_ptr)
        go = any_lane(ctx, lm)
    else:
        go = b.and_(cmp("<", i, end), any_lane(ctx, lm))
    b.cbranch(go, body, exit_)
    b.position_at_end(body)
    ctx.env[idx] = i
    _run_body(ctx, n, frame, lm, latch, exit_)
    b.position_at_end(latch)
    one = const(dt, 1, w if vec else 1)
    nxt = b.add(i, one, name="vfor.next") if vec else b.add(
        i, one, name="vfor.next", flags=["nsw" if dt.kind == "i" else "nuw"])
    b.branch(head)
    i.add_incoming(begin, pre)
    i.add_incoming(nxt, latch)
    b.position_at_end(exit_)
    ctx.mask, ctx.masked = m0, masked0


def _while(ctx, n):
    if n not in ctx.vloops:
        return _uniform_loop(ctx, n)
    b = ctx.b
    m0, masked0 = ctx.mask, ctx.masked
    frame = _frame(ctx, m0)
    head, body, exit_ = ctx.block("vwhile.head"), ctx.block("vwhile.body"), ctx.block("vwhile.exit")
    b.branch(head)
    b.position_at_end(head)
    lm = b.load(frame.loop_ptr, typ=mask_type(ctx))
    b.cbranch(any_lane(ctx, lm), body, exit_)
    b.position_at_end(body)
    _run_body(ctx, n, frame, lm, head, exit_)
    b.position_at_end(exit_)
    ctx.mask, ctx.masked = m0, masked0


def _frame(ctx, m0):
    loop_ptr = ctx.hoisted_alloca(mask_type(ctx), "vloop.mask")
    iter_ptr = ctx.hoisted_alloca(mask_type(ctx), "vloop.iter")
    ctx.b.store(m0, loop_ptr)
    return Frame(loop_ptr, iter_ptr)


def _run_body(ctx, n, frame, lm, latch, exit_):
    ctx.b.store(lm, frame.iter_ptr)
    ctx.mask, ctx.masked = lm, True
    ctx.frames.append(frame)
    ctx.loops.append((latch, exit_))
    try:
        ctx.lower_block(n.blocks[0])
    finally:
        ctx.loops.pop()
        ctx.frames.pop()
    ctx.close_into(latch)


def _leave(ctx, frame, loop_too):
    b = ctx.b
    off = not_mask(ctx, ctx.mask)
    ptrs = (frame.iter_ptr, frame.loop_ptr) if loop_too else (frame.iter_ptr,)
    for p in ptrs:
        b.store(b.and_(b.load(p, typ=mask_type(ctx)), off), p)
    frame.dirty = True


def _break(ctx, n):
    if not ctx.frames:
        raise RuntimeError("SPMD lowering: BREAK outside a loop")
    if ctx.frames[-1] is None:
        return LOWER_CONTROL[Op.BREAK](ctx, n)
    _leave(ctx, ctx.frames[-1], True)


def _continue(ctx, n):
    frame = ctx.frames[-1] if ctx.frames else ctx.top_frame
    if frame is None:  # a uniform loop's (or task's) CONTINUE: a jump
        return LOWER_CONTROL[Op.CONTINUE](ctx, n)
    _leave(ctx, frame, False)


def _store(ctx, n):
    """STORE to a varying local: a blend under a partial mask (only active lanes change)."""
    slot = ctx.value(n.srcs[0])
    new = ctx.value(n.srcs[1])
    if ctx.masked and n not in ctx.blend_free:  # `spmd_scoped_locals`: no lane reads the old
        old = ctx.b.load(slot, typ=new.type)
        new = ctx.b.select(ctx.mask, new, old)
    ctx.b.store(new, slot)


def _alloca(ctx, n):
    slot = ctx.hoisted_alloca(ctx.reg_type(n.dtype), name=str(n.arg or "local"))
    zero = ctx.const(n.dtype, 0)
    if ctx.masked and not ctx.scoped_locals:  # `spmd_scoped_locals`
        zero = ctx.b.select(ctx.mask, zero, ctx.b.load(slot, typ=zero.type))
    ctx.b.store(zero, slot)
    return slot


CONTROL_RULES = {Op.IF: _if, Op.RANGE_FOR: _range_for, Op.WHILE: _while, Op.BREAK: _break,
                 Op.CONTINUE: _continue}
LOCAL_RULES = {Op.STORE: _store, Op.ALLOCA: _alloca}
