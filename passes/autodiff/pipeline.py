"""Reverse mode as a short list of named passes (verifier between them in debug mode):

    refuse_mask_writing_loops (a sparse struct-for that changes its own node's activity)
    for each task:  diagnostics (cross-iteration read-after-write; dynamic nesting without
                    the adstack; ndarray gradients read or written)
    for each task, last to first:
        normalize   (lower_jumps -> materialize -> snapshot_loads)
        global reads (a read the reverse walk needs must not be overwritten later)
        capacities  (adstack size expressions; None: measured at launch)
        adjoint     (forward replay onto adstacks + reverse walk)
        stack tops  (top entries and, where exact, top adjoints cached in locals)
    counting        (the counting program of the measured stacks, if any)

A kernel whose tasks hand values through temporaries first replays those tasks (global writes
dropped, temporaries kept) so every adjoint task sees the values it saw in the forward run.
`reverse_mode` returns (adjoint task list, counting task list or None); the counting task list
takes the kernel's arguments plus one i32 ndarray, `counts`, into which counter k of an
ADSTACK_ALLOCA with `measured == k` is max-reduced.
"""
from __future__ import annotations

from kernel_ir import verifier
from kernel_ir.errors import SpiradAutodiffError
from kernel_ir.dtypes import i32
from kernel_ir.nodes import ArgSpec, GlobalRef, Task, TaskList, globals_used, readonly_fields, walk
from kernel_ir.ops import ATOMICS, Op
from kernel_ir.rewrite import keep, rebuild

from .adjoint import AdjointBuilder, stack_slots
from .diagnostics import (check_bounds_not_overwritten, check_cross_iteration_raw,
                          check_dynamic_nesting, check_no_ndarray_gradients)
from .global_reads import check_overwritten_reads
from .sparse_activity import refuse_mask_writing_loops
from .normalize import normalize
from .capacities import capacities
from .loop_checkpoint import checkpoint_loops
from .stack_tops import promote_stack_tops


def _replay_only(t: Task) -> Task:
    def visit(n, srcs, blocks, arg, env):
        if (n.op == Op.GLOBAL_STORE or n.op in ATOMICS) and n.arg.kind != "temp":
            return None  # primal outputs are already written; only temporaries are replayed
        return keep(n, srcs, blocks, arg, env)
    return Task(t.kind, rebuild(t.body, visit), t.index, t.begin, t.end, t.name + "_replay", t.loc)


def _check_no_float_reductions_into_temps(t: Task) -> None:
    """`s += x[i]` into a kernel-scope local (an atomic on a kernel temporary, passes/offload)
    carries no gradient: refused rather than a silent zero."""
    from kernel_ir.errors import SpiradAutodiffError
    from kernel_ir.nodes import walk
    from kernel_ir.source import user_error
    for n in walk(t.body):
        if n.op in ATOMICS and n.arg.kind == "temp" and n.dtype.is_float:
            raise user_error(SpiradAutodiffError, f"the parallel loop accumulates into "
                             f"'{n.arg.name}', a local declared outside it: that reduction is not "
                             f"differentiated; accumulate into a 0-d field with needs_grad=True "
                             f"instead (s[None] += ...)", n.loc)


COUNTS_NAME = "adstack_counts"  # the counting program's extra ndarray argument


