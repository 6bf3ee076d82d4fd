"""Math functions without a native lowering become their algorithm in IR ops, before code
generation (`driver._program`), so every backend computes them the same way.

    expand_math(task_list) -> task_list without the ops of `kernel_ir.mathfns` that have an
    `expand` (log1p, ...)

Applied to what the backends compile only, after reverse and forward mode: autodiff sees the
function as one op with its slope, and the reference interpreter keeps its own meaning (numpy),
which the tests compare the expansion with (`MathFn.ulp`).
"""
from __future__ import annotations

from dataclasses import replace

from kernel_ir.builder import Emit, IRBuilder
from kernel_ir.mathfns import MATH
from kernel_ir.nodes import TaskList, walk
from kernel_ir.rewrite import Splice, keep, rebuild

EXPANDED = {f.op: f.expand for f in MATH if f.expand is not None}


def _visit(n, srcs, blocks, arg, env):
    expand = EXPANDED.get(n.op)
    if expand is None:
        return keep(n, srcs, blocks, arg, env)
    b = IRBuilder()
    b.loc = n.loc
    v = expand(Emit(b), *srcs)
    return Splice(list(b.finish().nodes), v)


def expand_math(tl: TaskList) -> TaskList:
    tasks = tuple(replace(t, body=rebuild(t.body, _visit))
                  if any(n.op in EXPANDED for n in walk(t.body)) else t for t in tl.tasks)
    if all(a.body is b.body for a, b in zip(tasks, tl.tasks)):
        return tl
    return TaskList(tl.name, tl.args, tasks, tl.temps)
