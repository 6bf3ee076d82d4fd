"""Launch-time adstack sizing: every stack's capacity and the heap layout, with a per-task cache.

An adjoint program with adstacks carries a `ProgramSizing`: per task, a `TaskSizing` with the
stacks' size expressions (`sizer` grammar), entry sizes and layout kinds. At each launch
`evaluate` gives, per task, a `SizedTask`: the capacities and the per-thread heap layout
(`sizer.Layout`) the kernel's metadata words describe.

Cache: per task the last result is kept, keyed by everything the expressions read — the scalar
arguments and ndarray shapes they use, and a snapshot of the *write generation* of every field /
ndarray whose data they read (`generation`, bumped by every host write — `x[i] = v`, `fill`,
`from_numpy` — and by every kernel launch that may write it). A hit skips evaluation entirely (on
Vulkan: no bytecode upload, no sizer dispatch, no read-back). `init(adstack_cache=False)` turns
it off.

Evaluation: a task whose expressions read device-resident data (field / ndarray values) goes to
the backend's GPU sizer (`Backend.gpu_sizer`), which evaluates the expressions *and* the layout on
the device; everything else, and every task the GPU sizer declines, is evaluated on the host by
`sizer.eval_fast` and laid out by `sizer.compute_layout`. `SPIRAD_DEBUG_ADSTACK=1` prints, per
launch, the bytecode, the evaluated sizes, the strides and the heap sizes.

Measured stacks (`AdStackArg.measured`: no size expression — a data-dependent `while`, a `break`
on data) are sized by the program's `Counting` pass: a program compiled with the adjoint that
replays the forward body and max-reduces each measured stack's push count into one small i32
ndarray (`passes/autodiff/counting.py`). It runs on a cache miss of a task that has such stacks
— its key covers everything the counting program reads (scalar arguments, ndarray shapes and
write generations, field generations) — and its counts become those stacks' capacities; the
task is then laid out on the host.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

import sizer as sz

from kernel_ir.abi import adstack_allocas, adstack_kind
from kernel_ir.errors import SpiradAutodiffError, SpiradDeviceError

from . import state as _state


@dataclass
class SizerStats:
    """Counters the tests read: how often sizing really ran."""
    host_evaluations: int = 0
    gpu_dispatches: int = 0
    cache_hits: int = 0
    counting_passes: int = 0
    checkpointed: int = 0  # launches switched to the checkpointed adjoint (launch._budgeted)

    def reset(self):
        self.host_evaluations = self.gpu_dispatches = self.cache_hits = self.counting_passes = 0
        self.checkpointed = 0


stats = SizerStats()

_DEBUG = [False]  # SPIRAD_DEBUG_ADSTACK, read by `init` (`refresh_debug_flag`)


def debug_enabled() -> bool:
    return _DEBUG[0]


def refresh_debug_flag():
    """Re-read SPIRAD_DEBUG_ADSTACK (called by `init`)."""
    from .. import options
    _DEBUG[0] = options.get("SPIRAD_DEBUG_ADSTACK")


def _host_view(array):
    return array._view()


class LaunchContext:
    """What the host sizer reads at launch: scalar args, ndarray shapes and data, field data.
    `read(array)`: a numpy view of a field's / ndarray's data (default: its `_view()`, a host
    read that syncs; a backend reporting an error while syncing passes one that does not)."""

    def __init__(self, args, read=None):
        self.args = args
        self.read = read or _host_view

    def scalar_arg(self, i):
        return self.args[i]

    def ndarray_shape(self, i, axis):
        return self.args[i].storage_shape[axis]

    def ndarray_read(self, i, indices):
        """The element at storage `indices` (a kernel's: an ndarray with `layout=` is indexed
        in storage order, spirad.data.ndarray)."""
        a = self.args[i]
        view = self.read(a)
        if a.layout is not None:
            view = view.transpose(a.layout + tuple(range(len(a.layout), view.ndim)))
        return view[tuple(indices)]

    def field_read(self, fid, indices):
        return self.read(_state.current().field_map()[fid])[tuple(indices)]


@dataclass(frozen=True)
class SizedTask:
    """One task's stacks sized for a launch: capacities and the heap layout they give.

    `device_meta` is the backend storage that already holds the layout's metadata words when the
    GPU sizer computed them (the launch binds it as the task's metadata buffer), else None (the
    backend uploads `layout.metadata()`)."""
    caps: tuple
    layout: sz.Layout
    device_meta: object = field(default=None, compare=False)


def check_metadata_words(words):
    """Metadata words are uint32 on every backend: a larger one is a clear error."""
    if max(words, default=0) >= 2**32:
        raise SpiradDeviceError(f"adstack row of {max(words)} bytes does not fit 32-bit offsets")


def host_sized(caps, entry_sizes, kinds) -> SizedTask:
    """The SizedTask of capacities evaluated on the host (layout computed here)."""
    layout = sz.compute_layout(list(caps), list(entry_sizes), list(kinds))
    check_metadata_words(layout.metadata())
    return SizedTask(tuple(caps), layout)


def _key_function(scalars, shapes, nds, fields):
    """A function args -> cache key, specialised to what a task reads (the launch hot path)."""
    if not (scalars or shapes or nds):
        if not fields:
            return lambda args: ()
        return lambda args: tuple([f.generation for f in fields])

    def key(args):
        k = [args[i] for i in scalars]
        k += [args[i].storage_shape for i in shapes]
        k += [(args[i].id, args[i].generation) for i in nds]  # ids are never reused
        k += [f.generation for f in fields]
        return tuple(k)
    return key


def _buffer_of(arg, which):
    return arg if which is False else (arg.grad if which is True else arg.dual)


@dataclass(eq=False)
class Counting:
    """The counting pass of an adjoint program with measured stacks (module docstring)."""
    compiled: object      # launch.Compiled of the counting task list (its last argument: counts)
    n: int                # counters
    key_of: object        # args -> key of everything the counting program reads
    counts: object = None  # the i32 ndarray it reduces into (made at the first pass)
    last: tuple = None    # the counts of the last pass (overflow messages)

    @staticmethod
    def of(compiled, n: int) -> "Counting":
        tl = compiled.tl
        scalars = [i for i, a in enumerate(tl.args[:-1]) if a.kind == "scalar"]
        nds = [i for i, a in enumerate(tl.args[:-1]) if a.kind == "ndarray"]
        bufs = [(src[1], src[2]) for src in compiled.reads
                if src[0] == "ndarray" and src[1] < len(tl.args) - 1]
        fields = [src[1] for src in compiled.reads if src[0] == "field"]

        def key_of(args):
            k = [args[i] for i in scalars]
            k += [args[i].storage_shape for i in nds]
            k += [(args[i].id, _buffer_of(args[i], w).generation) for i, w in bufs]
            k += [f.generation for f in fields]
            return tuple(k)
        return Counting(compiled, n, key_of)


def _reads_key(exprs):
    """`_key_function` of what `exprs` (None entries skipped) read."""
    lv = sz.leaves(*[e for e in exprs if e is not None])
    fields = []
    if lv.fields:
        fmap = _state.current().field_map()
        fields = [fmap[f] for f in sorted(lv.fields) if f in fmap]
    return _key_function(sorted(lv.scalars), sorted(lv.shapes), sorted(lv.ndarrays), fields)


@dataclass(eq=False)
class TaskSizing:
    """Sizing of one adjoint task: its stacks' expressions, what they read, and its cache entry."""
    exprs: tuple                      # capacity SizeExpr per stack (stack order); None where
                                      # measured (its counter in `measured`)
    required: tuple                   # the automatic size per stack (differs when forced), or None
    entry_sizes: tuple                # bytes per entry per stack
    kinds: tuple                      # layout kind per stack ('float', 'primal', 'int')
    leaves: sz.Leaves
    device: bool                      # some expression reads field / ndarray data
    key_of: object                    # args -> cache key (what the expressions read)
    key: tuple = None                 # cache entry: the key ...
    sized: SizedTask = None           # ... and its result
    host_last: SizedTask = None       # the last host-sized result (its layout is reused when the
                                      # capacities repeat, also with the cache off)
    measured: tuple = ()              # per stack: its counter (AdStackArg.measured), -1 if none
    required_key_of: object = None    # args -> what the `required` expressions read (forced
                                      # sizes: an overflow message's size is exact while it holds)

    @staticmethod
    def of(stacks, counting: Counting = None) -> "TaskSizing":
        """From a task's ADSTACK_ALLOCA nodes (stack order); `counting`: the program's counting
        pass, when some stack of it is measured."""
        exprs = tuple(a.arg.capacity for a in stacks)
        measured = tuple(a.arg.measured for a in stacks)
        lv = sz.leaves(*[e for e in exprs if e is not None])
        fields = []
        if lv.fields:  # fields live as long as this compiled program's init()
            fmap = _state.current().field_map()
            fields = [fmap[f] for f in sorted(lv.fields)]
        key_of = _key_function(sorted(lv.scalars), sorted(lv.shapes), sorted(lv.ndarrays), fields)
        if any(m >= 0 for m in measured):
            if counting is None:
                raise RuntimeError("a measured adstack without the program's counting pass")
            own, counted = key_of, counting.key_of
            key_of = lambda args: (own(args), counted(args))  # noqa: E731
        required = tuple(a.arg.required for a in stacks)
        return TaskSizing(exprs, required, tuple(a.dtype.nbytes for a in stacks),
                          tuple(adstack_kind(a) for a in stacks), lv,
                          bool(lv.fields or lv.ndarrays) and all(m < 0 for m in measured), key_of,
                          required_key_of=_reads_key(required), measured=measured)

    def on_host(self, args, counts=None) -> SizedTask:
        ctx = LaunchContext(args)
        caps = tuple(max(int(counts[m] if m >= 0 else sz.eval_fast(e, ctx)), 0)
                     for e, m in zip(self.exprs, self.measured or (-1,) * len(self.exprs)))
        last = self.host_last
        if last is None or last.caps != caps:  # the layout follows from the capacities alone
            last = self.host_last = host_sized(caps, self.entry_sizes, self.kinds)
        return last


