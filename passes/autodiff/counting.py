"""The counting pass of measured adstack sizing (architecture §4 "Sizing").

A stack whose capacity the size-expression grammar cannot bound (a data-dependent `while`, a
`break` on data) is *measured*: before the adjoint launch, a counting program runs the task's
forward replay — the normalized body the adjoint replays, with the global writes the replay
drops dropped here too — and counts, per thread (per lane on the CPU's SPMD path), the pushes
that stack would receive: one per execution of its slot's ALLOCA or STORE, exactly what
`capacities.Sizing.count` computes symbolically for the other stacks. At the end of the body
each thread folds its counts into `counts[k]` with an atomic max (one small read-back for the
whole launch); `sizing_cache` sizes the heap from them and caches the result under the write
generations of everything the counting program reads.

    counting_tasks(tl, bodies, measured, counts_ref) -> tuple of Tasks

`bodies`: per forward task its normalized body (the adjoint's); `measured`: per forward task a
list of (slot, counter index). Tasks without measured stacks are left out, except that a kernel
handing values between tasks through temporaries replays every task's temporary writes in order
(as the adjoint program does), so each counting task reads what the forward run computed.
"""
from __future__ import annotations

from dataclasses import replace

from kernel_ir.dtypes import i32, u1
from kernel_ir.nodes import Block, Node, Task, carried_slots
from kernel_ir.ops import ATOMICS, Op
from kernel_ir.rewrite import Splice, keep, rebuild, remap_arg


def _n(op, dtype=None, srcs=(), arg=None, loc=None):
    return Node(op, dtype, tuple(srcs), arg, (), loc)


