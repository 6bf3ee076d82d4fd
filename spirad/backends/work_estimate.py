"""How a CPU launch of a range task runs: in the calling thread, or split over the worker pool.

The CPU runtime runs a range in the calling thread, or splits it over its worker pool
(`llvm_codegen.cpu_runtime`); a split costs tens of microseconds of pool dispatch, so it pays
only for enough work. A fixed iteration count decided that before (32768), which left DiffTaichi's
heavy small launches on one core (`wave`'s 256 iterations of a 256-trip loop each), where Taichi
uses every core. Now, per task:

* A task without atomics gives the same results however it is split, so it is split by its
  measured time (`Adaptive`): the last launch's time per iteration times this launch's range;
  `SPLIT_SECONDS` of work or more (and two iterations per worker) go to the pool.
* A task with atomics on shared elements may also have a one-thread variant
  (`passes/demote_atomics`: plain read-modify-writes, scalar code), valid only when the launch
  is not split. An uncontended locked compare-and-swap loop costs about `ATOMIC_WORK` IR ops
  (~5 ns against ~0.1 ns an op, measured on DiffTaichi's P2G and `wave` adjoint), a plain one
  `PLAIN_RMW_WORK`; SIMD lanes divide the rest (`LANE_GAIN`), and a reduction into one element
  (`loss[None] += ...`) costs one atomic per lane group (`costs`). `one_thread_choice` compares:
  no variant where the task's own code is cheaper; only the variant (never split) where the own
  code spread over every worker still costs more than the variant on one core; else both, and
  the task is split from `split_threshold` iterations (a static estimate: the same program and
  range always run the same way, so float atomics always sum in the same order). Measured with
  `benchmarks/bench_launch.py --mpm` (DiffTaichi-shaped particle kernels).
"""
from __future__ import annotations

import time

from kernel_ir.nodes import Block
from kernel_ir.ops import ATOMICS, FLOAT_UNARY, LOOPS, Op

SPLIT_SECONDS = 2e-4     # measured work (one core) worth a split
# Work in units of one scalar IR op (~0.04 ns on this Zen 4: LLVM folds much of the IR), as
# measured on DiffTaichi's P2G / G2P kernels and their adjoints (benchmarks/bench_launch.py):
SPLIT_WORK = 1 << 21     # ~75 us: more than a split's pool dispatch
DYNAMIC_TRIPS = 16       # assumed trips of a loop whose count is not known at compile time
MIN_SPLIT_TRIPS = 4      # fewest iterations a split takes: two per worker, two workers at least
LANES_WORK = 1 << 27     # an iteration's estimated work for lanes at one worker (`worth_lanes`)
ATOMIC_WORK = 200        # a locked compare-and-swap loop (~5 ns uncontended, more when shared)
PLAIN_RMW_WORK = 2       # a load and a store
LANE_GAIN = 4            # SIMD lanes per unit of speed-up (32 lanes: ~8x on such code)
NEVER = 1 << 62          # a threshold no range reaches
_HEAVY = FLOAT_UNARY | {Op.POW, Op.ATAN2, Op.DIV}


def iteration_work(block, weight=None) -> float:
    """Estimated ops of one pass through `block`: `weight(node)` per op (default: an atomic
    `ATOMIC_WORK`, a math function 8, anything else 1), loop bodies times their trips."""
    weight = weight or _default_weight
    w = 0.0
    for n in block.nodes:
        if n.op in LOOPS:
            w += 2 + _trips(n) * iteration_work(n.blocks[0], weight)
        elif n.op == Op.IF:
            w += 1 + max(iteration_work(b, weight) for b in n.blocks)
        elif n.blocks:
            w += sum(iteration_work(b, weight) for b in n.blocks)
        else:
            w += weight(n)
    return w


def worth_splitting(loop) -> bool:
    """Whether a loop made parallel (passes/independent_loops) has work enough to be split at
    all: its estimated work (`iteration_work`, trips from constant bounds, else
    `DYNAMIC_TRIPS`) at least `SPLIT_WORK`. Each range task costs ~1.5 us of launch more than
    the serial code it replaces (4 loops of 16 tiny iterations: 9.2 against 3.6 us a launch),
    and one whose work never reaches a split would only pay that. A loop whose constant trip
    count is below `MIN_SPLIT_TRIPS` is never split (`Adaptive.min_split`), however heavy its
    body: Genesis' environment loops at `n_envs` 1 (`range(_B)`, _B = 1), whose bodies' loops
    with bounds read from memory count 16 trips each, made Franka's step 14-19 % slower."""
    known = _known_trips(loop)
    if known is not None and known < MIN_SPLIT_TRIPS:
        return False
    return 2 + _trips(loop) * iteration_work(loop.blocks[0]) >= SPLIT_WORK


