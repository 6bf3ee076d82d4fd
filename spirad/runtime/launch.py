"""One launch path for every program: a kernel's forward program and its adjoint alike.

    Compiled     one program compiled for one signature and backend (forward, adjoint, forward
                 mode, ...): frozen; the programs derived from a forward one are kept by the
                 kernel (`Kernel.compile_adjoint`), not attached to it
    LaunchPlan   what one set of arguments gives: argument bytes, storages, task ranges, and —
                 for adjoint programs with adstacks — its `AdstackState`; never changed once made
    AdstackState the one mutable part of a plan: the last sizes' `AdstackPlan` and whether they
                 fit the adstack budget (`_sizes` decides, at every launch)
    AdstackPlan  per task: the sized stacks (`sizing_cache.SizedTask`) and what the backend
                 derived from them (`Backend.plan_adstack`); replaced whenever a size changes
    run(plan)    sizing (cache) when the program has adstacks -> backend launch -> write
                 generations of everything the program may write -> the kernel's return value
                 (read back: a kernel that returns syncs, and its prints are flushed)

A launch re-enters the launch path in one place only, `_sizes` (a sizing miss of an adjoint):
the counting pass and the GPU sizer's kernels run through `run_internal`, and an adjoint over
the adstack budget is swapped for its loop-checkpointed variant there (architecture §4).

A kernel keeps the last plan per mode (forward / adjoint) and reuses it while the launch inputs
are the same objects or equal numbers (`same_args`, checked once per launch); everything else
about a launch is decided here, in one place.
"""
from __future__ import annotations

import time
from math import copysign
from dataclasses import dataclass, replace
from functools import cached_property
from operator import is_ as _is

import numpy as np

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradValueError

from . import asserts as _asserts
from . import guard as _guard
from . import logger as _log
from .. import printing
from . import sizing_cache
from . import state as _state
from . import write_marks as _write_marks

DEVICE_BOUNDS = "device"  # Compiled.bounds entry of a range task whose bounds read globals



@dataclass(frozen=True, eq=False)
class Compiled:
    """One program compiled for one signature and backend. Frozen: everything is known when
    the driver builds it (`compile.driver._program`); what is derived from it later (its
    adjoint, forward-mode and validation programs) the kernel keeps beside it."""
    tl: object              # the TaskList of the program (autodiff's; see backend_tl)
    abi: object             # its KernelABI
    program: object         # the backend's compiled program
    bounds: tuple           # per task: None (serial), (begin_fn, end_fn) of (scalars, shapes), or
                            # DEVICE_BOUNDS: the range reads globals (backends/range_bounds)
    writes: tuple           # what a launch may write: ('field', Field) | ('ndarray', arg, which)
    bindings_src: tuple     # per binding: ('field', Field) | ('ndarray', arg, which) | ('temp', k)
                            # (which: False = the array, True = its .grad, 'dual' = its .dual)
    sizing: sizing_cache.ProgramSizing = None  # adjoint programs with adstacks, else None
    template_refs: tuple = ()   # template arguments kept alive: their ids key the cache (a
                                # data_oriented object: a weakref; its programs die with it)
    returns: object = None  # kernel_return.KernelReturn of a kernel with a return type, else None
    prints: bool = False    # the program writes print records (spirad.printing)
    cache_key: str = None   # its offline-cache key (spirad.compile.offline_cache), None: not cached
    reads: tuple = ()       # what a launch may read, in the form of `writes` (an atomic add reads)
    checkpointed: object = None  # adjoint programs: `driver.CheckpointedAdjoints`, S -> the
                                 # adjoint with loops checkpointed every S trips (None: nothing
                                 # to checkpoint), compiled at launch time by `_budgeted`
    backend_tl: object = None  # `tl` after the backend passes (driver._program): what `program`
                               # was compiled from, stored with it in the offline cache

    @cached_property
    def writes_user_data(self) -> bool:
        """A launch may write more than kernel temporaries (a gradient that writes nothing
        computed nothing: `Kernel.grad` warns). A function of `writes`, found once: asked at
        every grad launch."""
        return any(w[0] != "temp" for w in self.writes)