def reverse_mode(tl: TaskList, grad_of, default_size=None, forced_size=None, verify=False,
                 adstack_enabled=True, checkpoint=0, warn_overwritten_reads=False) -> tuple:
    """(adjoint task list, counting task list or None). `checkpoint` > 0: the checkpointed
    adjoint (loop_checkpoint.py): each task's top-level loops that store a stacked local run in
    segments of that many trips, and every stack of such a task is measured.
    `warn_overwritten_reads`: a read of a value a later write overwrote is a warning, and
    differentiated as it is, instead of an error (SPIRAD_AD_OVERWRITTEN_READS=warn, which the
    driver reads: passes read no switch)."""
    refuse_mask_writing_loops(tl)  # which cells the forward visited is unknown: sparse_activity.py
    tasks = []
    ckpts = {}     # forward task -> {loop: (S, counter)}
    bodies = {}    # forward task -> its normalized body
    measured = {}  # forward task -> [(slot, counter index)]
    n_counters = 0
    written = set()
    written_from = []  # per task: refs written by that task or a later one
    for t in tl.tasks:
        _check_no_float_reductions_into_temps(t)
        check_no_ndarray_gradients(t)
        check_cross_iteration_raw(t, lambda ref: grad_of(ref) is not None)
        if not adstack_enabled:
            check_dynamic_nesting(t)
        written |= {(r.kind, r.key, r.grad) for r in globals_used(t.body)[1]}
    later = set()
    for t in reversed(tl.tasks):  # refs written by a *later* task
        written_from.append(frozenset(later))
        later |= {(r.kind, r.key, r.grad) for r in globals_used(t.body)[1]}
    written_from.reverse()
    index_of = {id(t): k for k, t in enumerate(tl.tasks)}
    for t, later_writes in zip(tl.tasks, written_from):
        check_bounds_not_overwritten(t, later_writes)
    if tl.temps:
        tasks += [_replay_only(t) for t in tl.tasks]
    readonly = readonly_fields(*(t.body for t in tl.tasks))
    for t in reversed(tl.tasks):
        body = normalize(t.body, readonly)
        if verify:
            verifier.verify_tasks(TaskList(tl.name, tl.args, (Task(t.kind, body, t.index, t.begin, t.end),)))
        on_stack, needed = stack_slots(body, lambda ref: grad_of(ref) is not None)
        overwritten = written_from[index_of[id(t)]]
        rng = None
        if t.begin is not None and t.begin.op == Op.CONST and t.end.op == Op.CONST:
            rng = (int(t.begin.arg), int(t.end.arg))
        try:
            check_overwritten_reads(body, on_stack, needed,
                                    lambda ref: (ref.kind, ref.key, ref.grad) in overwritten,
                                    t.index, rng)
        except SpiradAutodiffError as e:
            if not warn_overwritten_reads:
                raise
            import warnings
            from kernel_ir.errors import SpiradWarning
            warnings.warn(f"{e}\n(SPIRAD_AD_OVERWRITTEN_READS=warn: differentiated as it is)",
                          SpiradWarning, stacklevel=2)
        slots = [n for n in walk(body) if n.op == Op.ALLOCA and n in on_stack]
        loops = checkpoint_loops(body, on_stack) if checkpoint else []
        if loops:  # every stack measured, by a count that follows the segments
            caps = [(None, None)] * len(slots)
        else:
            caps = capacities(body, t, default_size, forced_size, written, on_stack)
        m = {}
        for slot, (cap, _) in zip(slots, caps):
            if cap is None:
                m[slot] = n_counters
                n_counters += 1
        ck = {}
        for lp in loops:
            ck[lp] = (int(checkpoint), n_counters)
            n_counters += 1
        bodies[id(t)], measured[id(t)], ckpts[id(t)] = body, list(m.items()), ck
        adj = AdjointBuilder(body, grad_of, on_stack, caps, needed, m, ck).build(t.index)
        tasks.append(Task(t.kind, promote_stack_tops(adj), t.index, t.begin, t.end,
                          t.name + "_grad", t.loc))
    out = TaskList(tl.name + "_grad", tl.args, tuple(tasks), tl.temps + tuple(
        g for g in (grad_of(r) for r in tl.temps) if g is not None))
    if verify:
        verifier.verify_tasks(out)
    counting = None
    if n_counters:
        counts = GlobalRef("ndarray", len(tl.args), i32, 1, None, COUNTS_NAME)
        from .counting import counting_tasks  # adjoints with counters only (first compile: #27)
        counting = TaskList(tl.name + "_count", tl.args + (ArgSpec(COUNTS_NAME, "ndarray", i32, 1),),
                            counting_tasks(tl, [bodies[id(t)] for t in tl.tasks],
                                           [measured[id(t)] for t in tl.tasks], counts,
                                           [ckpts[id(t)] for t in tl.tasks]), tl.temps)
        if verify:
            verifier.verify_tasks(counting)
    return out, counting
