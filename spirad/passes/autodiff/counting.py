"""The counting pass of measured adstack sizing (DESIGN §4 "Sizing").

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

from kernel_ir.dtypes import i32
from kernel_ir.nodes import Block, Node, Task
from kernel_ir.ops import ATOMICS, Op
from kernel_ir.rewrite import Splice, keep, rebuild


def _n(op, dtype=None, srcs=(), arg=None, loc=None):
    return Node(op, dtype, tuple(srcs), arg, (), loc)


def counting_task(t: Task, body: Block, measured, counts_ref) -> Task:
    """`t`'s forward replay with a counter per measured slot, folded into `counts_ref`."""
    counters = {slot: _n(Op.ALLOCA, i32, (), "count", slot.loc) for slot, _ in measured}

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
        ld = _n(Op.LOAD, i32, (c,), loc=n.loc)
        one = _n(Op.CONST, i32, (), 1, n.loc)
        add = _n(Op.ADD, i32, (ld, one), loc=n.loc)
        return Splice([new, ld, one, add, _n(Op.STORE, None, (c, add), loc=n.loc)], new)

    nodes = list(counters.values()) + list(rebuild(body, visit).nodes)
    for slot, k in measured:
        ld = _n(Op.LOAD, i32, (counters[slot],), loc=slot.loc)
        idx = _n(Op.CONST, i32, (), k, slot.loc)
        nodes += [ld, idx, _n(Op.ATOMIC_MAX, i32, (idx, ld), counts_ref, slot.loc)]
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


def counting_tasks(tl, bodies, measured, counts_ref) -> tuple:
    last = max((i for i, m in enumerate(measured) if m), default=-1)
    out = []
    for t, body, m in list(zip(tl.tasks, bodies, measured))[:last + 1]:
        if m:
            out.append(counting_task(t, body, m, counts_ref))
        elif tl.temps:
            out.append(temps_only(t))
    return tuple(out)