@dataclass(frozen=True, eq=False)
class AdstackPlan:
    """The adstack part of one launch: what the backend needs, fixed for given sizes."""
    sized: tuple            # per task: SizedTask or None
    tasks: tuple            # per task: the backend's plan for `sized[task]`, or None
    forced: bool            # capacities were forced: an overflow is possible
    sizing: object          # the ProgramSizing (for `required`)
    args: tuple

    def capacity(self, task: int, stack: int) -> int:
        return self.sized[task].caps[stack]

    def required(self, task: int, stack: int, read=None):
        """The size the stack needed at this launch (overflow messages), None if unknown;
        `read`: how to read field / ndarray data (`sizing_cache.LaunchContext`)."""
        return self.sizing.required(task, stack, self.args, read)

    def required_inputs(self, task: int) -> tuple:
        """What the required sizes of `task` read, as a key (`ProgramSizing.required_inputs`)."""
        return self.sizing.required_inputs(task, self.args)


@dataclass(eq=False)
class AdstackState:
    """What the launches of one plan with adstacks decided last (`_sizes`), kept to decide
    nothing again while the sizes stay the same object (`sizing_cache.evaluate` returns the
    same tuple on a hit). The one part of a `LaunchPlan` that a launch changes."""
    adstack: AdstackPlan = None  # the backend plans of the last sizes
    fits: tuple = None      # the sizes last found within the adstack budget
    alt: tuple = None       # (sizes, plan of the checkpointed adjoint) last found over it


@dataclass(eq=False)
class LaunchPlan:
    """One program's launch with one set of arguments. Never changed once made (`plan`,
    `rebind`): what the adstack sizing of its launches decides lives in `sizing`."""
    compiled: Compiled
    epoch: int
    args: tuple
    argbuf: bytes           # what the backend is given (`launch_arguments`): one object per set
                            # of argument values, so identity says "the same bytes"
    storages: list          # in `abi.bindings` order; None for kernel temporaries; never changed
                            # once planned (backends compare it by identity)
    ranges: list            # per task: (begin, end), or None where the backend evaluates the
                            # range when the task starts (DEVICE_BOUNDS)
    sizing: AdstackState = None  # programs with adstacks (`Compiled.sizing`), else None
    scalars: list = None    # per argument: its scalar value, or None (host bound functions)
    shapes: dict = None     # (argument, axis) -> ndarray extent (host bound functions)
    note: tuple = None      # SPIRAD_DEBUG_ADSTACK: (kernel, heap, budget, S) of a launch switched
                            # to the checkpointed adjoint (`_budgeted`)
    mutable: bool = False   # an argument is a list / dict (a template container that may have
                            # changed in place): the plan is never reused as it is (`same_args`)
    bumps: tuple = ()       # the fields / arrays whose write generation a launch bumps (`_bump`),
                            # resolved with the storages (`_written`): one loop, no lookups

    @property
    def adstack(self) -> AdstackPlan | None:
        """The backend plans of the adstacks at the last launch (None: none yet, or none)."""
        return None if self.sizing is None else self.sizing.adstack


def _buffer(arr, which):
    """An ndarray argument's array, its .grad (which=True) or its .dual (which='dual')."""
    return arr if which is False else (arr.grad if which is True else arr.dual)


def same_args(p: LaunchPlan, args) -> bool:
    """`args` are the launch inputs of plan `p`: identical objects (not mutable containers: a
    list template argument may have changed in place, so such a plan is never reused as it is:
    `LaunchPlan.mutable`), or equal numbers of the same type (a float's sign too: -0.0 is not 0.0). Identity of them all is checked
    first, in one C loop (the common case: the same arrays and constants again)."""
    a = p.args
    if p.mutable or len(a) != len(args):
        return False
    if all(map(_is, a, args)):
        return True
    for x, y in zip(a, args):
        if x is not y and (type(x) is not type(y) or not isinstance(x, (int, float)) or x != y
                           or (isinstance(x, float) and copysign(1.0, x) != copysign(1.0, y))):
            return False  # 0.0 == -0.0, but they are different arguments (1 / x, x ** -1)
    return True


