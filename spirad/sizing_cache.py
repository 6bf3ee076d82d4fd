"""Launch-time adstack sizing: evaluate each task's size expressions, with a per-task cache.

Per task the cache keeps the last evaluated capacities, keyed by everything the expressions read:
the scalar arguments and ndarray shapes they use, and a snapshot of the *write generation* of
every field / ndarray whose data they read (`Field.generation`, bumped by every host write —
`x[i] = v`, `fill`, `from_numpy` — and by every kernel launch that may write it). A hit skips
evaluation entirely (on Vulkan: no bytecode upload, no sizer dispatch, no read-back).

Evaluation: expressions that read device-resident data (field / ndarray values) go to the GPU
sizer kernel when the backend provides one (`backend.gpu_sizer`); everything else is evaluated
on the host by `sizer.eval_fast`. `SPIRAD_DEBUG_ADSTACK=1` prints, per launch, the bytecode,
the evaluated sizes, the strides and the heap sizes.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import sizer as sz

from . import state as _state
from kernel_ir.errors import SpiradAutodiffError


@dataclass
class SizerStats:
    """Counters the tests read: how often sizing really ran."""
    host_evaluations: int = 0
    gpu_dispatches: int = 0
    cache_hits: int = 0

    def reset(self):
        self.host_evaluations = self.gpu_dispatches = self.cache_hits = 0


stats = SizerStats()


_DEBUG = [os.environ.get("SPIRAD_DEBUG_ADSTACK") == "1"]


def debug_enabled() -> bool:
    return _DEBUG[0]


def refresh_debug_flag():
    """Re-read SPIRAD_DEBUG_ADSTACK (called by `init`)."""
    _DEBUG[0] = os.environ.get("SPIRAD_DEBUG_ADSTACK") == "1"


class LaunchContext:
    """What the host sizer reads at launch: scalar args, ndarray shapes and data, field data."""

    def __init__(self, args):
        self.args = args
        self.fields = None

    def scalar_arg(self, i):
        return self.args[i]

    def ndarray_shape(self, i, axis):
        return self.args[i].full_shape[axis]

    def ndarray_read(self, i, indices):
        return self.args[i]._view()[tuple(indices)]

    def field_read(self, fid, indices):
        return _state.current().field_map()[fid]._view()[tuple(indices)]


@dataclass
class TaskSizing:
    """Sizing of one adjoint task: its expressions, what they read, and the cache entry."""
    exprs: list
    leaves: sz.Leaves
    device: bool                      # some expression reads field / ndarray data
    key: tuple = None
    caps: list = None
    code: object = field(default=None, repr=False)

    @staticmethod
    def of(exprs):
        lv = sz.leaves(*exprs)
        ts = TaskSizing(list(exprs), lv, bool(lv.fields or lv.ndarrays))
        ts.order = (sorted(lv.scalars), sorted(lv.shapes), sorted(lv.ndarrays), sorted(lv.fields))
        return ts

    def cache_key(self, args):
        """Everything the expressions read, as a tuple: scalar values, ndarray shapes, (id,
        write generation) of each ndarray read and the write generation of each field read."""
        fn = self.__dict__.get("_key_fn")
        if fn is None:
            fn = self._key_fn = self._make_key_fn()
        return fn(args)

    def _make_key_fn(self):
        """A key function specialised to what this task reads (the launch hot path)."""
        scalars, shapes, nds, fids = self.order
        objs = None
        if fids:  # fields live as long as this compiled kernel's init()
            fields = _state.current().field_map()
            objs = [fields[f] for f in fids]
        if not (scalars or shapes or nds):
            if not objs:
                return lambda args: ()
            return lambda args: tuple([f.generation for f in objs])

        def key(args):
            k = [args[i] for i in scalars]
            k += [args[i].full_shape for i in shapes]
            k += [(args[i].id, args[i].generation) for i in nds]  # ids are never reused
            if objs:
                k += [f.generation for f in objs]
            return tuple(k)
        return key


class SizingSet:
    """The TaskSizing (None: no stacks) of every task of one adjoint kernel, and the capacity
    list `evaluate` returned for it last."""

    def __init__(self, tasks):
        self.tasks = list(tasks)
        self.sized = [ts for ts in self.tasks if ts is not None]
        self.last = None

    def __iter__(self):
        return iter(self.tasks)


def evaluate(sizing: SizingSet, args, cache=True):
    """Capacities per task (None for tasks without stacks) for this launch. With the cache on and
    every task a hit, the list returned last time is returned again (the same object), so callers
    can keep what they derived from it."""
    if cache and sizing.last is not None:
        for ts in sizing.sized:
            if ts.key != ts.cache_key(args):
                break
        else:
            stats.cache_hits += len(sizing.sized)
            return sizing.last
    if cache:
        sizing.last = None  # set again once every task is sized (an error leaves it unset)
    be = _state.backend()
    out = []
    for ts in sizing.tasks:
        if ts is None:
            out.append(None)
            continue
        key = ts.cache_key(args) if cache else None
        if cache and ts.key == key and ts.caps is not None:
            stats.cache_hits += 1
            out.append(ts.caps)
            continue
        gpu = getattr(be, "gpu_sizer", None)
        try:
            caps = gpu(ts, args) if ts.device and gpu is not None else None  # None: not on the GPU
            if caps is not None:
                stats.gpu_dispatches += 1
            else:
                ctx = LaunchContext(args)
                caps = [max(int(sz.eval_fast(e, ctx)), 0) for e in ts.exprs]
                stats.host_evaluations += 1
        except sz.SizerError as e:
            raise SpiradAutodiffError(f"sizing the autodiff stacks failed: {e}") from None
        if cache:
            ts.key, ts.caps = key, caps
        out.append(caps)
    if cache:
        sizing.last = out
    return out


def debug_print(kernel_name, tasks, caps, layouts, heaps):
    w = sys.stderr.write
    w(f"[spirad adstack] launch of {kernel_name}_grad\n")
    for k, (ts, c, lay) in enumerate(zip(tasks, caps, layouts)):
        if ts is None:
            continue
        if ts.code is None:
            ts.code = sz.encode(ts.exprs, fold=False)
        w(f"  task {k}: bytecode ({len(ts.code)} words):\n")
        for line in sz.disassemble(ts.code).splitlines():
            w(f"    {line}\n")
        w(f"  task {k}: sizes {c}  kinds {list(lay.kinds)}  stride_float {lay.stride_float} B  "
          f"stride_int {lay.stride_int} B\n")
    w(f"  heaps: float {heaps[0]} B, int {heaps[1]} B\n")
