"""IR verifier. Invariants (checked after every pass in tests):

1. Every source of a node is defined earlier in the same block or in an enclosing block, or is
   the LOOP_INDEX of an enclosing RANGE_FOR / the task's index (structured dominance).
2. LOAD/STORE/ADSTACK_* address an ALLOCA / ADSTACK_ALLOCA; GLOBAL_* carry a GlobalRef and one
   i32 index per dimension.
3. Binary ops have operands of equal dtype; comparisons yield u1; IF/SELECT conditions are u1;
   STORE values match the slot's dtype.
4. BREAK appears only inside a loop; CONTINUE inside a loop or at a task's top level.
5. Parallel RANGE_FORs appear only at the kernel's top level (before offloading) and never after
   offloading; CALL regions are gone after inlining (`inlined=True`); PRINT nodes are gone
   after offloading (lowered by passes/lower_print).
6. Each node object appears once in the whole kernel.
"""
from __future__ import annotations

from .dtypes import i32, u1
from .nodes import Block, GlobalRef, KernelIR, Node, Task, TaskList
from .ops import ATOMICS, BINARY, COMPARE, GLOBAL_ACCESS, Op


class VerifyError(RuntimeError):
    pass


class _V:
    def __init__(self, inlined, offloaded):
        self.inlined, self.offloaded = inlined, offloaded
        self.seen = set()

    def fail(self, n, msg):
        raise VerifyError(f"IR verify: {msg} at {n!r} ({n.op.name})")

    def block(self, block: Block, defined: set, in_loop: bool, top: bool, task_top: bool):
        defined = set(defined)
        for n in block.nodes:
            if id(n) in self.seen:
                self.fail(n, "node appears twice")
            self.seen.add(id(n))
            for s in n.srcs:
                if not isinstance(s, Node):
                    self.fail(n, "source is not a node")
                if s not in defined:
                    self.fail(n, f"source {s!r} ({s.op.name}) not defined before use")
            self.check(n)
            if n.op == Op.BREAK and not in_loop:
                self.fail(n, "break outside a loop")
            if n.op == Op.CONTINUE and not (in_loop or task_top):
                self.fail(n, "continue outside a loop")
            if n.op == Op.CALL and self.inlined:
                self.fail(n, "CALL left after inlining")
            if n.op == Op.PRINT and self.offloaded:
                self.fail(n, "PRINT left after offloading")
            if n.op == Op.IF:
                self.block(n.blocks[0], defined, in_loop, False, task_top)
                self.block(n.blocks[1], defined, in_loop, False, task_top)
            elif n.op == Op.CALL:
                self.block(n.blocks[0], defined, in_loop, top, task_top)
            elif n.op in (Op.RANGE_FOR, Op.WHILE):
                if n.arg.parallel and (self.offloaded or not top):
                    self.fail(n, "parallel loop not at the kernel's top level")
                inner = defined | ({n.arg.index} if n.arg.index is not None else set())
                for c in n.arg.carried:
                    if c.op != Op.ALLOCA:
                        self.fail(n, "carried entry is not an ALLOCA")
                self.block(n.blocks[0], inner, True, False, task_top and n.arg.parallel)
            defined.add(n)

    def check(self, n: Node):
        op = n.op
        if op in BINARY:
            a, b = n.srcs
            if a.dtype != b.dtype:
                self.fail(n, f"operand dtypes differ: {a.dtype} vs {b.dtype}")
            if op in COMPARE and n.dtype != u1:
                self.fail(n, "comparison must yield u1")
        elif op in (Op.LOAD, Op.STORE):
            if n.srcs[0].op != Op.ALLOCA:
                self.fail(n, "LOAD/STORE of a non-ALLOCA")
            if op == Op.STORE and n.srcs[1].dtype != n.srcs[0].dtype:
                self.fail(n, f"STORE of {n.srcs[1].dtype} into {n.srcs[0].dtype} slot")
        elif op in GLOBAL_ACCESS:
            ref = n.arg
            if not isinstance(ref, GlobalRef):
                self.fail(n, "global access without GlobalRef")
            nidx = len(n.srcs) - (0 if op == Op.GLOBAL_LOAD else 1)
            if nidx != ref.ndim:
                self.fail(n, f"{nidx} indices for {ref.ndim}-d {ref!r}")
            if any(s.dtype != i32 for s in n.srcs[:nidx]):
                self.fail(n, "indices must be i32")
            if op != Op.GLOBAL_LOAD and n.srcs[-1].dtype != ref.dtype:
                self.fail(n, f"storing {n.srcs[-1].dtype} into {ref.dtype} {ref!r}")
        elif op in (Op.IF, Op.SELECT):
            if n.srcs[0].dtype != u1:
                self.fail(n, "condition must be u1")
        elif op in (Op.ADSTACK_PUSH, Op.ADSTACK_POP, Op.ADSTACK_LOAD_TOP, Op.ADSTACK_LOAD_TOP_ADJ,
                    Op.ADSTACK_ACC_ADJ):
            if n.srcs[0].op != Op.ADSTACK_ALLOCA:
                self.fail(n, "adstack op on a non-adstack")


def verify_kernel(k: KernelIR, inlined=False):
    _V(inlined, False).block(k.body, set(), False, True, False)


def verify_tasks(tl: TaskList):
    v = _V(True, True)
    for t in tl.tasks:
        t: Task
        defined = {t.index} if t.index is not None else set()
        v.block(t.body, defined, False, False, True)