def plan(c: Compiled, args, epoch: int, note: tuple = None) -> LaunchPlan:
    """The LaunchPlan of `c` with these (already checked) arguments (`note`: see LaunchPlan)."""
    abi = c.abi
    scalars = []
    for i, spec in enumerate(c.tl.args):
        if spec.kind == "scalar":
            v = args[i]
            if spec.dtype.is_int and not (spec.dtype == T.u1):
                lo, hi = _int_range(spec.dtype)
                if not lo <= int(v) <= hi:
                    if not wraps_int_arg(v, spec.dtype):
                        raise SpiradValueError(f"argument '{spec.name}' = {v} does not fit "
                                               f"{spec.dtype}")
                    v = _wrap_int_arg(spec.name, v, spec.dtype)
            scalars.append(v)
        else:
            scalars.append(None)
    shapes = {}
    for a, ax, off in abi.shape_offsets:
        n = args[a].storage_shape[ax]  # the storage's: kernels index it (data.ndarray)
        if n > 2**31 - 1:
            raise SpiradValueError("ndarray axis longer than 2**31-1 elements")
        shapes[(a, ax)] = n
    storages = []
    for src in c.bindings_src:
        if src[0] == "field":
            storages.append(src[1]._storage())
        elif src[0] == "ndarray":
            arr = args[src[1]]
            storages.append(_buffer(arr, src[2])._storage())
        else:
            storages.append(None)  # temps: the backend owns them
    argbuf = _state.backend().launch_arguments(
        c.program, bytes(abi.pack_args(c.tl.args, scalars, lambda a, ax: shapes[(a, ax)])),
        storages)
    ranges = _ranges(c, scalars, shapes)
    _write_marks.note_plan()
    return LaunchPlan(c, epoch, tuple(args), argbuf, storages, ranges,
                      None if c.sizing is None else AdstackState(),
                      scalars=scalars, shapes=shapes, note=note,
                      mutable=any(type(x) in (list, dict) for x in args),
                      bumps=_written(c, args))


def _written(c: Compiled, args) -> tuple:
    """What a launch of `c` with `args` may write, as objects with a write generation: fields,
    and the ndarrays (or their .grad / .dual) of the arguments, each once."""
    out = {}
    for w in c.writes:
        if w[0] == "field":
            out[id(w[1])] = w[1]
        elif w[0] == "ndarray":
            b = _buffer(args[w[1]], w[2])
            out[id(b)] = b
    return tuple(out.values())


def _ranges(c: Compiled, scalars, shapes) -> list:
    """Per task (begin, end) from the host bound functions (None: evaluated on the device),
    checked against the backend's index range."""
    ranges = [(0, 1) if b is None else None if b is DEVICE_BOUNDS else
              (b[0](scalars, shapes), b[1](scalars, shapes)) for b in c.bounds]
    limit = _state.backend().max_elements
    for r in ranges:
        if r is not None and r[1] > r[0] and (r[1] - r[0] > limit or max(map(abs, r)) > limit):
            be = _state.backend()
            raise SpiradValueError(f"kernel {c.tl.name}: a parallel loop over [{r[0]}, {r[1]}) "
                                   f"runs past the {limit:,} iterations / indices the {be.name} "
                                   f"backend's 32-bit task ranges hold; split the loop, or use "
                                   f"arch=sd.cpu (64-bit)")
    return ranges


_NUMBER_TYPES = frozenset({int, float, bool, np.float32, np.float64, np.int32, np.int64,
                           np.uint32, np.int16, np.int8, np.uint8, np.uint16, np.uint64})


_INT_RANGES: dict = {}


def _int_range(dt) -> tuple:
    r = _INT_RANGES.get(dt)
    if r is None:
        info = np.iinfo(dt.np)
        r = _INT_RANGES[dt] = (int(info.min), int(info.max))
    return r


def wraps_int_arg(v, dt) -> bool:
    """Whether integer argument `v`, outside `dt`'s range, is wrapped to `dt` (SPIRAD_INT_ARGS=
    wrap, as Taichi passes it) rather than refused: Taichi takes a signed argument as an i64
    and an unsigned one as a u64, then keeps the low bits."""
    from .. import options
    if options.get("SPIRAD_INT_ARGS") != "wrap":
        return False
    v = int(v)
    return -(1 << 63) <= v < (1 << 63) if dt.is_signed else 0 <= v < (1 << 64)


