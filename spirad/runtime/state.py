"""Process-wide runtime state: the chosen arch and backend, default types, live fields.

`init()` replaces the whole state (fields and compiled kernels of the previous state become
invalid), as in Taichi. The backend is created lazily, so importing spirad costs nothing.
"""
from __future__ import annotations

import atexit
import itertools
import weakref
from dataclasses import dataclass, field

from kernel_ir import dtypes as T

from ..options import InitValues


@dataclass
class State:
    arch: str = "cpu"
    default_fp: T.DType = T.f32
    default_ip: T.DType = T.i32
    debug: bool = False
    options: InitValues = field(default_factory=InitValues)  # init()'s keywords, typed
    backend: object = None
    epoch: int = 0
    fields: list = field(default_factory=list)
    materialized: bool = False  # no field declared since the last materialize hook (spirad.runtime.program_hooks)
    snode_trees: int = 0  # Taichi's SNode trees closed so far: a launch closes the fields declared before it
    layout_version: int = 0  # bumped when a placement or gradient is added (compiled kernels key on it)
    asserts: object = None     # asserts.AssertState, made by the first assert compiled in debug
    validation: object = None  # tape_validation.Validation, made by the first Tape(validation=True)
    rng: object = None     # frontend.rng: the launch counter field of kernels using sd.random()
    py_rng: object = None  # numpy Generator behind sd.random() called from Python
    prints: object = None  # printing.PrintBuffer: kernel print formats and buffers (first print)
    sparse_levels: list = None  # spirad.data.sparse_layout: the sparse SNodes, whose masks kernels bind
    _ids: itertools.count = field(default_factory=itertools.count)
    _field_map: tuple = (0, {})  # (fields + duals when built, id -> Field)

    def new_id(self) -> int:
        return next(self._ids)

    def field_map(self) -> dict:
        """Field id -> Field (gradient and dual fields included), rebuilt when fields, gradients
        or duals were added."""
        n = (len(self.fields), self.layout_version, sum(f.needs_dual for f in self.fields),
             len(self.sparse_levels or ()))
        if self._field_map[0] != n or not self._field_map[1]:
            m = {}
            for f in self.fields:
                m[f.id] = f
                if f.needs_grad:
                    m[f.grad.id] = f.grad
                if f.needs_dual:
                    m[f.dual.id] = f.dual
            for lv in self.sparse_levels or ():  # their masks / lengths (internal fields)
                m[lv.mask.id] = lv.mask
                if lv.at_launch is not None:  # its launch-time copy (a sparse struct-for's)
                    m[lv.at_launch.id] = lv.at_launch
            self._field_map = (n, m)
        return self._field_map[1]


_epoch = itertools.count(1)
state = State(epoch=next(_epoch))


RESET_HOOKS: list = []  # called when the state is dropped (modules that keep per-state work)

# What the runtime needs from the layers above it, set by them at import (the runtime imports
# neither: architecture §1). `spirad/__init__.py` sets LOAD_BACKEND (`backends.load_backend`:
# (arch, State) -> the backend); `spirad.data.ndarray` sets ALIAS_ARRAY (`Ndarray._alias`:
# (storage, dtype, shape) -> an ndarray over backend memory), the type of the internal buffers
# a launch binds like an ndarray argument (the counting pass's counters, the GPU sizer's
# scratch), which are allocated by the backend.
LOAD_BACKEND = None
ALIAS_ARRAY = None
# The profiler of the live `init(kernel_profiler=True)` (`spirad.profiler.KernelProfiler`, set by
# `profiler.enable`), else None: every launch asks it (`launch._launch`).
PROFILER = None
kernels = weakref.WeakSet()  # every Kernel: their programs of a replaced state are dropped


def reset(**kw) -> State:
    """A new state. The old one's launches are finished first: an error they reported that
    was never raised is reported as a RuntimeWarning (not lost), what they printed is printed;
    then its fields' memory and every kernel's programs (which hold that memory) are released
    and its backend closed."""
    global state
    old = state
    for hook in RESET_HOOKS:  # spirad.runtime.program_hooks's `clear` moment
        hook()
    pending = None
    if old.backend is not None:
        try:
            old.backend.sync()
        except Exception as e:  # noqa: BLE001 - reported below, the new state starts anyway
            pending = e
        _flush_prints(old)
    for k in list(kernels):
        k.forget()
    for f in list(old.field_map().values()):
        f._buf = None  # the memory goes with the state (a stale field's use raises)
    if old.backend is not None:
        old.backend.close()
    state = State(epoch=next(_epoch), **kw)
    if pending is not None:
        import warnings
        warnings.warn(f"sd.init(): a kernel of the previous init() reported an error that was "
                      f"never raised (no sync or host read followed): {type(pending).__name__}: "
                      f"{pending}", RuntimeWarning, stacklevel=4)
    return state


def _flush_prints(st: State) -> None:
    """Print what `st`'s kernels printed (before a new init(), and at exit); a kernel error
    pending there is not raised again here."""
    if st.prints is not None and st.prints.dirty and st.backend is not None:
        from ..printing import flush
        try:
            flush(st)
        except Exception:  # noqa: BLE001 - the error was (or will be) reported by its sync
            st.prints.dirty = False


@atexit.register
def _at_exit() -> None:
    _flush_prints(state)


def current() -> State:
    return state


def backend():
    """The live backend, created on first use."""
    s = state
    if s.backend is None:
        from .guard import LOCK, install
        with LOCK:
            if s.backend is None:
                install()
                s.backend = LOAD_BACKEND(s.arch, s)
    return s.backend
