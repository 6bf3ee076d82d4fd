"""One launch path for every program: a kernel's forward program and its adjoint alike.

    Compiled     one program compiled for one signature and backend (forward or adjoint); the
                 adjoint of a forward program is compiled at its first `grad` and kept on it
    LaunchPlan   what one set of arguments gives: argument bytes, storages, task ranges, and —
                 for adjoint programs with adstacks — the current `AdstackPlan`
    AdstackPlan  per task: the sized stacks (`sizing_cache.SizedTask`) and what the backend
                 derived from them (`Backend.plan_adstack`); replaced whenever a size changes
    run(plan)    sizing (cache) when the program has adstacks -> backend launch -> write
                 generations of everything the program may write -> the kernel's return value
                 (read back: a kernel that returns syncs, and its prints are flushed)

A kernel keeps the last plan per mode (forward / adjoint) and reuses it while the launch inputs
are the same objects or equal numbers (`same_args`, checked once per launch); everything else
about a launch is decided here, in one place.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradValueError

from . import guard as _guard
from . import printing, sizing_cache
from . import state as _state

DEVICE_BOUNDS = "device"  # Compiled.bounds entry of a range task whose bounds read globals

_PACK = {"f32": "<f", "f64": "<d", "i32": "<i", "i64": "<q", "u32": "<I", "u64": "<Q", "u1": "<I"}


@dataclass(eq=False)
class Compiled:
    """One program compiled for one signature and backend."""
    tl: object              # the TaskList the backend compiled
    abi: object             # its KernelABI
    program: object         # the backend's compiled program
    bounds: tuple           # per task: None (serial), (begin_fn, end_fn) of (scalars, shapes), or
                            # DEVICE_BOUNDS: the range reads globals (backends/range_bounds)
    writes: tuple           # what a launch may write: ('field', Field) | ('ndarray', arg, which)
    bindings_src: tuple     # per binding: ('field', Field) | ('ndarray', arg, which) | ('temp', k)
                            # (which: False = the array, True = its .grad, 'dual' = its .dual)
    sizing: sizing_cache.ProgramSizing = None  # adjoint programs with adstacks, else None
    template_refs: tuple = ()   # template arguments kept alive: their ids key the cache
    adjoint: "Compiled" = None  # forward programs: the adjoint, once compiled (first grad)
    forward_mode: "Compiled" = None  # forward programs: the forward-mode program (sd.ad.FwdMode)
    validation: "Compiled" = None  # forward programs: the Tape(validation=True) instrumented one
    returns: object = None  # kernel_return.KernelReturn of a kernel with a return type, else None
    prints: bool = False    # the program writes print records (spirad.printing)
    cache_key: str = None   # its offline-cache key (spirad.offline_cache), None: not cached
    reads: tuple = ()       # what a launch may read, in the form of `writes` (an atomic add reads)


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
class LaunchPlan:
    """One program's launch with one set of arguments."""
    compiled: Compiled
    epoch: int
    args: tuple
    argbuf: bytes
    storages: list          # in `abi.bindings` order; None for kernel temporaries
    ranges: list            # per task: (begin, end), or None where the backend evaluates the
                            # range when the task starts (DEVICE_BOUNDS)
    adstack: AdstackPlan = None


def _buffer(arr, which):
    """An ndarray argument's array, its .grad (which=True) or its .dual (which='dual')."""
    return arr if which is False else (arr.grad if which is True else arr.dual)


def same_args(a, b) -> bool:
    """The same launch inputs: identical objects (not mutable containers: a list template
    argument may have changed in place), or equal numbers of the same type."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x is not y and (type(x) is not type(y) or not isinstance(x, (int, float)) or x != y):
            return False
        if type(x) in (list, dict):
            return False
    return True


def plan(c: Compiled, args, epoch: int) -> LaunchPlan:
    """The LaunchPlan of `c` with these (already checked) arguments."""
    abi = c.abi
    argbuf = bytearray(abi.arg_buffer_size)
    scalars = []
    for i, spec in enumerate(c.tl.args):
        if spec.kind == "scalar":
            v = args[i]
            if spec.dtype.is_int and not (spec.dtype == T.u1):
                info = np.iinfo(spec.dtype.np)
                if not info.min <= int(v) <= info.max:
                    raise SpiradValueError(f"argument '{spec.name}' = {v} does not fit {spec.dtype}")
            struct.pack_into(_PACK[spec.dtype.name], argbuf, abi.arg_offsets[i],
                             bool(v) if spec.dtype == T.u1 else v)
            scalars.append(v)
        else:
            scalars.append(None)
    shapes = {}
    for a, ax, off in abi.shape_offsets:
        n = args[a].full_shape[ax]
        if n > 2**31 - 1:
            raise SpiradValueError("ndarray axis longer than 2**31-1 elements")
        struct.pack_into("<i", argbuf, off, n)
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
    ranges = [(0, 1) if b is None else None if b is DEVICE_BOUNDS else
              (b[0](scalars, shapes), b[1](scalars, shapes)) for b in c.bounds]
    return LaunchPlan(c, epoch, tuple(args), bytes(argbuf), storages, ranges)


def run_once(c: Compiled, args):
    """Plan and run `c` with `args` (internal programs such as the GPU sizer's kernels)."""
    run(plan(c, args, _state.current().epoch))


def run(p: LaunchPlan):
    """Launch `p`: size the adstacks (cached) if the program has any, launch, bump the write
    generations of everything the program may write; returns the kernel's return value (None
    without a return type). Holds the process lock with interrupts deferred (`spirad.guard`);
    the generations are bumped even when the launch fails or stops part way."""
    with _guard.launching():
        try:
            _launch(p)
        finally:
            _bump(p)
        c = p.compiled
        if c.returns is not None:
            value = c.returns.read(_state.backend())
            printing.flush(_state.current())
            return value
    return None


def _launch(p: LaunchPlan) -> None:
    c = p.compiled
    be = _state.backend()
    if c.prints:
        _state.current().prints.dirty = True
    if c.sizing is not None:
        sized = sizing_cache.evaluate(c.sizing, p.args)
        ad = p.adstack
        if ad is None or ad.sized != sized:  # new sizes: new backend plans (identity first)
            tasks = tuple(None if s is None else be.plan_adstack(c.program, ti, s)
                          for ti, s in enumerate(sized))
            ad = p.adstack = AdstackPlan(sized, tasks, c.sizing.forced, c.sizing, p.args)
        be.launch(c.program, p.storages, p.argbuf, p.ranges, ad)
        if sizing_cache.debug_enabled():
            sizing_cache.debug_print(c.tl.name, c.sizing, sized, be.heap_bytes())
    else:
        be.launch(c.program, p.storages, p.argbuf, p.ranges, None)


def _bump(p: LaunchPlan) -> None:
    """Write generations of everything `p`'s program may write (sizing cache, DESIGN §4)."""
    args = p.args
    for w in p.compiled.writes:
        if w[0] == "field":
            w[1].generation += 1
        elif w[0] == "ndarray":
            _buffer(args[w[1]], w[2]).generation += 1