def counting_task(t: Task, body: Block, measured, counts_ref, ckpt=None) -> Task:
    """`t`'s forward replay with a counter per measured slot, folded into `counts_ref`.
    `ckpt`: {top-level loop: (S, counter)} of a checkpointed adjoint (loop_checkpoint.py): a
    push inside such a loop counts towards its segment; the slot's count gets the largest
    segment plus its entries around the loop, and the loop's counter the checkpoints."""
    ckpt = ckpt or {}
    counters = {slot: _n(Op.ALLOCA, i32, (), "count", slot.loc) for slot, _ in measured}
    seg = {}  # (loop, slot) -> [segment count, largest segment]

    def bump(c, loc):
        ld = _n(Op.LOAD, i32, (c,), loc=loc)
        one = _n(Op.CONST, i32, (), 1, loc)
        add = _n(Op.ADD, i32, (ld, one), loc=loc)
        return [ld, one, add, _n(Op.STORE, None, (c, add), loc=loc)]

    def visitor(loop):
        def visit(n, srcs, blocks, arg, env):
            if n.op == Op.GLOBAL_STORE and n.arg.kind != "temp":
                return None  # the forward launch made these writes; only temporaries are replayed
            if n.op in ATOMICS and n.arg.kind != "temp":
                z = _n(Op.CONST, n.dtype, (), 0, n.loc)  # as in the adjoint's replay
                return Splice([z], z)
            new = keep(n, srcs, blocks, arg, env)
            slot = n if n.op == Op.ALLOCA else (n.srcs[0] if n.op == Op.STORE else None)
            c = counters.get(slot)
            if c is None:
                return new
            if loop is not None:
                c = seg.setdefault((loop, slot), [_n(Op.ALLOCA, i32, (), "seg", n.loc),
                                                  _n(Op.ALLOCA, i32, (), "segmax", n.loc)])[0]
            return Splice([new] + bump(c, n.loc), new)
        return visit

    nodes, env = [], {}
    extra = []  # checkpoint counters: (counter node, counter index)
    for n in body.nodes:
        if n not in ckpt:
            nodes += rebuild(Block((n,)), visitor(None), env).nodes
            continue
        every, k = ckpt[n]
        inner = rebuild(n.blocks[0], visitor(n), env)
        tc = _n(Op.ALLOCA, i32, (), "ckpt_trips", n.loc)
        nck = _n(Op.ALLOCA, i32, (), "ckpt_count", n.loc)
        mine = [(slot, sm) for (lp, slot), sm in seg.items() if lp is n]

        def fold(slot_seg):
            out = []
            for _, (sc, mx) in slot_seg:
                a, b_ = _n(Op.LOAD, i32, (mx,)), _n(Op.LOAD, i32, (sc,))
                m = _n(Op.MAX, i32, (a, b_))
                out += [a, b_, m, _n(Op.STORE, None, (mx, m))]
            return out
        head = [_n(Op.LOAD, i32, (tc,), loc=n.loc)]
        s_ = _n(Op.CONST, i32, (), every, n.loc)
        zero = _n(Op.CONST, i32, (), 0, n.loc)
        md = _n(Op.MOD, i32, (head[0], s_))
        due = _n(Op.CMP_EQ, u1, (md, zero))
        then = fold(mine) + [_n(Op.STORE, None, (sc, zero)) for _, (sc, _m) in mine] + bump(nck, n.loc)
        head += [s_, zero, md, due, Node(Op.IF, None, (due,), None, (Block(tuple(then)), Block(())), n.loc)]
        one = _n(Op.CONST, i32, (), 1, n.loc)
        inc = _n(Op.ADD, i32, (head[0], one))
        head += [one, inc, _n(Op.STORE, None, (tc, inc))]
        block = Block(tuple(head) + inner.nodes)
        arg = replace(remap_arg(n.arg, env), carried=carried_slots(block))
        loop = Node(n.op, None, tuple(env.get(s, s) for s in n.srcs), arg, (block,), n.loc)
        nodes += [tc, nck] + [x for _, sm in mine for x in sm] + [loop] + fold(mine)
        for slot, (sc, mx) in mine:  # the segment, the entry restored before it, the final one
            ld, c1 = _n(Op.LOAD, i32, (mx,)), _n(Op.CONST, i32, (), 2)
            a = _n(Op.ADD, i32, (ld, c1))
            ld2 = _n(Op.LOAD, i32, (counters[slot],))
            a2 = _n(Op.ADD, i32, (ld2, a))
            nodes += [ld, c1, a, ld2, a2, _n(Op.STORE, None, (counters[slot], a2))]
        extra.append((nck, k))
    nodes = list(counters.values()) + nodes
    for slot, k in measured:
        ld = _n(Op.LOAD, i32, (counters[slot],), loc=slot.loc)
        idx = _n(Op.CONST, i32, (), k, slot.loc)
        nodes += [ld, idx, _n(Op.ATOMIC_MAX, i32, (idx, ld), counts_ref, slot.loc)]
    for c, k in extra:
        ld = _n(Op.LOAD, i32, (c,))
        idx = _n(Op.CONST, i32, (), k)
        nodes += [ld, idx, _n(Op.ATOMIC_MAX, i32, (idx, ld), counts_ref)]
    return Task(t.kind, Block(tuple(nodes)), t.index, t.begin, t.end, t.name + "_count", t.loc)


def temps_only(t: Task) -> Task:
    """`t` with only its writes to kernel temporaries (a counting program's earlier task)."""
    def visit(n, srcs, blocks, arg, env):
        if (n.op == Op.GLOBAL_STORE or n.op in ATOMICS) and n.arg.kind != "temp":
            if n.op == Op.GLOBAL_STORE:
                return None
            z = _n(Op.CONST, n.dtype, (), 0, n.loc)
            return Splice([z], z)
        return keep(n, srcs, blocks, arg, env)
    return Task(t.kind, rebuild(t.body, visit), t.index, t.begin, t.end, t.name + "_replay", t.loc)


def counting_tasks(tl, bodies, measured, counts_ref, ckpts=None) -> tuple:
    ckpts = ckpts or [None] * len(tl.tasks)
    last = max((i for i, m in enumerate(measured) if m), default=-1)
    out = []
    for t, body, m, ck in list(zip(tl.tasks, bodies, measured, ckpts))[:last + 1]:
        if m:
            out.append(counting_task(t, body, m, counts_ref, ck))
        elif tl.temps:
            out.append(temps_only(t))
    return tuple(out)
