"""How a CPU launch of a range task runs: in the calling thread, or split over the worker pool.

The CPU runtime runs a range in the calling thread, or splits it over its worker pool
(`llvm_codegen.cpu_runtime`); a split costs tens of microseconds of pool dispatch, so it pays
only for enough work. A fixed iteration count decided that before (32768), which left DiffTaichi's
heavy small launches on one core (`wave`'s 256 iterations of a 256-trip loop each), where Taichi
uses every core. Now, per task:

* A task without atomics gives the same results however it is split, so it is split by its
  measured time (`Adaptive`): the last launch's time per iteration times this launch's range;
  `SPLIT_SECONDS` of work or more (and two iterations per worker) go to the pool.
* A task with atomics on shared elements also has a one-thread variant (`passes/demote_atomics`:
  plain read-modify-writes), valid only when the launch is not split. An uncontended locked
  compare-and-swap loop costs about `ATOMIC_WORK` IR ops (~5 ns against ~0.1 ns an op, measured
  on DiffTaichi's P2G and `wave` adjoint), a plain one `PLAIN_RMW_WORK`: where the atomic
  version spread over every worker still does more than the plain one on one core
  (`never_split`), only the variant is compiled and launches never split; otherwise the task is
  split from `split_threshold` iterations (a static estimate: the same program and range always
  run the same way, so float atomics always sum in the same order).
"""
from __future__ import annotations

import time

from kernel_ir.ops import ATOMICS, FLOAT_UNARY, LOOPS, Op

SPLIT_SECONDS = 2e-4     # measured work (one core) worth a split
SPLIT_WORK = 1 << 21     # estimated IR ops worth a split (~0.2 ms at ~0.1 ns an op)
DYNAMIC_TRIPS = 16       # assumed trips of a loop whose count is not known at compile time
ATOMIC_WORK = 50         # a locked compare-and-swap loop, uncontended
PLAIN_RMW_WORK = 2       # a load and a store
NEVER = 1 << 62          # a threshold no range reaches
_HEAVY = FLOAT_UNARY | {Op.POW, Op.ATAN2, Op.DIV}


def iteration_work(block, atomic: int = ATOMIC_WORK) -> int:
    """Estimated ops of one pass through `block`, an atomic counted as `atomic`."""
    w = 0
    for n in block.nodes:
        if n.op in LOOPS:
            trips = n.arg.static_trips if n.op == Op.RANGE_FOR and n.arg.static_trips is not None \
                else DYNAMIC_TRIPS
            w += 2 + trips * iteration_work(n.blocks[0], atomic)
        elif n.op == Op.IF:
            w += 1 + max(iteration_work(b, atomic) for b in n.blocks)
        elif n.blocks:
            w += sum(iteration_work(b, atomic) for b in n.blocks)
        else:
            w += atomic if n.op in ATOMICS else 8 if n.op in _HEAVY else 1
    return w


def never_split(task, workers: int) -> bool:
    """Its one-thread variant on one core beats its atomics spread over every worker."""
    return iteration_work(task.body) >= workers * iteration_work(task.body, PLAIN_RMW_WORK)


def split_threshold(task, lanes: int, workers: int) -> int:
    """The fewest iterations of range task `task` (`lanes` SIMD lanes) worth splitting, from
    the static estimate."""
    per = max(1, iteration_work(task.body) // max(1, lanes))
    return max(2 * workers, -(-SPLIT_WORK // per))


class Adaptive:
    """Split decisions of one task without atomics from its measured launch times."""
    __slots__ = ("per_iteration", "workers")

    def __init__(self, workers: int):
        self.per_iteration = 0.0  # seconds of one core per iteration, last launch (0: unknown)
        self.workers = workers

    def split(self, n: int) -> bool:
        return n >= 2 * self.workers and n * self.per_iteration >= SPLIT_SECONDS

    def measured(self, n: int, seconds: float, split: bool) -> None:
        self.per_iteration = seconds * (self.workers if split else 1) / n


clock = time.perf_counter
