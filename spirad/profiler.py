"""The kernel profiler: per kernel, how many launches and how long they took on the device.

    sd.init(arch=sd.vulkan, kernel_profiler=True)
    ...                                   # launch kernels
    sd.profiler.print_kernel_profiler_info()   # Taichi's name; also sd.print_kernel_profiler_info()

prints, per program (a kernel's forward program under its name, its adjoint as `name_grad`,
spirad's own helper kernels such as the GPU sizer's under theirs), the launch count and the
total, mean, min and max time, sorted by total time:

    spirad kernel profiler: vulkan (llvmpipe (LLVM 15.0.6, 256 bits)), device timestamps
    [  share     total    count |      min      mean       max  ] kernel
    [ 91.3%   12.406 ms      10x |    1.101     1.241     1.618 ms] step
    ...

Where the times come from: device timestamps where the backend has them
(`BackendBase.device_timer`: Vulkan writes a timestamp query before a launch's first dispatch
and after its last one, so the batch stays asynchronous and the time is what the device spent);
elsewhere host times: the profiler waits for earlier work, launches, and waits again, so each
launch is timed alone (what a CPU launch costs including its thread-pool split; for GPU backends
without timestamps, that plus the submission round trip). Profiling costs launch throughput on
those backends, so it is off unless `kernel_profiler=True`.

Also as Taichi: `query_kernel_profiler_info(name)` (count, min, max, avg in ms),
`get_kernel_profiler_total_time()` (seconds), `clear_kernel_profiler_info()`; `mode="trace"`
prints every launch.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from kernel_ir.errors import SpiradValueError

from .runtime import state as _state


@dataclass(frozen=True)
class KernelStats:
    """`query_kernel_profiler_info(name)`: Taichi's fields (times in milliseconds)."""
    counter: int
    min: float
    max: float
    avg: float
    total: float


class KernelProfiler:
    """Launch times per program of one `init()`."""

    def __init__(self, backend):
        self.backend = backend
        self.timer = backend.device_timer()
        self.source = "device timestamps" if self.timer is not None else "host times"
        self.times: dict = {}      # program name -> [seconds per launch]
        self.pending: list = []    # (program name, device timer token) not yet resolved

    # -- launches (spirad.runtime.launch.run) -----------------------------------------------------------
    def start(self):
        """Before a launch: a token for `stop` (a device timestamp, or the host time after a sync)."""
        if self.timer is not None:
            return self.timer.begin()
        self.backend.sync()  # earlier launches are not this one's time
        return time.perf_counter()

    def stop(self, name: str, token) -> None:
        """After a launch of program `name`: record its time."""
        if self.timer is not None:
            self.timer.end(token)
            self.pending.append((name, token))
            return
        self.backend.sync()
        self.times.setdefault(name, []).append(time.perf_counter() - token)

    def _resolve(self) -> None:
        if self.pending:
            done = self.timer.collect()  # waits for the launched work
            for name, token in self.pending:
                if token in done:  # absent: its launch failed before the second timestamp
                    self.times.setdefault(name, []).append(done[token])
            self.pending = []

    # -- reports ---------------------------------------------------------------------------------
    def stats(self) -> dict:
        """Program name -> KernelStats (times in ms) of every launch so far."""
        self._resolve()
        out = {}
        for name, ts in self.times.items():
            total = sum(ts)
            out[name] = KernelStats(len(ts), min(ts) * 1e3, max(ts) * 1e3, total / len(ts) * 1e3,
                                    total * 1e3)
        return out

    def clear(self) -> None:
        """Forget every launch recorded so far."""
        self._resolve()
        self.times = {}

    def report(self, mode: str = "count") -> str:
        """The profiler table as text (`mode`: 'count', or 'trace' for every launch)."""
        if mode not in ("count", "trace"):
            raise SpiradValueError(f"print_kernel_profiler_info: mode must be 'count' or 'trace', "
                                   f"got {mode!r}")
        stats = self.stats()
        be = self.backend
        lines = [f"spirad kernel profiler: {be.name} ({be.device_name()}), {self.source}"]
        if not stats:
            return "\n".join(lines + ["no kernel launches recorded"])
        grand = sum(s.total for s in stats.values()) or 1.0
        lines.append(f"[  share      total     count |      min      mean       max  ] kernel")
        for name, s in sorted(stats.items(), key=lambda kv: -kv[1].total):
            lines.append(f"[{100 * s.total / grand:6.1f}% {s.total:9.3f} ms {s.counter:7d}x | "
                         f"{s.min:8.3f}  {s.avg:8.3f}  {s.max:8.3f} ms] {name}")
            if mode == "trace":
                lines.extend(f"      {k:5d}: {t * 1e3:9.3f} ms" for k, t in
                             enumerate(self.times[name]))
        lines.append(f"total: {grand:.3f} ms in {sum(s.counter for s in stats.values())} launches")
        return "\n".join(lines)


def enable(backend) -> None:
    """`init(kernel_profiler=True)` (or False) for the state just created."""
    _state.PROFILER = KernelProfiler(backend) if backend is not None else None


_OFF = "the kernel profiler is off: call sd.init(..., kernel_profiler=True) before launching " \
       "the kernels to profile"


def _active() -> KernelProfiler:
    """The live profiler, or None (with a warning) when it is off and SPIRAD_PROFILER_OFF=warn
    (Taichi's behaviour: a warning, nothing reported); off otherwise is an error."""
    current = _state.PROFILER
    if current is None or current.backend is not _state.current().backend:
        from . import options
        if options.get("SPIRAD_PROFILER_OFF") == "warn":
            import warnings
            from kernel_ir.errors import SpiradWarning
            warnings.warn(f"{_OFF} (SPIRAD_PROFILER_OFF=warn: nothing reported)", SpiradWarning,
                          stacklevel=3)
            return None
        from kernel_ir.errors import SpiradError
        raise SpiradError(_OFF)
    return current


def print_kernel_profiler_info(mode: str = "count") -> None:
    """Print per-kernel launch count and total / mean / min / max time (module doc)."""
    p = _active()
    if p is not None:
        print(p.report(mode))


def query_kernel_profiler_info(name: str) -> KernelStats:
    """Count and times (ms) of the program `name`; all zero if it was not launched."""
    p = _active()
    return KernelStats(0, 0.0, 0.0, 0.0, 0.0) if p is None else \
        p.stats().get(name, KernelStats(0, 0.0, 0.0, 0.0, 0.0))


def get_kernel_profiler_total_time() -> float:
    """Total time of every profiled launch, in seconds."""
    p = _active()
    return 0.0 if p is None else sum(s.total for s in p.stats().values()) / 1e3


def clear_kernel_profiler_info() -> None:
    """Forget every launch recorded so far."""
    p = _active()
    if p is not None:
        p.clear()


def kernel_profiler_report(mode: str = "count") -> str:
    """The text `print_kernel_profiler_info` prints."""
    p = _active()
    return "" if p is None else p.report(mode)