@dataclass(eq=False)
class ProgramSizing:
    """The adstack sizing of one adjoint program: a TaskSizing per task (None: no stacks)."""
    tasks: tuple
    forced: bool   # a size was forced (ad_stack_size / default_ad_stack_size): overflow possible
    cache: bool    # init(adstack_cache=...)
    last: tuple = None  # the result of the last `evaluate` with every task sized (cache on)
    counting: Counting = None  # the counting pass of the measured stacks, if any

    @staticmethod
    def of(tl, cache: bool, counting=None) -> "ProgramSizing | None":
        """The sizing of an adjoint task list, or None when no task has stacks. `counting`:
        the compiled counting program (`launch.Compiled`) when some stack is measured."""
        per_task = [adstack_allocas(t) for t in tl.tasks]
        if not any(per_task):
            return None
        n = 1 + max((a.arg.measured for st in per_task for a in st), default=-1)
        cnt = Counting.of(counting, n) if n else None
        tasks = tuple(TaskSizing.of(st, cnt) if st else None for st in per_task)
        forced = any(ts is not None and ts.exprs != ts.required for ts in tasks)
        return ProgramSizing(tasks, forced, cache, counting=cnt)

    def required(self, task: int, stack: int, args, read=None):
        """The size stack `stack` of task `task` needs at a launch with `args` (None: unknown);
        `read`: how to read field / ndarray data (`LaunchContext`)."""
        ts = self.tasks[task]
        if ts is not None and ts.measured and ts.measured[stack] >= 0 and self.counting.last:
            return self.counting.last[ts.measured[stack]]
        expr = ts.required[stack] if ts is not None else None
        if expr is None:
            return None
        try:
            return int(sz.eval_fast(expr, LaunchContext(args, read)))
        except sz.SizerError:
            return None

    def required_inputs(self, task: int, args) -> tuple:
        """A key of everything task `task`'s automatic sizes read (scalars, shapes, write
        generations): equal keys, equal required sizes."""
        ts = self.tasks[task]
        return () if ts is None else ts.required_key_of(args)


