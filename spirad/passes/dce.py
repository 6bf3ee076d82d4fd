"""Dead-code elimination: drop pure nodes nobody uses, and locals that are never read.

Iterates to a fixed point: removing a dead store can make its value dead, and so on. Side
effects (global stores, atomics, control flow with effects) are always kept; a loop or IF whose
blocks become empty is removed.
"""
from __future__ import annotations

from ..ir.nodes import Block, KernelIR, Task, TaskList, walk
from ..ir.ops import PURE, Op
from ..ir.rewrite import keep, rebuild

_REMOVABLE = PURE | {Op.LOAD, Op.GLOBAL_LOAD, Op.ALLOCA}


def _uses(blocks):
    used, loaded = set(), set()
    for b in blocks:
        for n in walk(b):
            for s in n.srcs:
                used.add(s)
            if n.op == Op.LOAD:
                loaded.add(n.srcs[0])
            if n.arg is not None and hasattr(n.arg, "index") and getattr(n.arg, "index", None) is not None:
                used.add(n.arg.index)
    return used, loaded


def _sweep(blocks, extra_used=()):
    used, loaded = _uses(blocks)
    used |= set(extra_used)

    def visit(n, srcs, blks, arg, env):
        if n.op == Op.STORE and n.srcs[0] not in loaded:
            return None
        if n.op == Op.ALLOCA and n not in loaded:
            return None
        if n.op in _REMOVABLE and n not in used:
            return None
        if n.op == Op.IF and not blks[0].nodes and not blks[1].nodes:
            return None
        if n.op == Op.RANGE_FOR and not blks[0].nodes:
            return None
        return keep(n, srcs, blks, arg, env)

    return [rebuild(b, visit) for b in blocks]


def _fixpoint(blocks, extra_used=()):
    while True:
        new = _sweep(blocks, extra_used)
        if all(a == b for a, b in zip(new, blocks)):
            return new
        blocks = new


def dce_kernel(k: KernelIR) -> KernelIR:
    return KernelIR(k.name, k.args, _fixpoint([k.body])[0], k.loc)


def dce_tasks(tl: TaskList) -> TaskList:
    tasks = []
    for t in tl.tasks:
        body = _fixpoint([t.body])[0]
        if t.kind == "serial" and not body.nodes:
            continue
        tasks.append(Task(t.kind, body, t.index, t.begin, t.end, t.name, t.loc))
    return TaskList(tl.name, tl.args, tuple(tasks), tl.temps)