def _wrap_int_arg(name, v, dt):
    """`v` wrapped to `dt` (two's complement), with the warning that says so."""
    from kernel_ir.interpreter import cast_value
    from ..tracebacks import warn_user
    w = cast_value(int(v), dt)
    warn_user(f"argument '{name}' = {v} does not fit {dt}: passed as {w} (its low {dt.bits} "
              f"bits, as Taichi does; SPIRAD_INT_ARGS=wrap)")
    return w


def rebind(p: LaunchPlan, args) -> LaunchPlan | None:
    """`p` for `args` that differ from its own only in scalar values of the same Python types
    (the time step `t` of `step(t)`, launched thousands of times): the argument bytes rewritten
    and the ranges re-evaluated, nothing else checked again; None when anything else differs
    (the caller then checks the signature and plans anew)."""
    old = p.args
    if p.mutable or len(old) != len(args):  # a template container may have changed in place
        return None
    specs = p.compiled.tl.args
    argbuf = None
    scalars = p.scalars
    for i, (x, y) in enumerate(zip(old, args)):
        if x is y:
            continue
        t = type(y)
        if t is not type(x) or t not in _NUMBER_TYPES or specs[i].kind != "scalar":
            return None
        dt = specs[i].dtype
        if dt.is_int:
            lo, hi = _int_range(dt)
            if not lo <= int(y) <= hi:
                return None  # the full check reports it
        if argbuf is None:
            argbuf = bytearray(p.argbuf)
            scalars = list(scalars)
        p.compiled.abi.pack_scalar(argbuf, i, dt, y)
        scalars[i] = y
    if argbuf is None:
        return p
    c = p.compiled
    # the same adstack plans (same sizes: `_launch` rebinds them to these arguments); whether
    # they fit the budget is decided again (a checkpointed plan holds the old arguments)
    ad = p.sizing if p.sizing is None else AdstackState(p.sizing.adstack)
    return LaunchPlan(c, p.epoch, tuple(args), bytes(argbuf), p.storages,
                      _ranges(c, scalars, p.shapes), ad, scalars, p.shapes,
                      bumps=p.bumps)


def measure(counting: sizing_cache.Counting, args) -> tuple:
    """Run an adjoint's counting pass (passes/autodiff/counting.py) with the launch's arguments:
    the counts, one per counter (a few words read back)."""
    if counting.counts is None:  # an ndarray the backend allocates (spirad.runtime.state)
        with _guard.LOCK:
            storage = _state.backend().allocate_ndarray(counting.n * T.i32.nbytes)
        counting.counts = _state.ALIAS_ARRAY(storage, T.i32, (counting.n,))
    counting.counts.fill(0)
    run_internal(counting.compiled, tuple(args) + (counting.counts,))
    return tuple(int(v) for v in counting.counts.to_numpy())


def run_internal(c: Compiled, args):
    """Plan and run an internal program `c` with `args`: the counting pass (`measure`) and the
    GPU sizer's kernels (`backends/gpu_sizer`). Called while a launch sizes its adstacks
    (`_sizes`), under that launch's lock: the launch path's one re-entry; an internal program
    has no adstacks itself, so it never re-enters again."""
    run(plan(c, args, _state.current().epoch))


def run(p: LaunchPlan):
    """Launch `p`: size the adstacks (cached) if the program has any, launch, bump the write
    generations of everything the program may write; returns the kernel's return value (None
    without a return type). Holds the process lock with interrupts deferred (`spirad.runtime.guard`);
    the generations are bumped even when the launch fails or stops part way."""
    with _guard.launching():
        try:
            _launch(p)
        finally:
            _bump(p)
        st = _state.state
        if st.debug and st.options.debug_sync:  # Taichi's synchronous debug mode
            synchronise(st)
        c = p.compiled
        if c.returns is not None:
            value = c.returns.read(_state.backend())
            printing.flush(_state.current())
            return value
    return None


