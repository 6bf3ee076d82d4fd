"""Reverse-mode shapes that cannot be differentiated correctly, reported as compile errors with
the user's source line (seed "Improve diagnosis of unsupported reverse-mode AD patterns"):

* `check_dynamic_nesting`: with the adstack disabled (`init(ad_stack_experimental_enabled=False)`),
  a non-static loop nested in another loop (the parallel loop counts) cannot carry its locals to
  the reverse pass. Loops reached through `@func` calls are found too: they are inlined before
  this check runs, so the call boundary cannot hide them.
* `check_cross_iteration_raw`: in the parallel loop, reading a `needs_grad` global at an index
  that *another* iteration writes (`out[i] = out[i - 1] + x`) chains adjoints across iterations
  that run concurrently. In-place updates (`out[i] = out[i] + x`), sibling components
  (`out[i, 0] = out[i, 1] * 2`) and slots the loop never writes stay allowed. Only pairs of
  *different* parallel iterations count: a serial recurrence inside `for _ in range(1):` (one
  iteration) or inside each iteration's own slice (`out[b, j] = out[b, j - 1]`) is fine — the
  reverse walk of a serial loop chains its adjoints in order.
* `check_no_ndarray_gradients`: a differentiated kernel that reads or writes an ndarray's gradient
  (`x.grad[i]`) — the adjoint launch adds into those same buffers while it replays the kernel, so
  a read would not see what the forward launch saw, and a gradient has no gradient of its own.
  Taichi refuses the same (a RuntimeError when the adjoint compiles); the gradient passed as an
  argument of its own (`k(a.grad)`) is a constant and stays allowed.
* `check_bounds_not_overwritten`: a parallel loop whose range reads a global (`range(n[None])`)
  has its adjoint's range read again when the adjoint runs — after the whole forward kernel — so
  a later task of the kernel may not overwrite what the range reads.
"""
from __future__ import annotations

from kernel_ir.errors import SpiradAutodiffError
from kernel_ir.source import user_error
from kernel_ir.nodes import Block, Task, walk
from kernel_ir.ops import ATOMICS, Op
from kernel_ir.rewrite import expr_nodes

from .index_forms import IndexForms


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


def check_no_ndarray_gradients(task: Task):
    for n in walk(task.body):
        if (n.op == Op.GLOBAL_LOAD or n.op == Op.GLOBAL_STORE or n.op in ATOMICS) and \
                n.arg.kind == "ndarray" and n.arg.grad:
            name = n.arg.name[:-len(".grad")] if n.arg.name.endswith(".grad") else n.arg.name
            what = "reads" if n.op == Op.GLOBAL_LOAD else "writes"
            raise user_error(SpiradAutodiffError,
                             f"this kernel {what} '{name}.grad', the gradient of its ndarray "
                             f"argument '{name}', and is differentiated: its adjoint adds into the "
                             f"ndarrays' gradients while it runs again, so it cannot differentiate "
                             f"through a gradient (Taichi refuses it too). Pass the gradient as an "
                             f"argument of its own (k(a.grad, ...): a constant there), or use it in "
                             f"a kernel that is not differentiated", n.loc)


def check_bounds_not_overwritten(task: Task, later_writes):
    """`later_writes`: (kind, key, grad) of what the tasks after `task` write."""
    if task.kind != "range":
        return
    for b in (task.begin, task.end):
        for n in expr_nodes(b):
            if n.op == Op.GLOBAL_LOAD and _key(n.arg) in later_writes:
                raise user_error(SpiradAutodiffError,
                                 f"the range of this parallel loop reads '{n.arg.name}', which the "
                                 f"kernel overwrites after the loop; reverse mode reads the range "
                                 f"again when the adjoint runs (after the whole kernel) and would "
                                 f"get the new value. Keep the bound in a field the kernel does not "
                                 f"write later, or write it in another kernel", task.loc)


def check_cross_iteration_raw(task: Task, has_grad):
    if task.kind != "range":
        return
    rng = None
    if task.begin is not None and task.begin.op == Op.CONST and task.end.op == Op.CONST:
        rng = (int(task.begin.arg), int(task.end.arg))
        if rng[1] - rng[0] <= 1:
            return  # one iteration: no pair of different iterations
    writes, reads = {}, []
    for n in walk(task.body):
        if (n.op == Op.GLOBAL_STORE or n.op in ATOMICS) and has_grad(n.arg):
            writes.setdefault(_key(n.arg), []).append(n.srcs[:-1])
        elif n.op == Op.GLOBAL_LOAD and has_grad(n.arg):
            reads.append(n)
    forms = IndexForms(task.body)
    for r in reads:
        for w in writes.get(_key(r.arg), ()):
            if _may_alias_elsewhere(forms, r.srcs, w, task.index, rng):
                raise user_error(SpiradAutodiffError,
                                 f"'{r.arg.name}' is read here at an index that another iteration of the "
                                 f"parallel loop writes (a cross-iteration read-after-write on a field with "
                                 f"a gradient): its adjoint cannot be chained across concurrent iterations. "
                                 f"Read and write the same element (x[i] = x[i] + ...), move the recurrence "
                                 f"into a serial inner loop, or split it over separate kernel launches", r.loc)


def _key(ref):
    return (ref.kind, ref.key, ref.grad)


def _may_alias_elsewhere(f: IndexForms, read_idx, write_idx, index, rng) -> bool:
    """True when the read may hit an element a *different* iteration writes. It cannot when
    some axis never coincides (two different constants — a sibling component —, or `t` vs
    `t + 1` with `t` the same in every iteration), or holds the same injective expression of
    the parallel index (each iteration keeps to its own slice), or a constant the write's
    `index + k` never reaches over the loop's range, or when every axis is the same (the same
    element: an in-place update)."""
    same = True
    for a, b in zip(read_idx, write_idx):
        if f.never_same(a, b):
            return False
        if f.same(a, b):
            if f.offset(a, index) is not None:
                return False
            continue
        same = False
        k = f.offset(b, index)
        a = f.resolve(a)
        if a.op == Op.CONST and k is not None and rng is not None:
            lo, hi = rng[0] + k, rng[1] + k
            if not lo <= int(a.arg) < hi:
                return False  # a slot the loop never writes
    return not same
