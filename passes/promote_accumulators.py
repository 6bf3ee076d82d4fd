"""Accumulating into a global inside a serial loop: one atomic per loop, not one per iteration.

    for i in range(N):              # the task's parallel loop
        for j in range(N):          # a serial loop L
            force[i] += f(i, j)     # ATOMIC_ADD every trip

becomes, per (global, loop-invariant index) that L only ever atomically adds to,

        acc = 0
        for j in range(N):
            acc += f(i, j)          # a local (a register after mem2reg)
        force[i] += acc             # one ATOMIC_ADD after L

Why: Taichi demotes such atomics and LLVM keeps the element in a register; spirad's per-trip
atomic (a locked read-modify-write on the CPU, a CAS loop for floats on some GPUs) made Taichi's
`nbody` example several times slower (docs/coming_from_taichi.md). Valid because L never reads
or stores that global (any index) and never uses the atomics' old values: no statement in this
thread can observe the element during L, and for other threads atomic adds commute (the sum is
added atomically once; float rounding follows a different but equally valid order, as atomics
from several threads already do). The index must be loop-invariant (defined before L, or a
constant, which is re-made before L). Applied to what the backend compiles only (`driver`),
after reverse mode, so forward and adjoint tasks both benefit and autodiff sees the original.
"""
from __future__ import annotations

from dataclasses import replace

from kernel_ir.nodes import Block, GlobalRef, LoopArg, Node, TaskList, walk
from kernel_ir.ops import Op
from kernel_ir.rewrite import Splice, keep, rebuild

def promote_accumulators(tl: TaskList) -> TaskList:
    tasks = tuple(replace(t, body=_block(t.body)) if _candidate(t.body) else t for t in tl.tasks)
    if all(a.body is b.body for a, b in zip(tasks, tl.tasks)):
        return tl
    return TaskList(tl.name, tl.args, tasks, tl.temps)


def _candidate(block: Block) -> bool:
    """The block has a serial loop and an atomic add (else nothing to promote: no rebuild)."""
    ops = {n.op for n in walk(block)}
    return Op.RANGE_FOR in ops and Op.ATOMIC_ADD in ops


def _block(block: Block) -> Block:
    def visit(n, srcs, blocks, arg, env):
        n2 = keep(n, srcs, blocks, arg, env)
        if n2.op != Op.RANGE_FOR:
            return n2
        return _promote(n2)
    return rebuild(block, visit)


def _promote(loop: Node):
    """The loop with its promotable atomics replaced (Splice of setup, loop, flush), or it."""
    body = loop.blocks[0]
    nodes = list(walk(body))
    inside = set(nodes) | {loop.arg.index}
    inside |= {m.arg.index for m in nodes if isinstance(m.arg, LoopArg) and m.arg.index is not None}
    used = {s for m in nodes for s in m.srcs}
    by_buffer: dict = {}
    for m in nodes:
        if isinstance(m.arg, GlobalRef):
            by_buffer.setdefault(m.arg.buffer, []).append(m)
    groups: dict = {}  # (buffer, index key) -> [atomics]
    for buf, ms in by_buffer.items():
        if not all(m.op == Op.ATOMIC_ADD and m not in used and
                   all(s not in inside or s.op == Op.CONST for s in m.srcs[:-1]) for m in ms):
            continue
        for m in ms:
            key = tuple(("const", s.dtype, s.arg) if s in inside else s for s in m.srcs[:-1])
            groups.setdefault((buf, key), []).append(m)
    if not groups:
        return loop
    pre, post, replaced, slots = [], [], {}, []
    for (buf, key), atomics in groups.items():
        a0 = atomics[0]
        idx = []
        for k in key:
            if isinstance(k, tuple):
                c = Node(Op.CONST, k[1], (), k[2], (), a0.loc)
                pre.append(c)
                idx.append(c)
            else:
                idx.append(k)
        acc = Node(Op.ALLOCA, a0.dtype, (), f"{a0.arg.name}+=", (), a0.loc)
        zero = Node(Op.CONST, a0.dtype, (), 0.0 if a0.dtype.is_float else 0, (), a0.loc)
        pre += [acc, zero, Node(Op.STORE, None, (acc, zero), None, (), a0.loc)]
        total = Node(Op.LOAD, a0.dtype, (acc,), None, (), a0.loc)
        post += [total, Node(Op.ATOMIC_ADD, a0.dtype, (*idx, total), a0.arg, (), a0.loc)]
        slots.append(acc)
        for m in atomics:
            replaced[m] = acc

    def visit(n, srcs, blocks, arg, env):
        acc = replaced.get(n)
        if acc is None:
            return keep(n, srcs, blocks, arg, env)
        old = Node(Op.LOAD, n.dtype, (acc,), None, (), n.loc)
        new = Node(Op.ADD, n.dtype, (old, srcs[-1]), None, (), n.loc)
        return Splice([old, new, Node(Op.STORE, None, (acc, new), None, (), n.loc)])

    new_body = rebuild(body, visit)
    arg = replace(loop.arg, carried=tuple(loop.arg.carried) + tuple(slots))
    new_loop = Node(loop.op, loop.dtype, loop.srcs, arg, (new_body,) + loop.blocks[1:], loop.loc)
    return Splice(pre + [new_loop] + post)
