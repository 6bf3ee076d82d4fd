"""Reverse mode refuses a sparse struct-for whose body changes the activity of the node it
loops over.

The forward kernel copies a node's activation masks before a struct-for whose body writes them
(`kernel_ir.nodes.AT_LAUNCH`, spirad/frontend/sparse_ops.py), so the loop visits exactly the
cells active when it starts. Its adjoint would have to visit the same cells, and neither source
of that set is sound at the adjoint's launch:

* the live masks hold the forward's new cells too: the adjoint of the body would run on cells
  the forward never visited and add their partials (`b[i] = a[i] + c[i]` gives `c.grad[j] +=
  b.grad[j]` for a new cell `j`, where the true derivative is 0) — a silent wrong gradient
  (Taichi's adjoint does this);
* the copy holds the set of the *last* launch that took it (a second launch of the kernel, or
  a second loop over the node in the same kernel, takes it again), so an adjoint run in reverse
  order reads another launch's set.

So such a kernel is not differentiated: the refusal names the loop and the way out (activate
in a kernel of its own before the loop, which then writes no mask and is differentiated). A
struct-for whose body writes no mask of its node reads the masks directly (no copy) and is
differentiated as any loop. This holds whatever the body does (`break`, `continue`, `while`,
early returns, nested loops, overwritten stores): only whether the forward writes a mask its
own struct-for tests decides, and that is read off the copy the frontend emitted.
"""
from __future__ import annotations

from kernel_ir.errors import SpiradAutodiffError
from kernel_ir.nodes import TaskList, is_snapshot, walk
from kernel_ir.ops import ATOMICS, Op
from kernel_ir.source import user_error


def refuse_mask_writing_loops(tl: TaskList) -> None:
    """Raise (at the struct-for) when a task list takes a struct-for's launch-time mask copy:
    a loop over a sparse node whose body activates or deactivates its cells."""
    for t in tl.tasks:
        for n in walk(t.body):
            is_copy = n.op in (Op.GLOBAL_STORE, Op.GLOBAL_LOAD) or n.op in ATOMICS
            if not (is_copy and is_snapshot(n.arg)):
                continue
            loc = next((m.loc for m in walk(t.body) if m.loc is not None
                        and m.op == Op.GLOBAL_LOAD and is_snapshot(m.arg)), n.loc)
            raise user_error(
                SpiradAutodiffError,
                "this struct-for's body activates or deactivates cells of the node it loops over "
                "(it visits the cells active when it starts): its gradient is not computed, "
                "because the adjoint cannot know which cells the forward visited; activate the "
                "cells in a kernel of its own before this one", loc)
