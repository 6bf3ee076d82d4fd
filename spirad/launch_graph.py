"""Launch graphs: a sequence of launches recorded once and replayed (`sd.Graph`).

    g = sd.Graph()
    with g.capture():          # the launches run as usual, and are recorded
        step(state, 0.01)
    for _ in range(1000):
        g.replay()             # the same launches again: no argument checks, no plans
    g.replay(dt=0.005)         # a scalar parameter named `dt` rebound in every launch that has one

Why: a Genesis step is dozens of small launches, and the host work of a launch (arguments,
plan, lock, generations) is as long as the kernel (docs/performance.md). A replay runs the
recorded `LaunchPlan`s under one process lock; runs of launches a backend takes itself
(`Backend.replay_entry`) are one backend call (`replay_kept`, with a dict the graph keeps for
what the backend builds for them): on the CPU the task functions called through ctypes, nothing
of the launch path between them (`CpuBackend.replay_entry`: tasks that each run as one call); on
Vulkan one command buffer recorded at the first replay and submitted again, with only the
argument blocks that changed rewritten (`backends.spirv_replay`, `gfx_runtime.vulkan.recording`);
on Metal (wgpu, whose command buffers are submitted once) the run's dispatches made once and
given to the runtime again, into its one open pass (one encoder, one submit at the next sync).
Every other launch goes through the launch path's `_launch`, as eagerly, without the argument
handling, and splits the run there: adstacks (sized on the host), prints, split or privatised
CPU tasks, ranges read from globals on the host, and every launch on CUDA and AMDGPU (their
launch path queues nothing to re-submit: emulated here, no CUDA graphs without a device). Write
generations are bumped as by eager launches, so adstack sizing caches stay right; adjoint
launches (`k.grad(...)` inside `capture`) size their adstacks at every replay.

What is recorded are the launches' plans: the same fields, the same ndarrays, the same template
values and scalars (CUDA graphs' and Warp's `capture_launch` meaning); data changes in them are
seen, other objects are not. A graph is stale when an eager launch would plan its kernels
again: after `sd.init()`, or a new layout (a gradient or dual placed, a field tree destroyed);
`replay` then raises instead of running old plans: capture it again. (A new field alone leaves
the recorded fields' memory where it is, and the graph valid.) Refused at capture (a clear error): launches with numpy / torch arguments (copied
around each launch), kernels that return values, list / dict template arguments (changed in
place), captures inside a `Tape` or another capture; and replays inside a `Tape` (nothing would
be recorded for its backward pass).
"""
from __future__ import annotations

import contextlib

from kernel_ir.errors import SpiradNotSupportedError, SpiradTypeError, SpiradValueError

from .runtime import guard as _guard
from .runtime import launch as _launch
from .runtime import state as _state
from .runtime.program_hooks import materialize_if_needed


_ACTIVE = _guard.PerThread()


class _Capture:
    """The graph being captured, per thread (`Kernel._run` asks at every launch)."""
    active = _ACTIVE


class Stats:
    """Counters for benchmarks and tests: launches replayed, and of them in a backend's
    `replay` (no launch-path Python between task calls)."""
    replayed_launches = 0
    native_launches = 0


stats = Stats()


