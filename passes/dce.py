"""Dead-code elimination: drop pure nodes nobody uses, and locals whose value never matters.

Liveness is a mark phase from the roots (every node with an effect: global stores, atomics,
control flow) through sources; a live LOAD of a slot makes every STORE into that slot live. So a
local that is only read to update itself (`n += 1`, never used otherwise) is dead. Iterates to a
fixed point: removing a loop or IF whose blocks became empty can make its operands dead, and so
on. Side effects (global stores, atomics, control flow with effects) are always kept. Linear in
the number of nodes: a slot's stores are marked once, however many loads it has (an unrolled
`s += ...` has thousands of each).
"""
from __future__ import annotations

from dataclasses import replace

from kernel_ir.nodes import KernelIR, LoopArg, TaskList, walk
from kernel_ir.ops import PURE, Op
from kernel_ir.rewrite import keep, rebuild

_REMOVABLE = PURE | {Op.LOAD, Op.GLOBAL_LOAD, Op.ALLOCA}


def _live(blocks, extra_used=()):
    nodes = [n for b in blocks for n in walk(b)]
    stores: dict = {}
    for n in nodes:
        if n.op == Op.STORE:
            stores.setdefault(n.srcs[0], []).append(n)
    live: set = set()
    loaded: set = set()  # slots whose stores are marked live already (once, not per load)
    work = [n for n in nodes if n.op not in _REMOVABLE and n.op != Op.STORE] + list(extra_used)
    while work:
        n = work.pop()
        if n in live:
            continue
        live.add(n)
        work.extend(n.srcs)
        if isinstance(n.arg, LoopArg) and n.arg.index is not None:
            work.append(n.arg.index)
        if n.op == Op.LOAD and n.srcs[0] not in loaded:
            loaded.add(n.srcs[0])
            work.extend(stores.get(n.srcs[0], ()))
    return live


def _sweep(blocks, extra_used=()):
    live = _live(blocks, extra_used)

    def visit(n, srcs, blks, arg, env):
        if (n.op in _REMOVABLE or n.op == Op.STORE) and n not in live:
            return None
        if n.op == Op.IF and not blks[0].nodes and not blks[1].nodes:
            return None
        if n.op == Op.RANGE_FOR and not blks[0].nodes:
            return None
        if isinstance(arg, LoopArg) and any(c not in live for c in n.arg.carried):
            arg = replace(arg, carried=tuple(env.get(c, c) for c in n.arg.carried if c in live))
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
        tasks.append(replace(t, body=body))
    return TaskList(tl.name, tl.args, tuple(tasks), tl.temps)
