"""`Tape(validation=True)`: instrument a forward task list to check Taichi's global data access
rule at run time — an element of a differentiated field that a recorded kernel has read must not
be overwritten (plain store) later in the Tape, since the adjoints re-read it.

    x[I] read          ->  x[I] read; checkbit_x[I] = 1
    x[I] = v           ->  violations[k] += checkbit_x[I]; x[I] = v     (k: x's slot)

`checkbit_of(ref)` gives a field ref's (checkbit ref, slot) or None (not checked); accumulations
(`+=`, atomic_add) are allowed by the rule and left alone. The Tape clears the checkbits at entry
and reads `violations` after each recorded launch (spirad.recording.tape). IR -> IR, like every pass.
"""
from __future__ import annotations

from dataclasses import replace

from kernel_ir import dtypes as T
from kernel_ir.nodes import Node, TaskList
from kernel_ir.ops import Op
from kernel_ir.rewrite import Splice, keep, rebuild


def instrument(tl: TaskList, checkbit_of, violations_ref) -> TaskList:
    def visit(n, srcs, blocks, arg, env):
        new = keep(n, srcs, blocks, arg, env)
        if n.op not in (Op.GLOBAL_LOAD, Op.GLOBAL_STORE) or n.arg.kind != "field":
            return new
        hit = checkbit_of(n.arg)
        if hit is None:
            return new
        cb, slot = hit
        loc = n.loc
        if n.op == Op.GLOBAL_LOAD:
            one = Node(Op.CONST, T.i32, (), 1, (), loc)
            mark = Node(Op.GLOBAL_STORE, None, (*new.srcs, one), cb, (), loc)
            return Splice([new, one, mark], new)
        idx = new.srcs[:-1]
        bit = Node(Op.GLOBAL_LOAD, T.i32, tuple(idx), cb, (), loc)
        k = Node(Op.CONST, T.i32, (), slot, (), loc)
        count = Node(Op.ATOMIC_ADD, T.i32, (k, bit), violations_ref, (), loc)
        return Splice([bit, k, count, new], new)

    tasks = tuple(replace(t, body=rebuild(t.body, visit)) for t in tl.tasks)
    return replace(tl, tasks=tasks)