def evaluate(sizing: ProgramSizing, args, cache=None, measure=None) -> tuple:
    """A SizedTask (None for tasks without stacks) per task for this launch. With the cache on
    (`cache` None: the program's setting) an unchanged task costs one key comparison, and when
    every task hits, the tuple returned last time is returned again. `measure(counting, args)`:
    runs a counting pass (`launch.measure`), for programs with measured stacks."""
    if cache is None:
        cache = sizing.cache
    if cache and sizing.last is not None:
        for ts in sizing.tasks:
            if ts is not None and ts.key != ts.key_of(args):
                break
        else:
            stats.cache_hits += len(sizing.tasks) - sizing.tasks.count(None)
            return sizing.last
        sizing.last = None  # set again once every task is sized (an error leaves it unset)
    gpu = _state.backend().gpu_sizer
    out = []
    counts = None
    for ts in sizing.tasks:
        if ts is None:
            out.append(None)
            continue
        key = ts.key_of(args) if cache else None
        if cache and ts.key == key and ts.sized is not None:
            stats.cache_hits += 1
            out.append(ts.sized)
            continue
        if any(m >= 0 for m in ts.measured):
            if counts is None:  # one counting pass sizes every task of the launch
                if measure is None:
                    raise RuntimeError("sizing measured adstacks needs the launch's counting pass")
                counts = sizing.counting.last = tuple(measure(sizing.counting, args))
                stats.counting_passes += 1
            try:
                sized = ts.on_host(args, counts)
            except sz.SizerError as e:
                raise SpiradAutodiffError(f"sizing the autodiff stacks failed: {e}") from None
            stats.host_evaluations += 1
            if cache:
                ts.key, ts.sized = key, sized
            out.append(sized)
            continue
        try:
            sized = gpu.size(ts, args) if ts.device and gpu is not None else None
            if sized is not None:  # None: the GPU sizer declined (see its docstring)
                stats.gpu_dispatches += 1
            else:
                sized = ts.on_host(args)
                stats.host_evaluations += 1
        except sz.SizerError as e:
            raise SpiradAutodiffError(f"sizing the autodiff stacks failed: {e}") from None
        if cache:
            ts.key, ts.sized = key, sized
        out.append(sized)
    out = tuple(out)
    if cache:
        sizing.last = out
    return out


