"""In a gradient kernel a sparse struct-for tests the live masks, not a launch-time copy.

The forward kernel copies a node's activation masks before a struct-for whose body writes them
(`kernel_ir.nodes.AT_LAUNCH`, spirad/frontend/sparse_ops.py), so the loop visits the cells active
when it starts. The adjoint kernel is a different launch: Taichi's lists the cells active when
*it* starts (the forward's new cells too), and an adjoint writes no mask (activation is not
differentiated; the forward replay keeps no global store but kernel temporaries'), so the live
masks are that list. Reading them also keeps the copies out of reverse mode, where a second copy
of the same node (a later struct-for) would look like an overwritten read.

`read_live_masks(task_list)`: stores into the copies dropped (a task left with nothing else to do
dropped with them), loads of a copy redirected to the mask it copied.
"""
from __future__ import annotations

from dataclasses import replace

from kernel_ir.nodes import TaskList, is_snapshot, walk
from kernel_ir.ops import ATOMICS, SIDE_EFFECTS, Op
from kernel_ir.rewrite import keep, rebuild


def _copies(tl: TaskList) -> dict:
    """copy buffer -> the mask GlobalRef it copies (the loaded value of each store into it)."""
    out = {}
    for t in tl.tasks:
        for n in walk(t.body):
            if n.op == Op.GLOBAL_STORE and is_snapshot(n.arg):
                v = n.srcs[-1]
                if v.op != Op.GLOBAL_LOAD:
                    raise RuntimeError(f"a struct-for's mask copy {n.arg} stores a {v.op.name}, "
                                       f"not a load of the mask")
                out[n.arg.buffer] = v.arg
            elif n.op in ATOMICS and is_snapshot(n.arg):
                raise RuntimeError(f"an atomic on a struct-for's mask copy {n.arg}")
    return out


def read_live_masks(tl: TaskList) -> tuple:
    """(the task list reading live masks, the buffers of those masks: their reads are the
    adjoint launch's by design, never an overwritten read)."""
    copies = _copies(tl)
    if not copies:
        return tl, frozenset()

    def visit(n, srcs, blocks, arg, env):
        if n.op == Op.GLOBAL_STORE and is_snapshot(n.arg):
            return None
        if n.op == Op.GLOBAL_LOAD and is_snapshot(n.arg):
            return keep(n, srcs, blocks, copies[n.arg.buffer], env)
        return keep(n, srcs, blocks, arg, env)

    def effects(body) -> bool:
        return any(n.op in SIDE_EFFECTS and n.op not in (Op.RANGE_FOR, Op.WHILE, Op.IF)
                   for n in walk(body))

    tasks = []
    for t in tl.tasks:
        body = rebuild(t.body, visit)
        if body is not t.body and not effects(body):
            continue  # the copy task itself
        tasks.append(replace(t, body=body))
    return replace(tl, tasks=tuple(tasks)), frozenset(r.buffer for r in copies.values())