def worth_lanes(loop, min_trips: int) -> bool:
    """Whether a serialised loop made parallel (passes/independent_loops) is run in SIMD lanes
    over its iterations in its own range task (`driver.env_lanes`), its body's loops masked per
    lane: at least `min_trips` iterations known at compile time (the fewest the code generator
    runs such a loop in lanes, `llvm_codegen.codegen.fewest_lane_trips`: fewer would make it a
    scalar range task, which only costs a launch) and an
    estimated body of at least `LANES_WORK` (`iteration_work`). Measured on Genesis' Franka
    step, fields, one thread (docs/performance.md, glanes): the narrow phase's environment loop
    (`narrowphase.py:4493`, ~8.8e8 estimated, every other loop of the step below 1e7) ran
    1.8x faster in 32 lanes at `n_envs` 256 and in 16 at `n_envs` 16; lighter loops with loops inside, which loop over
    links and dofs with trip counts read from memory, stay in the serial task (box with every
    such loop in lanes: a cold build 511 s against 90 s, and a slower step). The body's work is
    `lane_work`'s: an iterative solve's loop counts one pass. `LANES_WORK` is 2**27: the
    loops kept in lanes are estimated at 8.9e8 (the narrow phase) and 1.7-1.8e8 (Franka's
    `solver.py:934`, 50 against 123 us a launch in lanes); Genesis' ndarray-mode solver
    (`_kernel_solve_monolith`, generic code whose dof and island loops read their trip counts
    from memory) at 7.7e7 one pass (2.2e7 in field mode), which under 2**26 made it a lane
    task of 2.7 MB of LLVM IR: 16.1 s of Franka ndarray 256's cold build against 1.2 s serial
    for 18 us of a ~2 ms step (docs/performance.md, gndbuild). A lighter body is run in lanes
    where they read memory as vectors (`lane_streams.streams`: Genesis' mass matrix factor and
    solve, glane2)."""
    known = _known_trips(loop)
    if known is None or known < min_trips:
        return False
    from .lane_streams import streams
    return lane_work(loop.blocks[0]) >= LANES_WORK or streams(loop, iteration_work)


def lane_work(body) -> float:
    """`iteration_work(body)` of a loop run in lanes, where a loop of the body's top level
    (inside its `if`s, not inside another loop) that ends at a `break` of its own counts one
    trip. Such a loop is an iterative solve whose iterations end at each iteration's own
    convergence: in lanes it runs until the slowest lane's, so its guessed trips
    (`DYNAMIC_TRIPS`) say nothing of what the lanes gain, and only a body heavy enough in one
    pass is worth them. Genesis' constraint solver (`_kernel_solve_monolith`: per environment,
    Newton iterations up to a count read from memory, each first testing the environment's
    own `improved` flag) was estimated at ~3.5e8 and ran in 32 lanes with no gain (replays,
    box, `n_envs` 256: 55 against 53 us serial; Franka: 148 against 93 us) and 12-14 us
    slower in box's step; one pass is ~2.2e7, below `LANES_WORK`. Loops with breaks nested
    deeper stay counted as before: the narrow phase's MPR / GJK iterations, inside its loop
    over pairs, ran 1.8x faster in lanes (docs/performance.md, glanes; gbox)."""
    w = 0.0
    for n in body.nodes:
        if n.op in LOOPS and _ends_at_own_break(n.blocks[0]):
            w += 2 + iteration_work(n.blocks[0])
        elif n.op == Op.IF:
            w += 1 + max(lane_work(b) for b in n.blocks)
        else:
            w += iteration_work(Block((n,)))
    return w


def _ends_at_own_break(block) -> bool:
    """Whether a loop body `block` holds a `break` of its own loop (in its `if`s, not in a
    nested loop's body)."""
    return any(n.op == Op.BREAK or (n.op == Op.IF and any(_ends_at_own_break(b) for b in n.blocks))
               for n in block.nodes)


def _known_trips(loop) -> int | None:
    """A loop's trip count where it is known (`static_trips`, or constant bounds: reverse
    mode's reversed loops carry no `static_trips`), else None."""
    if loop.op == Op.RANGE_FOR:
        if loop.arg.static_trips is not None:
            return loop.arg.static_trips
        b, e = loop.srcs[:2]
        if b.op == Op.CONST and e.op == Op.CONST:
            return max(0, int(e.arg) - int(b.arg))
    return None


def _trips(loop) -> int:
    """A loop's trip count: `_known_trips`, else the DYNAMIC_TRIPS guess."""
    known = _known_trips(loop)
    return DYNAMIC_TRIPS if known is None else known


def _default_weight(n) -> float:
    return ATOMIC_WORK if n.op in ATOMICS else 8 if n.op in _HEAVY else 1


def costs(task, lanes: int, cheap_atomics=frozenset()) -> tuple:
    """(own, alone): estimated work of one iteration of range task `task` in its own code
    (`lanes` SIMD lanes; `cheap_atomics`, reduced over the lanes first, cost one atomic per
    lane group) and in its one-thread variant (scalar, plain read-modify-writes)."""
    gain = max(1.0, lanes / LANE_GAIN)

    def own(n):
        if n.op in ATOMICS:
            return ATOMIC_WORK / lanes if n in cheap_atomics else ATOMIC_WORK
        return _default_weight(n) / gain

    def alone(n):
        return PLAIN_RMW_WORK if n.op in ATOMICS else _default_weight(n)

    return iteration_work(task.body, own), iteration_work(task.body, alone)


