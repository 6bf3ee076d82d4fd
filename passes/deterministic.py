"""`sd.init(deterministic=True)`: parallel loops whose result depends on the order of their
iterations run their iterations in index order.

Which loops. A range task's iterations run concurrently, in an order no one fixes (CPU worker
threads, GPU invocations, SIMD lanes). Its result depends on that order only through atomics on
elements that several iterations share (`kernel_ir.ownership`: elements of other buffers belong
to one iteration, and a race of plain stores is a bug of the program, not a schedule):

* a floating-point atomic (add, sub, mul, min, max, ...): float addition is not associative, so
  `s += x[i]` rounds differently in another order; min / max differ in the sign of a zero and
  in which NaN survives;
* any atomic whose returned old value is used (`k = sd.atomic_add(count[None], 1)`, then
  `out[k] = ...`): which iteration gets which slot is the schedule;
* an exchange (`sd.atomic_exchange`): the last one wins.

Any other integer atomic whose result is unused is order-independent (wrapping add, and, or,
xor, min, max and mul are associative and commutative on integers): left parallel. So are atomics
on iteration-private buffers (`demote_atomics` makes them plain read-modify-writes).

What changes (`order_sensitive`, `serialise`). Such a task becomes a serial (one-thread) task
whose body is the loop itself:

    for i in range(b, e):   # parallel           ->   (one thread) for i in range(b, e): body
        body

so its iterations run one after another, in index order, in one thread: every run performs the
same floating-point operations in the same order, on every arch and whatever the number of CPU
threads, GPU invocations or lanes. Its atomics then act on elements no other thread touches
(`demote_atomics` treats a serial task's buffers as private: plain read-modify-writes). Forward
and adjoint kernels alike: reverse mode's `.grad` accumulations are atomic adds, and this runs
on what the backend compiles (`driver._program`), after reverse mode, so autodiff sees the
parallel loop (no adstack for the new serial loop: the body's locals are declared inside it and
carry nothing from one iteration to the next, architecture §4). Tasks are already run one after
another, and serial code is already ordered, so the whole kernel is then ordered. The bounds of
the loop are the task's own bound expressions, evaluated by the one thread when the task starts
(as a parallel loop's are: a range read from a field sees everything earlier).

lavapipe (`ordered_task`). llvmpipe ends an invocation's loops after 65,535 iterations
(architecture §5), so one invocation cannot run a long loop. On such a device
(`BackendBase.ordered_chunk`) the task instead becomes an *ordered* range task over chunks of
`chunk` iterations: its iteration c runs the loop's iterations [b + c * chunk, min(b + (c + 1) *
chunk, e)) in index order, and the backend dispatches one chunk at a time, one invocation each,
with a memory barrier between dispatches (`Task.ordered`; `SpirvBackend.launch`). The order of
the floating-point operations is again the index order, the same in every run. No two
iterations of an ordered task run at once, so its buffers count as iteration-private
(`kernel_ir.ownership`) and its atomics are demoted as a serial task's. A chunk is a quarter of
the cap: a body with more than about three inner loop visits per iteration meets the loop-cap
error (never a truncated result).

Tasks with adstacks are handled alike: each iteration's stacks are allocated (and emptied)
inside the new loop, as in their own parallel iteration.

Cost: these loops use one thread (one invocation). The CPU keeps no per-chunk partial sums
(each would need a copy of the elements a loop scatters into); `benchmarks/bench_deterministic.py`
measures what the serial loops cost (docs/interop.md, "Deterministic runs").
"""
from __future__ import annotations

from dataclasses import replace

from kernel_ir.nodes import Block, LoopArg, Node, TaskList, walk
from kernel_ir.ops import ATOMICS, Op
from kernel_ir.ownership import private_buffers
from kernel_ir.rewrite import clone_expr, expr_nodes


def order_sensitive(task) -> bool:
    """Does range task `task`'s result depend on the order its iterations run in (module)?"""
    if task.kind != "range":
        return False
    atomics = [n for n in walk(task.body) if n.op in ATOMICS]
    if not atomics:
        return False
    private = private_buffers(task)
    shared = [n for n in atomics if n.arg.buffer not in private]
    if not shared:
        return False
    if any(n.arg.dtype.is_float or n.op == Op.ATOMIC_XCHG for n in shared):
        return True
    used = {id(s) for n in walk(task.body) for s in n.srcs}
    return any(id(n) in used for n in shared)


def serial_task(task):
    """Range task `task` as a serial task running its loop in index order (module)."""
    bounds: list = []
    for b in (task.begin, task.end):
        expr_nodes(b, bounds)
    loop = Node(Op.RANGE_FOR, None, (task.begin, task.end),
                LoopArg(task.index, (), static_trips=_trips(task.begin, task.end)), (task.body,), task.loc)
    return replace(task, kind="serial", body=Block(tuple(bounds) + (loop,)), index=None,
                   begin=None, end=None)


def ordered_task(task, chunk: int):
    """Range task `task` as an *ordered* range task (module: lavapipe) over its chunks of
    `chunk` iterations: iteration c runs the loop's iterations [b + c * chunk, min(b + (c + 1)
    * chunk, e)) in index order, and the backend runs iteration c + 1 after iteration c."""
    dt = task.index.dtype
    loc = task.loc

    def c(v):
        return Node(Op.CONST, dt, (), v, (), loc)

    def op(o, a, b):
        return Node(o, dt, (a, b), None, (), loc)

    k = c(chunk)
    b0, e0 = clone_expr(task.begin), clone_expr(task.end)
    count = op(Op.FLOORDIV, op(Op.ADD, op(Op.MAX, op(Op.SUB, e0, b0), c(0)), c(chunk - 1)),
               c(chunk))
    index = Node(Op.LOOP_INDEX, dt, (), object(), (), loc)
    b1, e1 = clone_expr(task.begin), clone_expr(task.end)
    lo = op(Op.ADD, b1, op(Op.MUL, index, k))
    hi = op(Op.MIN, op(Op.ADD, lo, c(chunk)), e1)
    head: list = []
    for n in (lo, hi):
        expr_nodes(n, head)
    loop = Node(Op.RANGE_FOR, None, (lo, hi), LoopArg(task.index, ()), (task.body,), loc)
    return replace(task, body=Block(tuple(head) + (loop,)), index=index, begin=c(0),
                   end=count, ordered=True)


def serialise(tl: TaskList, chunk: int | None = None) -> TaskList:
    """`tl` with every order-sensitive range task run in index order (module): a serial task,
    or with `chunk`, an ordered range task of `chunk` iterations per iteration."""
    tasks = tuple((serial_task(t) if chunk is None else ordered_task(t, chunk))
                  if order_sensitive(t) else t for t in tl.tasks)
    if all(a is b for a, b in zip(tasks, tl.tasks)):
        return tl
    return TaskList(tl.name, tl.args, tasks, tl.temps)


def _trips(begin: Node, end: Node):
    if begin.op == Op.CONST and end.op == Op.CONST:
        return max(0, int(end.arg) - int(begin.arg))
    return None