def debug_print(kernel_name, sizing: ProgramSizing, sized, heaps):
    w = sys.stderr.write
    w(f"[spirad adstack] launch of {kernel_name}\n")
    for k, (ts, s) in enumerate(zip(sizing.tasks, sized)):
        if ts is None:
            continue
        code = sz.encode([sz.Const(0) if e is None else e for e in ts.exprs], fold=False)
        counted = [i for i, m in enumerate(ts.measured) if m >= 0]
        if counted:
            w(f"  task {k}: stacks {counted} measured by the counting pass (their bytecode: 0)\n")
        w(f"  task {k}: bytecode ({len(code)} words):\n")
        for line in sz.disassemble(code).splitlines():
            w(f"    {line}\n")
        lay = s.layout
        w(f"  task {k}: sizes {list(s.caps)}  kinds {list(lay.kinds)}  stride_float "
          f"{lay.stride_float} B  stride_int {lay.stride_int} B\n")
    w(f"  heaps: float {heaps[0]} B, int {heaps[1]} B\n")


def debug_checkpointed(c, note, heap_after):
    """SPIRAD_DEBUG_ADSTACK=1, a launch switched to the checkpointed adjoint: which loops, every
    how many trips, and the heap before / after (passes/autodiff/loop_checkpoint.py)."""
    name, heap, budget, every = note
    lines = sorted({a.loc.lineno for t in c.tl.tasks for a in adstack_allocas(t)
                    if a.arg.name.endswith(".ckpt") and a.loc is not None})
    sys.stderr.write(
        f"[spirad adstack] {name}: the adstack heap would take {heap} B, over the budget of "
        f"{budget} B (init(ad_stack_memory=)): checkpointed the loops at line(s) "
        f"{', '.join(map(str, lines)) or '?'} every {every} trips; heap {heap_after} B, "
        f"saved {heap - heap_after} B" + (" (still over the budget)" if heap_after > budget
                                          else "") + "\n")
