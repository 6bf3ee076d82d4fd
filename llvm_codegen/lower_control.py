"""Structured control flow: IF, RANGE_FOR, WHILE, BREAK, CONTINUE.

Loops keep their index in a phi (begin from the pre-header, index + 1 from the latch); BREAK
jumps to the loop's exit, CONTINUE to its latch (RANGE_FOR) or header (WHILE). A CONTINUE outside
every loop ends the current parallel iteration (`FnContext.top_continue`).
"""
from __future__ import annotations

from kernel_ir.nodes import VERSIONED
from kernel_ir.ops import Op

from . import cold_copy
from .context import CodegenError, FnContext
from .lower_ops import convert


def _if(ctx: FnContext, n):
    """A versioned region's IF (`VERSIONED`): the guard's branch weighted likely, the checked
    original (else) a call to a cold function of its own where `cold_copy` applies."""
    then_bb, else_bb, merge = ctx.block("then"), ctx.block("else"), ctx.block("endif")
    br = ctx.b.cbranch(ctx.value(n.srcs[0]), then_bb, else_bb)
    versioned = n.arg == VERSIONED
    if versioned:
        br.set_weights([1 << 20, 1])
    for k, (bb, blk) in enumerate(((then_bb, n.blocks[0]), (else_bb, n.blocks[1]))):
        ctx.b.position_at_end(bb)
        if not (versioned and k == 1 and cold_copy.lower_call(ctx, blk)):
            ctx.lower_block(blk)
        ctx.close_into(merge)
    ctx.b.position_at_end(merge)


def emit_counted_loop(ctx: FnContext, begin, end, dt, body_fn, name="for"):
    """`for i in [begin, end)` with `i` of dtype `dt`; `body_fn(i, latch, exit)` emits the body.
    The increment is `nsw`/`nuw`: it never passes `end`, so it cannot wrap."""
    b = ctx.b
    pre = b.block
    head, body, latch, exit_ = (ctx.block(f"{name}.{s}") for s in ("head", "body", "latch", "exit"))
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(ctx.reg_type(dt), name=f"{name}.i")
    cmp = b.icmp_signed if dt.kind == "i" else b.icmp_unsigned
    b.cbranch(cmp("<", i, end), body, exit_)
    b.position_at_end(body)
    body_fn(i, latch, exit_)
    ctx.close_into(latch)
    b.position_at_end(latch)
    nxt = b.add(i, ctx.const(dt, 1), name=f"{name}.next", flags=["nsw" if dt.kind == "i" else "nuw"])
    b.branch(head)
    i.add_incoming(begin, pre)
    i.add_incoming(nxt, latch)
    b.position_at_end(exit_)


def _range_for(ctx: FnContext, n):
    idx = n.arg.index
    dt = idx.dtype
    begin, end = (convert(ctx, ctx.value(s), s.dtype, dt) for s in n.srcs)

    def body(i, latch, exit_):
        ctx.env[idx] = i
        ctx.loops.append((latch, exit_))
        ctx.lower_block(n.blocks[0])
        ctx.loops.pop()

    emit_counted_loop(ctx, begin, end, dt, body)


def _while(ctx: FnContext, n):
    head, exit_ = ctx.block("while.body"), ctx.block("while.exit")
    ctx.b.branch(head)
    ctx.b.position_at_end(head)
    ctx.loops.append((head, exit_))
    ctx.lower_block(n.blocks[0])
    ctx.loops.pop()
    ctx.close_into(head)
    ctx.b.position_at_end(exit_)


def _break(ctx: FnContext, n):
    if not ctx.loops:
        raise CodegenError("LLVM codegen: BREAK outside a loop")
    ctx.jump(ctx.loops[-1][1])


def _continue(ctx: FnContext, n):
    ctx.jump(ctx.loops[-1][0] if ctx.loops else ctx.top_continue)


def _call(ctx, n):
    raise CodegenError(f"LLVM codegen: CALL region {n.arg.name!r} must be inlined before codegen")


def _print(ctx, n):
    raise CodegenError("LLVM codegen: PRINT must be lowered to global stores before codegen "
                       "(passes.lower_print)")


LOWER_CONTROL = {Op.CALL: _call, Op.IF: _if, Op.RANGE_FOR: _range_for, Op.WHILE: _while,
                 Op.BREAK: _break, Op.CONTINUE: _continue, Op.PRINT: _print}