def eager_entry(p: LaunchPlan):
    """`run(p)` as a function of no arguments (`Kernel._fast`) that launches `p` through the
    backend's record of it (`Backend.eager_entry`): the same tasks with the same buffers,
    arguments and ranges, the same status and interrupt checks, the same write generations
    marked, none of `run`'s decisions made again (they are the same for the same plan). It
    returns False, having run nothing, where `p` is no longer valid (another `init()`, a new
    layout) or fields declared since wait to be materialised: the caller then launches through
    the full path; True when it ran. None where a launch of `p` does more than run its tasks
    and mark what they write: adstacks (sized at every launch), prints, a return value,
    Taichi's synchronous debug mode, or the backend keeps no records. Made after a launch of
    `p` (`Kernel._run`), for the kernel's repeated launches. The caller checks what is per
    launch (no Tape, forward mode, capture or profiler: `Kernel.__call__`)."""
    c = p.compiled
    st = _state.state
    if c.sizing is not None or c.prints or c.returns is not None or (
            st.debug and st.options.debug_sync) or p.epoch != (st.epoch, st.layout_version):
        return None
    run = _state.backend().eager_entry(c.program, p.storages, p.argbuf, p.ranges)
    if run is None:
        return None
    layout = st.layout_version
    bumps, key = p.bumps, id(p.bumps)
    pending = _write_marks.PENDING
    launching = _guard.launching()
    state = _state

    def entry() -> bool:
        s = state.state
        if s is not st or not s.materialized or s.layout_version != layout:
            return False
        with launching:
            pending[key] = bumps  # (`_bump`) marked first: nothing reads it before the run ends
            run()
        return True
    return entry


def synchronise(st) -> None:
    """Wait for the launched work of state `st`, print what its kernels printed and raise what
    they reported (a bounds error, a failed assert): `sd.sync()`, and every launch under
    `init(debug=True, debug_sync=True)` (Taichi's synchronous debug mode; without `debug_sync`
    such errors are raised at the next synchronisation)."""
    st.backend.sync()
    printing.flush(st)
    _asserts.check(st)


def _launch(p: LaunchPlan) -> None:
    c = p.compiled
    be = _state.backend()
    prof = _state.PROFILER  # sd.init(kernel_profiler=True): time this launch
    if c.prints:
        _state.current().prints.dirty = True
    if c.sizing is not None:
        t0 = time.perf_counter()
        p, sized = _sizes(p, be)
        c = p.compiled
        st = p.sizing
        ad = st.adstack
        if ad is None or ad.sized != sized:  # new sizes: new backend plans (identity first)
            tasks = tuple(None if s is None else be.plan_adstack(c.program, ti, s)
                          for ti, s in enumerate(sized))
            ad = st.adstack = AdstackPlan(sized, tasks, c.sizing.forced, c.sizing, p.args)
            if _log.logger.isEnabledFor(10):  # logging.DEBUG
                _log_sizing(c.tl.name, sized, time.perf_counter() - t0)
        elif ad.args is not p.args:  # a plan rebound to new scalars (`rebind`): same sizes
            ad = st.adstack = replace(ad, args=p.args)
        if prof is None:
            be.launch(c.program, p.storages, p.argbuf, p.ranges, ad)
        else:
            token = prof.start()
            try:
                be.launch(c.program, p.storages, p.argbuf, p.ranges, ad)
            finally:
                prof.stop(c.tl.name, token)
        if sizing_cache.debug_enabled():
            sizing_cache.debug_print(c.tl.name, c.sizing, sized, be.heap_bytes())
            if p.note is not None:
                sizing_cache.debug_checkpointed(c, p.note, heap_estimate(c, p, sized, be))
    elif prof is not None:
        token = prof.start()
        try:
            be.launch(c.program, p.storages, p.argbuf, p.ranges, None)
        finally:
            prof.stop(c.tl.name, token)
    else:
        be.launch(c.program, p.storages, p.argbuf, p.ranges, None)