def one_thread_choice(own: float, alone: float, workers: int):
    """None (no variant: the task's own code is cheaper), "only" (the variant on one core beats
    the own code on every worker: compiled alone, never split) or "both" (the variant for
    launches that are not split)."""
    if alone >= own:
        return None
    return "only" if own >= workers * alone else "both"


def split_threshold(own: float, workers: int, alone: float | None = None) -> int:
    """The fewest iterations worth splitting over `workers`: where the time saved — against
    the own code on one core, or against the one-thread variant (`alone`) — passes SPLIT_WORK."""
    single = own if alone is None else alone
    gain = single - own / workers
    if gain <= 0:
        return NEVER
    return max(2 * workers, int(-(-SPLIT_WORK // gain)))


class Adaptive:
    """Split decisions of one task without atomics from its measured launch times."""
    __slots__ = ("per_iteration", "workers", "min_split", "measured")

    def __init__(self, workers: int):
        self.per_iteration = 0.0  # CPU seconds per iteration, last launch (0: unknown)
        self.workers = workers
        self.min_split = 2 * workers  # two iterations per worker at least
        # whether `per_iteration` is CPU time (`clock`); a wall-clock estimate (`wall`, a quick
        # launch's) may hold a wait for a core: it never splits a launch, it gets that launch
        # timed with `clock` instead
        self.measured = True

    def splits(self, n: int) -> bool:
        """Whether `run` would split a range of `n` iterations now (a replayed launch graph
        calls the task itself only where it would not: `CpuBackend.replay_entry`)."""
        return n >= self.min_split and self.measured and n * self.per_iteration >= SPLIT_SECONDS

    def clock_for(self, n: int):
        """The clock that times an unsplit launch of `n` iterations (see `run`)."""
        return clock if n * self.per_iteration >= QUICK_SECONDS else wall

    def unsplit(self, n: int, seconds: float, clk=None) -> None:
        """Record an unsplit launch of `n` iterations that took `seconds` on `clk` (`clock_for`'s:
        None, `clock`; `wall`: not to split on, `measured`) (a caller that ran it
        itself because `splits(n)` was False: `CpuBackend.eager_entry`)."""
        self.per_iteration = seconds / n
        self.measured = clk is not wall

    def run(self, run, fn, bufs, addr, b: int, e: int) -> None:
        """Run [b, e) through the runtime's `run`, split when the last launch's time per
        iteration times this range is `SPLIT_SECONDS` or more (two iterations per worker at
        least), and measure it: one call per launch. A split launch's time per iteration is
        the calling thread's CPU time over the iterations it took itself (`run` returns their
        count: the workers take chunks dynamically, `llvm_codegen.cpu_pool`); one where the
        workers took every chunk measures nothing, so the next launch runs unsplit (before, the
        estimate stayed what it was and every later launch split on it: Genesis' box at
        `n_envs` 256, two threads, a loop of 1.5 to ~230 us split in 75 of 100 launches, the
        caller running none of their iterations). A launch predicted
        shorter than `QUICK_SECONDS` (never split) is timed with the wall clock (`wall`, ~50 ns) rather than `clock` (a system call, ~0.5 us each:
        two of them were a sixth of a small launch's host time, issue #27)."""
        n = e - b
        guess = n * self.per_iteration
        split = n >= self.min_split and self.measured and guess >= SPLIT_SECONDS
        clk = clock if guess >= QUICK_SECONDS else wall
        t0 = clk()
        ran = run(fn, bufs, addr, b, e, True, 0 if split else NEVER)
        spent = clk() - t0
        if not split:
            self.per_iteration = spent / n
            self.measured = clk is not wall
        elif ran is None:  # a runtime that splits in fixed chunks: the caller ran its share
            self.per_iteration = spent * self.workers / n
        elif ran:  # the iterations the calling thread took (`CpuRuntime.run`)
            self.per_iteration = spent / ran
        else:  # the workers took every chunk: the range is now cheap (or they were early);
            self.per_iteration = 0.0  # the next launch runs unsplit and is measured whole


clock = time.thread_time
"""What `Adaptive` measures: the calling thread's CPU time, not the wall time. On a machine
shared with other jobs a launch's wall time includes the time the thread waited for a core (and
a split launch's wait for the pool thread), which made launches of ~50 us look like 1 ms: they
were split, their split launches waited for a core again, and they stayed split
(`diffmpm_simple`'s `grid_op`: mean launch 9x its minimum). The CPU time of the calling thread
(when split, over the iterations it took itself: `llvm_codegen.cpu_pool`) is the work itself."""

wall = time.perf_counter
QUICK_SECONDS = 2e-5
"""Launches predicted shorter than this (a tenth of SPLIT_SECONDS; never split) are timed with
`wall`. An estimate from `wall` never splits the next launch (`Adaptive.measured`): a wait for
a core inside a quick launch makes the next launch run unsplit under `clock` instead, which
measures the work itself; before, that launch was split on the wait. The first launch of a
task (no estimate yet) is one of them."""
