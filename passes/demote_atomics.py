"""Atomics on elements no other thread touches become plain read-modify-writes.

    for p in range(n):
        x.grad[f, p] += a           # ATOMIC_ADD: a locked compare-and-swap loop for floats
becomes
        old = x.grad[f, p]; x.grad[f, p] = old + a

where the element belongs to one iteration of a range task (`kernel_ir.ownership`: every access
of `x.grad` in the task names axis 1 by `p`), and everywhere in a serial task (one thread).
Why: reverse mode accumulates every adjoint into `.grad` with atomic adds (architecture §4), and
DiffTaichi's adjoints do dozens per iteration at the iteration's own elements (`diffmpm`'s
`p2g` adjoint: 40 per particle, 4x slower than Taichi, which demotes them the same way in its
`demote_atomics` pass). Valid because tasks of a launch, and launches, run one after another:
within a task only the owning iteration reads or writes such an element, and it does so in its
own program order. Applied to what the backend compiles (`driver`), after reverse mode and
`promote_accumulators` (whose one atomic per loop may itself be demoted), on every backend.
"""
from __future__ import annotations

from dataclasses import replace

from kernel_ir.nodes import Node, TaskList, walk
from kernel_ir.ops import ATOMIC_COMBINE, ATOMICS, Op
from kernel_ir.ownership import private_buffers
from kernel_ir.rewrite import Splice, keep, rebuild


def demote_atomics(tl: TaskList) -> TaskList:
    tasks = tuple(_task(t) for t in tl.tasks)
    if all(a is b for a, b in zip(tasks, tl.tasks)):
        return tl
    return TaskList(tl.name, tl.args, tasks, tl.temps)


def one_thread_variant(task):
    """`task` with every atomic demoted (as if every buffer were private), or None when it has
    no atomic left to demote: the CPU backend runs this variant when a launch is not split
    over threads (`backends/cpu.py`), where no other thread can touch any element. DiffTaichi's
    scattered adds (`grid[base + offset] += ...` in P2G, `p.grad[t, i - 1, j] += ...` in
    `wave`'s adjoint) then cost a load and a store instead of a locked compare-and-swap loop
    (`wave`'s adjoint: 4.6 -> 0.6 ms on one core; Taichi: 3.7 ms on one core)."""
    if not any(n.op in ATOMICS and plain_atomic(n) for n in walk(task.body)):
        return None
    everything = frozenset(n.arg.buffer for n in walk(task.body) if n.op in ATOMICS)
    return _task(task, everything)


def _task(task, private=None):
    if private is None:
        if not any(n.op in ATOMICS for n in walk(task.body)):
            return task  # no atomic: skip the ownership analysis and the rebuild
        private = private_buffers(task)
    if not private:
        return task

    def visit(n, srcs, blocks, arg, env):
        if n.op not in ATOMICS or n.arg.buffer not in private or not plain_atomic(n):
            return keep(n, srcs, blocks, arg, env)
        idx, value = srcs[:-1], srcs[-1]
        old = Node(Op.GLOBAL_LOAD, n.dtype, idx, arg, (), n.loc)
        combine = ATOMIC_COMBINE[n.op]
        new = value if combine is None else Node(combine, n.dtype, (old, value), None, (), n.loc)
        store = Node(Op.GLOBAL_STORE, None, (*idx, new), arg, (), n.loc)
        return Splice([old] + ([] if new is value else [new]) + [store], old)

    body = rebuild(task.body, visit)
    return task if body is task.body else replace(task, body=body)


def plain_atomic(n: Node) -> bool:
    """The atomic's value, result and element have one type (no conversion to keep), not u1
    (an atomic add of bools is an OR), not on a bit-field of a word (GlobalRef.mask: a plain
    store would write the whole word)."""
    dt = n.arg.dtype
    return n.dtype == dt and n.srcs[-1].dtype == dt and not dt.is_bool and not n.arg.mask