def _sizes(p: LaunchPlan, be) -> tuple:
    """(the plan to launch, its sizes) for a launch of `p`, whose program has adstacks: the one
    place where a launch re-enters the launch path (architecture §4).

    1. `sizing_cache.evaluate` sizes every task; on a miss it may run the counting pass
       (`measure`) or the GPU sizer's kernels, internal programs launched by `run_internal`.
    2. An adjoint whose heap would pass the adstack budget (`_budgeted`) is swapped for its
       loop-checkpointed variant (`Compiled.checkpointed`, compiled here on first use), sized
       by step 1 in its turn; it has no checkpointed variant itself, so this ends there.
    What was decided is kept in `p.sizing` while the sizes are the same object."""
    c = p.compiled
    sized = sizing_cache.evaluate(c.sizing, p.args, measure=measure)
    st = p.sizing
    if c.checkpointed is None or sized is st.fits:
        return p, sized
    if st.alt is None or st.alt[0] is not sized:
        alt = _budgeted(p, sized, be)
        if alt is None:
            st.fits = sized  # the same sizes again (a cache hit): no estimate
            return p, sized
        st.alt = (sized, alt)
    sizing_cache.stats.checkpointed += 1
    q = st.alt[1]
    return q, sizing_cache.evaluate(q.compiled.sizing, q.args, measure=measure)


ALWAYS_CHECKPOINT = False  # tests: checkpoint past the budget even where it saves nothing


def heap_estimate(c: Compiled, p: LaunchPlan, sized, be) -> int:
    """Bytes of adstack heap a launch of `c` with these sizes takes at full parallelism (the
    largest task: the heaps are shared by a launch's tasks)."""
    out = 0
    for ti, s in enumerate(sized):
        if s is None:
            continue
        rng = p.ranges[ti]
        n = None if rng is None else rng[1] - rng[0]
        rows = be.adstack_rows(c.program, ti, n)
        out = max(out, (s.layout.stride_float + s.layout.stride_int) * rows)
    return out


def ad_stack_budget() -> int:
    """`init(ad_stack_memory=N)` bytes, by default a quarter of the device's memory."""
    st = _state.current()
    v = st.options.ad_stack_memory
    if v:
        return int(v)
    b = getattr(st, "ad_stack_budget", None)
    if b is None:  # once per init(): the launch path asks at every adjoint launch
        b = st.ad_stack_budget = _state.backend().device_memory() // 4
    return b


def _budgeted(p: LaunchPlan, sized, be):
    """The launch plan of the checkpointed adjoint (passes/autodiff/loop_checkpoint.py) when
    this launch's adstack heap would pass the budget, or one thread's heap row is more than the
    backend can bind (`adstack_row_fits`), else None. Segments of S trips, S a power
    of two near the square root of the largest stack (memory ~ T / S + S entries)."""
    c = p.compiled
    heap = heap_estimate(c, p, sized, be)
    budget = ad_stack_budget()
    if heap <= budget and all(s is None or be.adstack_row_fits(s.layout) for s in sized):
        return None
    longest = max((max(s.caps, default=0) for s in sized if s is not None), default=0)
    every = 2
    while every * every < longest:
        every *= 2
    alt = c.checkpointed(every)
    if alt is None:
        return None
    note = (c.tl.name, heap, budget, every) if sizing_cache.debug_enabled() else None
    q = plan(alt, p.args, p.epoch, note)
    if not ALWAYS_CHECKPOINT and heap_estimate(
            alt, q, sizing_cache.evaluate(alt.sizing, q.args, measure=measure), be) >= heap:
        return None  # short loops: checkpointing would not save memory
    return q


def _log_sizing(name, sized, seconds) -> None:
    """The DEBUG line of a launch whose adstack sizes changed (`spirad.runtime.logger`)."""
    parts = [f"task {k}: capacities {list(s.caps)}, strides {s.layout.stride_float} B float / "
             f"{s.layout.stride_int} B int" for k, s in enumerate(sized) if s is not None]
    _log.logger.debug("sized the adstacks of %s in %s: %s", name, _log.ms(seconds),
                      "; ".join(parts))


def _bump(p: LaunchPlan) -> None:
    """Write generations of everything `p`'s program may write (sizing cache, architecture §4):
    marked, counted when read (`write_marks`: one dict store, not one per object)."""
    if p.bumps:
        _write_marks.PENDING[id(p.bumps)] = p.bumps
