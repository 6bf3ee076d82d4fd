"""CPU runtime: JIT-compiles LLVM IR text and launches task functions on a thread pool.

Never imports `kernel_ir`: it receives LLVM IR text and symbol names only.

    rt = CpuRuntime()                       # one per process is enough; cheap after the first
    rt = CpuRuntime(target="x86-64-v3")     # code for another CPU this host can run
                                            # (SPIRAD_CPU_TARGET, llvm_codegen.cpu_target)
    mod = rt.load(llvm_ir, symbols)         # parse -> O3 (new pass manager, host CPU) -> object
                                            # code for the host -> linked into the OrcJIT
    obj, opt_ir = rt.compile_object(llvm_ir)  # the same in two steps: the object code is what an
    mod = rt.load_object(obj, symbols)        # offline cache stores (`rt.target_key` keys it)
    fn = mod.function(symbol)               # ctypes function (bufs, args, begin, end, worker)
    rt.run(fn, bufs, args, begin, end, parallel=True)

What the caller passes to `run` (build these once per launch, or keep them across launches):

* `bufs`: a ctypes array `(ctypes.c_void_p * n)(addr0, addr1, ...)`, one base address per
  `abi.bindings[k]` (C-contiguous, the binding's dtype; u1 as 4-byte 0/1); for a task with
  adstacks followed by meta, heap_float, heap_int, status (see `llvm_codegen.cpu_program`), the
  heaps with at least `num_workers` rows for a parallel launch.
* `args`: the argument buffer; an int address (fastest), a ctypes object, or a numpy uint8 array
  (contiguous). Its bytes must stay alive and unchanged for the call.
* `begin`, `end`: the task range (Python ints within int64); serial tasks: 0, 1, parallel=False.

Ranges of at least `parallel_min` (default `PARALLEL_MIN`; `run(..., min_split=k)` gives a
launch its own threshold, from the caller's estimate of the work per iteration) iterations are
split over the workers through the native pool (`cpu_pool`): the calling thread (worker slot 0)
and the pool's threads (slots 1..) take chunks of the range from a shared counter, so a worker
that gets no core costs the launch only its share; `run` returns the iterations the calling
thread ran. Smaller ranges and serial tasks run in the calling thread as worker 0. Launches are
serialised by a lock, so worker slots are never shared between concurrent launches. The calling
thread checks `cancel` (`CpuRuntime(cancel=event)`) between its chunks (1, 2, 4, ... at a time):
an interrupted launch stops taking chunks and `run` returns only when no worker writes any
more. `run_slots` (and `run` where the native pool is not available, or `native=False`)
splits into `num_workers` fixed contiguous chunks through a `ThreadPoolExecutor`, chunk `w` on
slot `w`, each run in pieces (4096 iterations first, doubling while a piece takes under 2 ms)
with the same check between them.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import llvmlite.binding as llvm

from . import cpu_pool, machine_code, perf_map

PARALLEL_MIN = 32768
PIECE_MIN = 4096        # first piece of a worker's chunk (run() checks for a stop between pieces)
PIECE_SECONDS = 0.002   # pieces double while each takes less than this
TASK_FN = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                           ctypes.c_int64, ctypes.c_int64, ctypes.c_int32)
# The same task function for callers that pass ctypes instances they built once (`CpuModule.direct`):
# `from_param` returns an instance of the argument's own type as it is, which halves the call
# (~1.0 -> ~0.5 us: each int converted, and the buffer table's pointer built, at every call)
DIRECT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                             ctypes.c_int64, ctypes.c_int32)


class _Target:
    """Process-wide LLVM state: target init, libm, TargetMachine, pass options, the LLJIT; one
    per CPU target (`spec`: None, the host; else SPIRAD_CPU_TARGET's value, `cpu_target`)."""

    _instances: dict = {}
    _lock = threading.Lock()

    @classmethod
    def get(cls, spec: str | None = None) -> "_Target":
        with cls._lock:
            t = cls._instances.get(spec)
            if t is None:
                t = cls._instances[spec] = cls(spec)
            return t

    def __init__(self, spec: str | None = None):
        from .cpu_target import resolve
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        libm = ctypes.util.find_library("m")
        if libm:
            llvm.load_library_permanently(libm)
        target = llvm.Target.from_default_triple()
        self.spec = spec
        self.triple = llvm.get_process_triple()
        self.cpu, self.features = resolve(spec)
        self.tm = target.create_target_machine(cpu=self.cpu, features=self.features, opt=3,
                                               jit=True)
        self.jit_tm = target.create_target_machine(cpu=self.cpu, features=self.features, opt=3,
                                                   jit=True)
        self.lljit = llvm.create_lljit_compiler(self.jit_tm)
        self.compile_lock = threading.Lock()
        self._names = itertools.count()
        self._support_addrs = None  # vecmath lane helpers: symbol -> address (`builder`)
        self._support_tracker = None
        self._pool_addrs = None  # the split launches' native pool (`cpu_pool`): symbol -> address
        self._pool_tracker = None

    def optimize(self, llvm_ir: str, vectorised: bool = False) -> str:
        """O3 with LLVM's loop and SLP vectorisers; `vectorised` (every range task already in
        SPMD lanes): O2 without them, which has nothing left to vectorise and halves the
        optimisation time of such modules (kernel b's gradient: 54 -> 24 ms at 32 lanes) at
        the same run time (docs/cpu_spmd.md)."""
        return str(self.optimized_module(llvm_ir, vectorised))

    def optimized_module(self, llvm_ir: str, vectorised: bool = False, speed_level: int = 3,
                         slp: bool = True) -> llvm.ModuleRef:
        """`optimize`'s module itself (`compile_object` emits it without re-parsing its text)."""
        return optimized_module(llvm_ir, self.tm, self.triple, vectorised, speed_level, slp)

    def emit_object(self, optimized_ir: str) -> bytes:
        mod = llvm.parse_assembly(optimized_ir)
        mod.triple = self.triple
        mod.data_layout = str(self.tm.target_data)
        return bytes(self.jit_tm.emit_object(mod))

    def link(self, obj: bytes, symbols, perf: str = "") -> llvm.ResourceTracker:
        builder = self.builder(b"spirad_vm_lanes" in obj).add_object_img(obj)
        for s in symbols:
            builder.export_symbol(s)
        tracker = builder.link(self.lljit, f"spirad_cpu_{next(self._names)}")
        if perf:  # `CpuRuntime(perf_map=...)`
            perf_map.append(obj, {s: tracker[s] for s in symbols}, objects=perf == "objects")
        return tracker

    def builder(self, lane_helpers: bool = True) -> llvm.JITLibraryBuilder:
        """A JIT library builder resolving the process's symbols (libm) and, with
        `lane_helpers` (the code calls them), the vecmath lane helpers
        (`vecmath.lanes_support`, compiled on first use and kept for the process)."""
        builder = llvm.JITLibraryBuilder().add_current_process()
        for name, addr in (self._support().items() if lane_helpers else ()):
            builder.import_symbol(name, addr)
        return builder

    def pool_symbols(self) -> dict:
        """The native pool's functions (`cpu_pool`), compiled on first use, kept for the
        process."""
        with self.compile_lock:
            if self._pool_addrs is None:
                mod = self.optimized_module(cpu_pool.module_ir())
                obj = bytes(self.jit_tm.emit_object(mod))
                b = llvm.JITLibraryBuilder().add_object_img(obj).add_current_process()
                for s in cpu_pool.SYMBOLS:
                    b.export_symbol(s)
                self._pool_tracker = b.link(self.lljit, "spirad_cpu_pool")
                self._pool_addrs = {s: self._pool_tracker[s] for s in cpu_pool.SYMBOLS}
            return self._pool_addrs

    def _support(self) -> dict:
        if self._support_addrs is None:
            from .vecmath import lanes_support
            syms = lanes_support.symbols()
            # cold code: straight to machine code at -O0 (~1 ms instead of ~7 at -O3)
            mod = llvm.parse_assembly(lanes_support.module_ir())
            mod.triple = self.triple
            mod.data_layout = str(self.tm.target_data)
            tm0 = llvm.Target.from_default_triple().create_target_machine(
                cpu=self.cpu, features=self.features, opt=0, jit=True)
            obj = bytes(tm0.emit_object(mod))
            b = llvm.JITLibraryBuilder().add_object_img(obj).add_current_process()
            for s in syms:
                b.export_symbol(s)
            self._support_tracker = b.link(self.lljit, "spirad_vm_lanes")
            self._support_addrs = {s: self._support_tracker[s] for s in syms}
        return self._support_addrs


def optimized_module(llvm_ir: str, tm, triple: str, vectorised: bool = False,
                     speed_level: int = 3, slp: bool = True) -> llvm.ModuleRef:
    """The CPU pipeline (`_Target.optimize`) for target machine `tm` of `triple`: LLVM's
    `speed_level` (3, or 2 for a large module: `machine_code.speed_level`), 2 where
    `vectorised`; the SLP vectoriser where `slp` (not for a huge module: `machine_code.slp`)
    and not `vectorised`."""
    mod = _parse(llvm_ir, tm, triple)
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=2 if vectorised else speed_level)
    pto.loop_vectorization = not vectorised and not _has_half(llvm_ir)
    pto.slp_vectorization = slp and not vectorised
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    cold = machine_code.checked_copies(mod)  # skipped by the pipeline: light passes after it
    pb.getModulePassManager().run(mod, pb)
    if cold:
        mod = _parse(machine_code.release_checked_copies(str(mod)), tm, triple)
        # a pass builder of its own: `pb`'s analyses were cached for the module parsed first
        machine_code.light_passes(mod, cold, llvm.create_pass_builder(tm, pto))
    return mod


