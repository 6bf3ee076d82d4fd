"""Reverse-mode shapes that cannot be differentiated correctly, reported as compile errors with
the user's source line (seed "Improve diagnosis of unsupported reverse-mode AD patterns"):

* `check_dynamic_nesting`: with the adstack disabled (`init(ad_stack_experimental_enabled=False)`),
  a non-static loop nested in another loop (the parallel loop counts) cannot carry its locals to
  the reverse pass. Loops reached through `@func` calls are found too: they are inlined before
  this check runs, so the call boundary cannot hide them.
* `check_cross_iteration_raw`: in the parallel loop, reading a `needs_grad` global at an index
  that *another* iteration writes (`out[i] = out[i - 1] + x`) chains adjoints across iterations
  that run concurrently. In-place updates (`out[i] = out[i] + x`), sibling components
  (`out[i, 0] = out[i, 1] * 2`) and slots the loop never writes stay allowed.
"""
from __future__ import annotations

from kernel_ir.errors import SpiradAutodiffError
from kernel_ir.source import user_error
from kernel_ir.nodes import Block, Node, Task, walk
from kernel_ir.ops import Op


def check_dynamic_nesting(task: Task):
    def visit(block: Block, depth: int):
        for n in block.nodes:
            if n.op in (Op.RANGE_FOR, Op.WHILE):
                dynamic = n.op == Op.WHILE or n.arg.static_trips is None
                if dynamic and depth > 0:
                    raise user_error(SpiradAutodiffError,
                                     "this loop has a run-time trip count and is nested in another loop; "
                                     "reverse mode needs the adstack to carry its values, but it is disabled "
                                     "(init(ad_stack_experimental_enabled=False)). Enable the adstack, or make "
                                     "the trip count static with sd.static(range(N))", n.loc)
                visit(n.blocks[0], depth + 1)
            elif n.blocks:
                for b in n.blocks:
                    visit(b, depth)
    visit(task.body, 1 if task.kind == "range" else 0)


def _same(a: Node, b: Node) -> bool:
    if a is b:
        return True
    if a.op != b.op or a.dtype != b.dtype or len(a.srcs) != len(b.srcs):
        return False
    if a.op == Op.CONST:
        return a.arg == b.arg
    if a.op in (Op.ARG, Op.NDARRAY_SHAPE, Op.LOOP_INDEX):
        return a.arg == b.arg if a.op != Op.LOOP_INDEX else a is b
    if a.op == Op.GLOBAL_LOAD and a.arg != b.arg:
        return False
    return all(_same(x, y) for x, y in zip(a.srcs, b.srcs))


def check_cross_iteration_raw(task: Task, has_grad):
    if task.kind != "range":
        return
    writes, reads = {}, []
    for n in walk(task.body):
        if n.op in (Op.GLOBAL_STORE, Op.ATOMIC_ADD) and has_grad(n.arg):
            writes.setdefault(_key(n.arg), []).append(n.srcs[:-1])
        elif n.op == Op.GLOBAL_LOAD and has_grad(n.arg):
            reads.append(n)
    rng = None
    if task.begin is not None and task.begin.op == Op.CONST and task.end.op == Op.CONST:
        rng = (int(task.begin.arg), int(task.end.arg))
    for r in reads:
        ws = writes.get(_key(r.arg))
        if not ws:
            continue
        for w in ws:
            if _may_alias_elsewhere(r.srcs, w, task.index, rng):
                raise user_error(SpiradAutodiffError,
                                 f"'{r.arg.name}' is read here at an index that another iteration of the "
                                 f"parallel loop writes (a cross-iteration read-after-write on a field with "
                                 f"a gradient): its adjoint cannot be chained across concurrent iterations. "
                                 f"Read and write the same element (x[i] = x[i] + ...), move the recurrence "
                                 f"into a serial inner loop, or split it over separate kernel launches", r.loc)


def _key(ref):
    return (ref.kind, ref.key, ref.grad)


def _depends_on(n: Node, index: Node) -> bool:
    if n is index:
        return True
    return any(_depends_on(s, index) for s in n.srcs)


def _offset_of_index(n: Node, index: Node):
    """k when `n` is `index + k` / `index - k` / `index` (an injective function of the parallel
    index), else None."""
    if n is index:
        return 0
    if n.op in (Op.ADD, Op.SUB) and n.srcs[1].op == Op.CONST and n.srcs[0] is index:
        k = int(n.srcs[1].arg)
        return k if n.op == Op.ADD else -k
    if n.op == Op.ADD and n.srcs[0].op == Op.CONST and n.srcs[1] is index:
        return int(n.srcs[0].arg)
    return None


def _may_alias_elsewhere(read_idx, write_idx, index, rng=None) -> bool:
    """True when the read may hit an element a *different* iteration writes. It cannot when
    some axis holds two different constants (a sibling component), or the same injective
    expression of the parallel index (each iteration keeps to its own slice), or a constant
    the write's `index + k` never reaches over the loop's range, or when every axis is the same
    (the same element: an in-place update)."""
    same = True
    for a, b in zip(read_idx, write_idx):
        if a.op == Op.CONST and b.op == Op.CONST and a.arg != b.arg:
            return False
        if _same(a, b):
            if index is not None and _offset_of_index(a, index) is not None:
                return False
            continue
        same = False
        k = _offset_of_index(b, index) if index is not None else None
        if a.op == Op.CONST and k is not None and rng is not None:
            lo, hi = rng[0] + k, rng[1] + k
            if not lo <= int(a.arg) < hi:
                return False  # a slot the loop never writes
    return not same
