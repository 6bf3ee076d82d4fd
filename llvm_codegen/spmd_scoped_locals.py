"""Lane locals written without a blend where no lane could read the old value (`Task.lanes`).

Why: under a partial mask a STORE to a varying local is a blend `select(mask, new, old)` and an
ALLOCA's zero one too (`spmd_control`), so every local's old value stays live back to the task's
entry: SROA then threads each local of Genesis' narrow phase through every block after it
(58,228 vector phis in its lane function), and LLVM's pipeline and the register allocator pay
for them (docs/performance.md, glcomp).

When a lane's old value cannot be read: kernel IR is block-scoped (`kernel_ir.verifier`, rule 1:
a node's sources are defined earlier in its block or an enclosing one), so an ALLOCA's slot is
read only later in the ALLOCA's block or in blocks nested there. A lane inactive where that
block runs the ALLOCA (or one of its own STOREs) is inactive for the rest of that run of the
block: masks inside a block only narrow — a varying IF's sides and a varying loop's trips run
under a part of the mask, and a BREAK / CONTINUE / top-level CONTINUE under a varying IF removes
its lanes from the rest of the block (its loop body or the task body: the iteration ends for
them, the mask is re-intersected after the statement). A lane that runs the block again (the
next trip of a loop around it) runs the ALLOCA again first, which zeroes the slot for it. So at
the ALLOCA and at a STORE directly in the ALLOCA's block (not inside a nested IF or loop, where
lanes left out must keep their value for the statements after it), the inactive lanes' values
are never read: the full vector is stored. The active lanes get the values the blend gave
them, so every lane reads what it read before (forward programs only: autodiff never sees
`Task.lanes` tasks).
"""
from __future__ import annotations

from kernel_ir.ops import Op


def blend_free_stores(body) -> frozenset:
    """The STOREs of task body `body` that sit directly in the block of the ALLOCA they write."""
    free = set()

    def block(b):
        mine = set()
        for n in b.nodes:
            if n.op == Op.ALLOCA:
                mine.add(n)
            elif n.op == Op.STORE and n.srcs[0] in mine:
                free.add(n)
            for inner in n.blocks or ():
                block(inner)

    block(body)
    return frozenset(free)