_HALF = re.compile(r"\bhalf\b")  # the type; a value named %half only costs the vectoriser


def _has_half(llvm_ir: str) -> bool:
    """Whether the module computes in f16 (LLVM's `half`). LLVM 22's loop vectoriser aborts the
    process on some f16 loops (llvmlite's LLVM asserts: "VPlan cost model and legacy cost model
    disagreed", a serial `f[1] = max(1.12 * i, f[1])` over an f16 field on an AVX-512 host,
    Taichi's test_f16.py::test_atomic_max_f16), so such modules are not loop-vectorised (their
    range tasks still take SPMD lanes)."""
    return _HALF.search(llvm_ir) is not None


def _parse(llvm_ir: str, tm, triple: str) -> llvm.ModuleRef:
    mod = llvm.parse_assembly(llvm_ir)
    mod.triple = triple
    mod.data_layout = str(tm.target_data)
    return mod


def compile_for(llvm_ir: str, triple: str, cpu: str = "", features: str = "",
                vectorised: bool = False) -> tuple[bytes, str, str]:
    """(object code, assembly, optimized IR) of `llvm_ir` through the CPU pipeline for another
    machine (`triple`: 'aarch64-unknown-linux-gnu', ...): what the CPU backend would produce
    there, emitted and never run (tests/llvm_codegen/test_cross_targets.py)."""
    from .cpu_target import cross_machine
    tm = cross_machine(triple, cpu, features, opt=3)
    mod = optimized_module(llvm_ir, tm, triple, vectorised)
    return bytes(tm.emit_object(mod)), tm.emit_assembly(mod), str(mod)