class Graph:
    """A recorded sequence of launches, replayed with `replay()` (architecture §5: one
    submission where no host step intervenes). See the module docstring."""

    def __init__(self):
        self._records = []   # [(kernel, LaunchPlan)] in launch order
        self._epoch = None   # (init epoch, layout version) of the capture
        self._segments = None  # what replay runs: [("native", entries, plans) | ("plan", p)]
        self._rebound = None  # (scalars, segments) of the last replay with scalars
        self._kept = {}  # what the backend keeps for the native runs (`Backend.replay_kept`)

    @property
    def launches(self) -> int:
        """How many launches the graph replays."""
        return len(self._records)

    @contextlib.contextmanager
    def capture(self):
        """Record the launches of the block (they also run, as usual). A new capture replaces
        what the graph held."""
        from .recording.tape import Tape
        if Tape.active is not None:
            raise SpiradNotSupportedError("sd.Graph.capture() inside an sd.ad.Tape: a replay "
                                          "would not be recorded for the backward pass; "
                                          "capture outside the Tape")
        if _Capture.active is not None:
            raise SpiradNotSupportedError("sd.Graph.capture() inside another capture")
        if not _state.state.materialized:
            materialize_if_needed()
        st = _state.state
        self._records, self._segments, self._rebound, self._kept = [], None, None, {}
        self._epoch = (st.epoch, st.layout_version)
        _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.set(None)
        st = _state.state
        if self._epoch != (st.epoch, st.layout_version):
            self._records = []
            raise SpiradValueError("the layout changed during sd.Graph.capture() (a gradient "
                                   "placed or a field tree destroyed): capture again once it "
                                   "is settled")

    def record(self, kernel, p, foreign: bool) -> None:
        """`Kernel._run`: the plan `p` about to be launched, in capture."""
        name = kernel.fn.__name__
        if foreign:
            raise SpiradNotSupportedError(
                f"kernel {name} was given numpy / torch arrays inside sd.Graph.capture(): they "
                f"are copied around each launch, which a replay would not do; pass sd.ndarrays "
                f"(sd.from_dlpack shares torch memory)")
        if p.compiled.returns is not None:
            raise SpiradNotSupportedError(f"kernel {name} returns a value: a replay cannot "
                                          f"return it; launch it outside the graph")
        if p.mutable:
            raise SpiradNotSupportedError(f"kernel {name} takes a list / dict template argument "
                                          f"inside sd.Graph.capture() (it may change in place); "
                                          f"pass a tuple")
        self._records.append((kernel, p))

    def replay(self, **scalars) -> None:
        """Launch the recorded sequence again. Keyword arguments rebind scalar parameters of
        that name in every recorded launch of a kernel that has one (`launch.rebind`)."""
        from .recording.tape import Tape
        if Tape.active is not None:
            raise SpiradNotSupportedError("sd.Graph.replay() inside an sd.ad.Tape: launch the "
                                          "kernels eagerly to record them")
        if not _state.state.materialized:  # fields declared since (Genesis' hook fills them)
            materialize_if_needed()
        st = _state.state
        if self._epoch is None:
            raise SpiradValueError("sd.Graph.replay() before capture(): nothing recorded")
        if self._epoch != (st.epoch, st.layout_version):
            raise SpiradValueError("this sd.Graph was captured before sd.init() or before the "
                                   "layout changed (a gradient placed, a field tree destroyed): "
                                   "its launches are stale; capture it again")
        be = _state.backend()
        if scalars:
            segments = self._with_scalars(scalars, be)
        else:
            segments = self._segments
            if segments is None:
                segments = self._segments = _segments([p for _, p in self._records], be)
        if _state.PROFILER is not None:  # sd.init(kernel_profiler=True): every launch timed
            segments = [("plan", p) for seg in segments
                        for p in (seg[2] if seg[0] == "native" else (seg[1],))]
        stats.replayed_launches += len(self._records)
        with _guard.launching():
            for seg in segments:
                if seg[0] == "native":
                    try:
                        be.replay_kept(seg[1], self._kept)
                    finally:
                        for p in seg[2]:
                            _launch._bump(p)
                    stats.native_launches += len(seg[2])
                else:
                    p = seg[1]
                    try:
                        _launch._launch(p)
                    finally:
                        _launch._bump(p)
                if _guard.cancelled():
                    return

    def _with_scalars(self, scalars: dict, be) -> list:
        hit = self._rebound
        if hit is not None and hit[0] == scalars and all(
                type(v) is type(hit[0][k]) for k, v in scalars.items()):
            return hit[1]
        used = set()
        plans = []
        for kernel, p in self._records:
            args = None
            for i, (name, _) in enumerate(kernel.params or ()):
                if name in scalars and i < len(p.args) and p.compiled.tl.args[i].kind == "scalar":
                    if kernel._has_vectors:
                        raise SpiradNotSupportedError(
                            f"sd.Graph.replay({name}=...): kernel {kernel.fn.__name__} has "
                            f"vector / matrix parameters; rebinding its scalars is not supported")
                    args = list(p.args) if args is None else args
                    args[i] = scalars[name]
                    used.add(name)
            if args is not None:
                q = _launch.rebind(p, tuple(args))
                if q is None:
                    raise SpiradTypeError(f"sd.Graph.replay(): the new scalar arguments of kernel "
                                          f"{kernel.fn.__name__} do not fit its parameters (a "
                                          f"number of the type captured, in range)")
                p = q
            plans.append(p)
        unknown = sorted(set(scalars) - used)
        if unknown:
            raise SpiradTypeError(f"sd.Graph.replay(): no recorded launch has a scalar parameter "
                                  f"named {', '.join(unknown)}")
        segments = _segments(plans, be)
        self._rebound = (dict(scalars), segments)
        return segments


def _segments(plans, be) -> list:
    """The replay of `plans`: runs of launches the backend replays itself (`replay_entry`),
    the others one by one through the launch path."""
    out = []
    for p in plans:
        c = p.compiled
        entry = None
        if c.sizing is None and not c.prints:
            entry = be.replay_entry(c.program, p.storages, p.argbuf, p.ranges)
        if entry is None:
            out.append(("plan", p))
        elif out and out[-1][0] == "native":
            out[-1][1].append(entry)
            out[-1][2].append(p)
        else:
            out.append(("native", [entry], [p]))
    return out