class CpuModule:
    """A JIT-compiled module; keeps its code alive as long as it (or a function of it) lives."""

    def __init__(self, tracker, symbols, optimized_ir: str):
        self._tracker = tracker
        self.optimized_ir = optimized_ir
        self._fns = {}
        for s in symbols:
            fn = TASK_FN(tracker[s])
            fn._spirad_module = self  # a function keeps its module's code alive
            self._fns[s] = fn

    def function(self, symbol: str):
        try:
            return self._fns[symbol]
        except KeyError:
            raise KeyError(f"CpuModule: no exported symbol {symbol!r}") from None

    def direct(self, symbol: str):
        """`function(symbol)` as a `DIRECT_FN`: called with ctypes instances only, `(c_void_p
        of the buffer table's address, c_void_p of the argument bytes, c_int64 begin, c_int64
        end, c_int32 worker)`, on the calling thread (no split, no lock: the caller holds
        `CpuRuntime.calls_lock()`)."""
        fn = DIRECT_FN(ctypes.cast(self.function(symbol), ctypes.c_void_p).value)
        fn._spirad_module = self
        return fn


class CpuRuntime:
    def __init__(self, num_workers: int | None = None, parallel_min: int = PARALLEL_MIN,
                 cancel=None, target: str | None = None, native: bool = True,
                 perf_map: str = ""):
        self._target = _Target.get(target)  # `target`: SPIRAD_CPU_TARGET (None: the host)
        self.cancel = cancel  # an object with is_set() (threading.Event): stop between pieces
        self.num_workers = max(1, num_workers or os.cpu_count() or 1)
        self.parallel_min = parallel_min
        self._pool = (ThreadPoolExecutor(self.num_workers - 1, thread_name_prefix="spirad-cpu")
                      if self.num_workers > 1 else None)
        self._launch_lock = threading.Lock()
        # split launches through the native pool, chunks taken dynamically (`cpu_pool`); False
        # (`native=False`: SPIRAD_CPU_POOL=static): fixed chunks through `ThreadPoolExecutor`
        self.dynamic = native and self.num_workers > 1 and cpu_pool.supported()
        self._native_pool = None
        # "1": name linked task functions for Linux perf; "objects": keep their object files
        # too (`perf_map`)
        self.perf_map = "" if perf_map in ("", "0") else perf_map

    @property
    def target_key(self) -> tuple:
        """What object code depends on besides the IR: triple, CPU name and features, LLVM."""
        t = self._target
        return (t.triple, t.cpu, t.features, llvm.llvm_version_info)

    def compile_object(self, llvm_ir: str, vectorised: bool = False, speed_level: int = 3,
                       slp: bool = True) -> tuple[bytes, str]:
        """Host object code of `llvm_ir` after `optimize` (at LLVM's `speed_level`, the SLP
        vectoriser where `slp`), and the optimized IR text."""
        t = self._target
        with t.compile_lock:
            mod = t.optimized_module(llvm_ir, vectorised, speed_level, slp)
            return bytes(t.jit_tm.emit_object(mod)), str(mod)

    def load_object(self, obj: bytes, symbols, optimized_ir: str = "") -> CpuModule:
        """Link object code from `compile_object` (maybe of another process) into the JIT."""
        symbols = tuple(symbols)
        t = self._target
        with t.compile_lock:
            tracker = t.link(obj, symbols, self.perf_map)
        return CpuModule(tracker, symbols, optimized_ir)

    def load(self, llvm_ir: str, symbols, vectorised: bool = False) -> CpuModule:
        obj, optimized = self.compile_object(llvm_ir, vectorised)
        return self.load_object(obj, symbols, optimized)

    def run(self, fn, bufs, args, begin: int, end: int, parallel: bool = True,
            min_split: int | None = None) -> int:
        """Run [begin, end) of `fn`; the iterations the calling thread ran (all of them where
        the launch was not split; a split launch's caller takes chunks as the workers do:
        `cpu_pool`)."""
        if type(args) is not int:
            args = _address(args)
        n = end - begin
        with self._launch_lock:
            if not parallel or n < (self.parallel_min if min_split is None else min_split) \
                    or self._pool is None:
                fn(bufs, args, begin, end, 0)
                return n
            if self.dynamic:
                return self._native().run(fn, bufs, args, begin, end, self.cancel)
            self._split(fn, (bufs,) * self.num_workers, args, begin, end)
            return -(-n // self.num_workers)

    def _native(self):
        """The split launches' native pool (`cpu_pool`), started on the first split."""
        if self._native_pool is None:
            self._native_pool = cpu_pool.Pool(self.num_workers, self._target.pool_symbols())
        return self._native_pool

    def calls_lock(self):
        """The lock `run` holds while task functions run: held by a caller that calls them
        itself (a replayed launch graph, `CpuBackend.replay`)."""
        return self._launch_lock

    def run_slots(self, fn, slot_bufs, args, begin: int, end: int):
        """Split [begin, end) over the workers as `run` does, whatever its size; chunk `w` runs
        with its own buffer table `slot_bufs[w]` (one per worker: the caller points some
        bindings of each at that worker's private copies)."""
        if type(args) is not int:
            args = _address(args)
        with self._launch_lock:
            if self._pool is None:
                fn(slot_bufs[0], args, begin, end, 0)
                return
            self._split(fn, slot_bufs, args, begin, end)

    def run_calls(self, calls):
        """Call each of `calls` (callables without arguments) on the workers, the first in the
        calling thread; return when all have returned (the first error raised)."""
        if self._pool is None or len(calls) < 2:
            for c in calls:
                c()
            return
        futures = [self._pool.submit(c) for c in calls[1:]]
        try:
            calls[0]()
        finally:
            _wait_all(futures)

    def _split(self, fn, slot_bufs, args, begin, end):
        n = end - begin
        w = self.num_workers
        step = -(-n // w)
        stop = [False]
        futures = [self._pool.submit(self._pieces, fn, slot_bufs[k], args, begin + k * step,
                                     min(begin + (k + 1) * step, end), k, stop)
                   for k in range(1, w) if begin + k * step < end]
        try:
            self._pieces(fn, slot_bufs[0], args, begin, min(begin + step, end), 0, stop)
        except BaseException:
            stop[0] = True  # (a handler raised between pieces) stop the workers too
            raise
        finally:
            _wait_all(futures)

    def _pieces(self, fn, bufs, args, lo: int, hi: int, slot: int, stop) -> None:
        """Run chunk [lo, hi) on worker slot `slot` in pieces that grow while each takes less
        than PIECE_SECONDS, checking between pieces whether the launch was cancelled (an
        interrupt: `cancel`) or another chunk failed (`stop`): nothing is written after a
        stopped launch has returned."""
        cancel = self.cancel
        piece = PIECE_MIN
        clock = time.perf_counter
        while lo < hi:
            if stop[0] or (cancel is not None and cancel.is_set()):
                return
            e = min(hi, lo + piece)
            t = clock()
            fn(bufs, args, lo, e, slot)
            if clock() - t < PIECE_SECONDS:
                piece *= 2
            lo = e

    def cancelled(self) -> bool:
        """The launch now running (or the last one) was asked to stop."""
        return self.cancel is not None and self.cancel.is_set()

    def close(self):
        if self._native_pool is not None:
            self._native_pool.close()
            self._native_pool = None
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def _wait_all(futures) -> None:
    """Wait for every chunk, also through an interrupt of the wait; then raise the first error
    (a chunk's, or the interrupt)."""
    error = None
    for f in futures:
        while True:
            try:
                f.result()
                break
            except KeyboardInterrupt as e:  # the wait was interrupted: the chunk still runs
                error = error or e
            except BaseException as e:  # noqa: BLE001 - the chunk itself failed
                error = error or e
                break
    if error is not None:
        raise error


def _address(buf) -> int | None:
    if buf is None:
        return None
    if hasattr(buf, "__array_interface__"):
        return buf.__array_interface__["data"][0]
    return ctypes.addressof(buf)
