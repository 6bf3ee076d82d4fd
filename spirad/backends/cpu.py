"""CPU backend: LLVM code from `llvm_codegen`, run by its JIT runtime over a thread pool.

Fields and ndarrays are numpy-owned byte arrays passed to task functions by pointer; kernel
temporaries are small arrays owned by the compiled program. Tasks with adstacks get the four
extra buffers of the Adstack ABI (`kernel_ir.abi`): metadata, float heap, int heap, status; a heap
row per worker thread, grown by amortised doubling and reused across launches.

With `sd.init(debug=True)` every program is compiled with bounds checks (`compile_tasks(...,
bounds_check=True)`): every task then reads the program's status words (bufs[n + LLVM_STATUS];
the other extra buffers stay null for tasks without adstacks). The status is read after each
launch, like the adstack overflow status: an adstack overflow is raised by the launch that
overflowed, once its tasks ran (as Quadrants reports it on the CPU; the GPU backends report it at
the next sync); any other error (`program.status_error`) is kept, the first one, and raised at
the next `sync()` (every host read syncs). The status is cleared, so later launches run normally.

A parallel loop whose range reads fields / ndarrays / temporaries (`range_bounds`) has its bounds
evaluated on the host right before its task runs: the memory is host memory and the earlier tasks
have finished.
"""
from __future__ import annotations

import ctypes
from typing import NamedTuple

import numpy as np

from kernel_ir.abi import (LLVM_EXTRA_BUFFERS, LLVM_HEAP_FLOAT, LLVM_HEAP_INT, LLVM_META,
                           LLVM_STATUS, STATUS_WORDS, StatusWord)
from kernel_ir.errors import SpiradAdStackOverflow
from kernel_ir.nodes import walk
from kernel_ir.ops import ATOMICS, Op

from .adstack_support import grown, task_stacks
from .base import BackendBase, default_checks
from .private_scatter import PrivateCopies, TaskScatter, copy_slot, scatter_slabs, worth
from .program import AdstackTaskPlan, Program, status_error
from .range_bounds import HostBounds
from .work_estimate import NEVER, Adaptive, costs, one_thread_choice, split_threshold

ONLY = "only"  # a task compiled as its one-thread variant alone (`_one_thread_variants`)


class CpuBlob(NamedTuple):
    """What the CPU backend compiles a kernel to (`Program.blob`); the offline cache stores it
    as a plain tuple (`export_program` / `import_program`), so its payload needs no class of
    this module."""
    obj: bytes          # the object code
    symbols: tuple      # the task functions; those past len(tl.tasks) are one-thread variants
    kinds: tuple        # per symbol its task kind
    optimized: str      # the optimized LLVM IR text (what the JIT loads beside the object)
    task_lanes: tuple   # per symbol the SPMD lanes code generation chose
    one_thread: tuple   # (marks, limits, works, copies): `_one_thread_variants`


class CpuProgram(Program):
    def __init__(self, tl, abi, bounds_check, blob, module, workers, oob_check=False):
        super().__init__(tl, abi, bounds_check, blob)
        self.oob = bool(oob_check) and not bounds_check  # the default checks write the status
        self.module = module  # the JIT module: keeps the task functions alive
        fns = [module.function(s) for s in blob.symbols]
        directs = [module.direct(s) for s in blob.symbols]  # called with prebuilt ctypes instances
        n = len(tl.tasks)
        marks, limits, works, copies = blob.one_thread
        self.fns = fns[:n]
        # per task: its one-thread variant (plain read-modify-writes), run when a launch is not
        # split, or None (CpuBackend._one_thread_variants)
        self.fns_1t = [fns[n + m] if type(m) is int else None for m in marks]
        direct_1t = [directs[n + m] if type(m) is int else None for m in marks]
        atomics = [any(x.op in ATOMICS for x in walk(t.body)) for t in tl.tasks]
        # per task: the iterations from which a launch is split (range tasks with atomics)
        self.min_split = tuple(NEVER if m == ONLY else lim if a else None
                               for m, lim, a in zip(marks, limits, atomics))
        # range tasks without atomics: split by measured time (the same results either way)
        self.adaptive = tuple(Adaptive(workers) if t.kind == "range" and not a and workers > 1
                              else None for t, a in zip(tl.tasks, atomics))
        self.temps = {k: np.zeros(8, np.uint8) for k, r in enumerate(abi.bindings)
                      if r.kind == "temp"}
        # per task: its privatised scatter (backends/private_scatter), or None; the bindings
        # whose copy slots follow the extra buffers
        self.copies = copies
        self.copy_base = copy_slot(abi, 0)
        self.scatter = tuple(None if w is None else
                             TaskScatter(tl, abi, scatter_slabs(t), copies, *w)
                             for t, w in zip(tl.tasks, works))
        # per task: heap rows per worker — an SPMD task's worker owns `lanes` rows
        # (llvm_codegen.spmd_adstack); the lanes code generation chose are in the blob
        # (of its own code and its one-thread variant: a launch runs either)
        self.lanes = [max(w, blob.task_lanes[n + m] if type(m) is int else 1) if s else 1
                      for w, s, m in zip(blob.task_lanes[:n], self.stacks, marks)]
        nbind = self.nbind
        extra = any(self.stacks) or self.bounds is not None or self.oob
        size = copy_slot(abi, len(copies)) if copies else \
            nbind + (len(LLVM_EXTRA_BUFFERS) if extra else 0)
        self.bufs = (ctypes.c_void_p * max(size, 1))()
        self.bufs_ref = ctypes.c_void_p(ctypes.addressof(self.bufs))  # for the direct calls
        self.status = np.zeros(STATUS_WORDS, np.uint32)
        self.status_addr = self.status.__array_interface__["data"][0]
        self.status_word = ctypes.c_uint32.from_address(
            self.status_addr + 4 * StatusWord.CODE)  # cheap to read after every task
        self.bound_meta = self.bound_heaps = None  # what the adstack buffers now point to
        if extra:
            self.bufs[nbind + LLVM_STATUS] = self.status_addr
        self.last_storages = None
        # the last launch's argument bytes, their address and its c_void_p (`launch`)
        self.last_argbuf = self.last_addr = self.last_ref = None
        # per task: HostBounds of a range read from globals, else None
        self.host_bounds = tuple(HostBounds(tl, t, abi) if r else None
                                 for t, r in zip(tl.tasks, abi.device_ranges))
        # per task, what a launch reads of it, in one tuple (one unpacking per task and launch)
        self.launch_tasks = tuple(zip(self.fns, self.kinds, self.stacks, self.fns_1t,
                                      self.adaptive, self.scatter, self.min_split))
        # per task, the direct functions of its own code and of its one-thread variant (for
        # the calls that run on the calling thread anyway: serial tasks, unsplit variants)
        self.direct = tuple(zip(directs[:n], direct_1t))
        # a program of one serial task without adstacks, privatised scatter or one-thread
        # variant (every Genesis kernel on the CPU, where it serialises its loops): its direct
        # function, which `launch` calls with nothing else of the task loop; else None
        self.lone_serial = directs[0] if n == 1 and self.kinds[0] == "serial" and \
            not self.stacks[0] and self.scatter[0] is None and self.fns_1t[0] is None and \
            self.host_bounds[0] is None else None
        self.lone_ranges = self.lone_bounds = None  # its last ranges, and their c_int64s


def target_summary() -> str:
    """What the CPU backend compiles for, with the switches in force: the CPU and its ISA, the
    SPMD lanes of a task (`python -m spirad`, the benchmarks' first line). E.g. `znver3 (host),
    AVX2: 256-bit vectors, 8 f32 / 4 f64 lanes a register; SPMD lanes: 16 (8 with a 64-bit
    value)`."""
    from llvm_codegen import cpu_target, math_policy

    from .. import options
    spec = options.cpu_target()
    o = options.llvm_codegen_options()
    line = cpu_target.describe(spec)
    if not o.spmd:
        return line + "; SPMD lanes: off (SPIRAD_CPU_SPMD=0)"
    if o.lanes:
        return line + f"; SPMD lanes: {o.lanes} (SPIRAD_CPU_SPMD_LANES)"
    w = math_policy.lanes("f32", o.vector_bits)
    return line + f"; SPMD lanes: {2 * w} ({w} with a 64-bit value)"


def task_costs(task, lanes: int, analysis) -> tuple:
    """(own, alone): `work_estimate.costs` of range task `task` in its own code on `lanes`
    lanes (`analysis`: its `spmd.Analysis`, None when scalar) and in its one-thread variant.
    Reductions into one element (atomic adds at lane-uniform indices whose result is unused)
    cost one atomic per lane group. What `_one_thread_variants` decides from (and the tests
    compare the CPU backend's choices to, on every target)."""
    cheap = frozenset() if lanes == 1 else frozenset(
        n for n in walk(task.body) if n.op == Op.ATOMIC_ADD and n not in analysis.used and
        not any(s in analysis.varying for s in n.srcs[:-1]))
    return costs(task, lanes, cheap)


class CpuBackend(BackendBase):
    name = "cpu"
    max_elements = 2**62  # 64-bit element offsets and task ranges

    @classmethod
    def is_available(cls) -> bool:
        try:
            import llvmlite  # noqa: F401
            return True
        except ImportError:
            return False

    @classmethod
    def unavailable_reason(cls) -> str:
        return "llvmlite is not installed (pip install llvmlite)"

    def __init__(self, state):
        super().__init__(state)
        from llvm_codegen.cpu_runtime import CpuRuntime
        n = state.options.cpu_max_num_threads
        from .. import options
        from ..runtime.guard import CANCEL
        options.llvm_codegen_options()  # a SPIRAD_CPU_TARGET this CPU cannot run: an error now
        # code for the host, or for SPIRAD_CPU_TARGET; an interrupt stops a launch (guard)
        self.rt = CpuRuntime(num_workers=n, cancel=CANCEL, target=options.cpu_target(),
                             native=options.get("SPIRAD_CPU_POOL") != "static",
                             perf_map=options.get("SPIRAD_PERF_MAP") or "")
        self.heap_float = np.zeros(8, np.uint8)
        self.heap_int = np.zeros(8, np.uint8)
        self.heap_addrs = (self.heap_float.__array_interface__["data"][0],
                           self.heap_int.__array_interface__["data"][0])
        self.heap_sizes = (8, 8)
        self.pending = None  # deferred adstack overflow / bounds error, raised at sync()
        self.bounds_check = bool(state.debug)
        self.oob_check = default_checks(state)
        self.private = PrivateCopies(self.rt)  # the workers' copies of scattered slabs

    def allocate(self, nbytes):
        return np.zeros(max(int(nbytes), 8), dtype=np.uint8)

    def host_storage(self, raw):
        return raw if isinstance(raw, np.ndarray) and raw.dtype == np.uint8 else None

    def view(self, storage, np_dtype, shape):
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(np_dtype).itemsize
        return storage[:n].view(np_dtype).reshape(shape)

    def compile(self, tl, abi):
        from llvm_codegen.codegen import compile_tasks
        from llvm_codegen.machine_code import budget_for, slp, speed_level

        from .. import options
        from .private_scatter import CopyABI
        code, one_thread, choices = self._one_thread_variants(tl, abi)
        copies = one_thread[3]
        opts = options.llvm_codegen_options()
        prog = compile_tasks(code, CopyABI(abi, copies) if copies else abi,
                             bounds_check=self.bounds_check, options=opts, choices=choices,
                             oob_check=self.oob_check)
        with budget_for(prog.llvm_ir, opts.huge_ir):
            obj, optimized = self.rt.compile_object(
                prog.llvm_ir, prog.vectorised,
                speed_level(prog.llvm_ir, opts.large_ir, opts.huge_ir),
                slp(prog.llvm_ir, opts.huge_ir))
        blob = CpuBlob(obj, tuple(t.symbol for t in prog.tasks), tuple(t.kind for t in prog.tasks),
                       optimized, tuple(t.lanes for t in prog.tasks), one_thread)
        return self._build(tl, abi, blob)

    def _one_thread_variants(self, tl, abi):
        """(the task list to compile, (marks, limits, works, copies), {task index: SPMD
        choice}): per task of `tl` a mark — None, ONLY (its
        code is its one-thread variant, never split) or k (the variant is extra task
        len(tl.tasks) + k, run when a launch is not split) — and the iterations from which a
        launch is split (None: serial, or compiled as ONLY); the SPMD choices made here for
        tasks compiled unchanged go to `compile_tasks` (each task is analysed once). Variants for range tasks with
        atomics, without bounds checks (`passes/demote_atomics.one_thread_variant`,
        `work_estimate.one_thread_choice`), and with adstacks only where privatised (their
        heap rows are per worker either way: `lanes` takes the larger of both codes). A variant of a task whose shared atomics are all
        adds into slabs is its privatised variant (`private_scatter`; with more than one
        worker): `works` per task (own, alone) for those, else None, and `copies` the
        bindings with copy slots."""
        from dataclasses import replace

        from kernel_ir.nodes import TaskList
        from llvm_codegen.codegen import spmd_choice

        from .. import options
        from passes.demote_atomics import one_thread_variant
        from .private_scatter import privatised_variant
        tasks, extra, marks, work, choices = list(tl.tasks), [], [], [], {}
        works, copies = [], set()
        workers = self.rt.num_workers
        for k, t in enumerate(tl.tasks):
            works.append(None)
            if t.kind != "range":
                marks.append(None)
                work.append(None)
                continue
            if self.bounds_check:
                lanes, a = 1, None
            else:
                lanes, a = choices[k] = spmd_choice(t, False, options.llvm_codegen_options())
            own, alone = task_costs(t, lanes, a)
            v = None if self.bounds_check else one_thread_variant(t)
            slabs = scatter_slabs(t) if v is not None and workers > 1 else None
            if task_stacks(t) and not slabs:  # adstacks: only for privatised scatters
                v = None
            choice = None if v is None else one_thread_choice(own, alone, workers)
            if choice is None:
                slabs = None
            if slabs:
                v = privatised_variant(t, slabs)
                works[-1] = (own, alone)
                copies.update(k for k, r in enumerate(abi.bindings) if r.buffer in slabs)
            if choice is None:
                marks.append(None)
                work.append((own, None))
            elif choice == ONLY:
                tasks[k] = v
                choices.pop(k, None)  # another task now
                marks.append(ONLY)
                work.append(None)
            else:
                marks.append(len(extra))
                extra.append(replace(v, name=v.name + "_1t"))
                work.append((own, alone))
        # per task: (variant marks, split thresholds from the estimates: work_estimate)
        limits = tuple(None if w is None else split_threshold(w[0], workers, w[1]) for w in work)
        info = (tuple(marks), limits, tuple(works), tuple(sorted(copies)))
        if all(m is None for m in marks):
            return tl, info, choices
        return TaskList(tl.name, tl.args, tuple(tasks + extra), tl.temps), info, choices

    def export_program(self, program):
        return tuple(program.blob)

    def import_program(self, tl, abi, blob):
        return self._build(tl, abi, CpuBlob(*blob))

    def cache_features(self) -> tuple:
        from .. import options
        return ("cpu", self.rt.target_key, self.bounds_check, ("oob", self.oob_check),
                options.llvm_codegen_options().key(), "one-thread variants",
                "privatised scatters", self.rt.num_workers)

    def _build(self, tl, abi, blob: CpuBlob):
        """The program of `blob` (its object code loaded by the JIT)."""
        return CpuProgram(tl, abi, self.bounds_check, blob,
                          self.rt.load_object(blob.obj, blob.symbols, blob.optimized),
                          self.rt.num_workers, self.oob_check)

    def heap_bytes(self) -> tuple:
        return self.heap_float.nbytes, self.heap_int.nbytes

    def _heaps(self, nf, ni):
        if nf > self.heap_float.nbytes or ni > self.heap_int.nbytes:
            if nf > self.heap_float.nbytes:
                self.heap_float = np.zeros(grown(self.heap_float.nbytes, nf), np.uint8)
            if ni > self.heap_int.nbytes:
                self.heap_int = np.zeros(grown(self.heap_int.nbytes, ni), np.uint8)
            self.heap_addrs = (self.heap_float.__array_interface__["data"][0],
                               self.heap_int.__array_interface__["data"][0])
            self.heap_sizes = (self.heap_float.nbytes, self.heap_int.nbytes)

    def adstack_rows(self, program, task, n) -> int:
        return self.rt.num_workers * program.lanes[task]

    def plan_adstack(self, program, ti, sized):
        """The metadata words' address (the array kept alive), the float / int heap bytes."""
        meta = np.array(sized.layout.metadata() or [0, 0], dtype=np.uint32)
        return AdstackTaskPlan(sized.layout, meta.__array_interface__["data"][0], meta,
                               sized.layout.heap_bytes(self.rt.num_workers * program.lanes[ti]))

    def launch(self, program, storages, argbuf, ranges, adstack=None):
        bufs = program.bufs
        last = program.last_storages
        if last is not storages and (last is None or len(last) != len(storages) or
                                     any(a is not b for a, b in zip(storages, last))):
            _fill_buffers(bufs, program, storages)
        program.last_storages = storages  # a plan's list, never changed (launch.LaunchPlan)
        if argbuf is program.last_argbuf:  # a repeated launch: its bytes' address again
            addr, aref = program.last_addr, program.last_ref
        else:  # (ctypes' c_char_p + cast: ~1.5 us, a fifth of a small launch's host time)
            addr = ctypes.cast(ctypes.c_char_p(argbuf), ctypes.c_void_p).value
            aref = ctypes.c_void_p(addr)
            # kept: the bytes stay alive, so their address stays valid
            program.last_argbuf, program.last_addr, program.last_ref = argbuf, addr, aref
        bref = program.bufs_ref
        checked = program.bounds is not None or program.oob
        lone = program.lone_serial
        if lone is not None:  # one serial task: one call (the loop below, less its branches)
            if self.rt.cancelled():
                return
            if ranges is not program.lone_ranges:  # a plan's tuple, never changed
                b, e = ranges[0]
                program.lone_ranges, program.lone_bounds = ranges, (
                    (_i64(b), _i64(e)) if e > b else None)
            be = program.lone_bounds
            if be is not None:
                with self.rt.calls_lock():
                    lone(bref, aref, be[0], be[1], _WORKER0)
                if checked and program.status_word.value:
                    self._status(program, argbuf, adstack)  # kept for the next sync
            return
        run = self.rt.run
        n = program.nbind
        plan = None if adstack is None else adstack.tasks
        overflow = None
        for ti, ((fn, kind, stacks, fn1, adaptive, scatter, min_split), (dfn, dfn1), rng) in \
                enumerate(zip(program.launch_tasks, program.direct, ranges)):
            if self.rt.cancelled():  # interrupted (spirad.runtime.guard): the later tasks do not run
                return
            b, e = rng if rng is not None else program.host_bounds[ti].evaluate(
                argbuf, lambda k, ref, shape: self.view(
                    storages[k] if storages[k] is not None else program.temps[k], ref.dtype.np, shape))
            if e <= b:
                continue
            if stacks:
                task_plan = plan[ti]
                meta_addr = task_plan.meta
                nf, ni = task_plan.heap_bytes
                if nf > self.heap_sizes[0] or ni > self.heap_sizes[1]:
                    self._heaps(nf, ni)
                heaps = self.heap_addrs  # a new tuple whenever a heap grew
                if program.bound_meta != meta_addr or program.bound_heaps is not heaps:
                    bufs[n + LLVM_META] = meta_addr
                    bufs[n + LLVM_HEAP_FLOAT] = heaps[0]
                    bufs[n + LLVM_HEAP_INT] = heaps[1]
                    bufs[n + LLVM_STATUS] = program.status_addr
                    program.bound_meta, program.bound_heaps = meta_addr, heaps
            if scatter is not None and self._privatised(program, ti, scatter, fn1 or fn, storages,
                                                        argbuf, addr, b, e):
                pass  # split over every worker, the adds into per-worker copies
            elif adaptive is not None and e - b < adaptive.min_split:  # never split: the
                with self.rt.calls_lock():  # serial code's one call (an n_envs-1 env loop)
                    dfn(bref, aref, _i64(b), _i64(e), _WORKER0)
            elif adaptive is not None:  # no atomics: split by the measured time
                adaptive.run(run, fn, bufs, addr, b, e)
            elif fn1 is not None and e - b < min_split:  # one thread: no atomics
                with self.rt.calls_lock():
                    dfn1(bref, aref, _i64(b), _i64(e), _WORKER0)
            elif kind != "range":  # a serial task: one call on this thread
                with self.rt.calls_lock():
                    dfn(bref, aref, _i64(b), _i64(e), _WORKER0)
            else:
                run(fn, bufs, addr, b, e, True, min_split)
            if (stacks or checked) and program.status_word.value:
                err = self._status(program, argbuf, adstack)
                if isinstance(err, SpiradAdStackOverflow):
                    overflow = overflow or err  # raised by this launch, once its tasks ran
        if overflow is not None:
            raise overflow

    def _status(self, program, argbuf, adstack):
        """The error of the status words a task of `program` set, the words cleared; kept for
        the next sync unless it is an adstack overflow (which the launch raises)."""
        words = program.status.copy()
        program.status[:] = 0
        err = status_error(program, words, (argbuf,), () if adstack is None else (adstack,))
        if not isinstance(err, SpiradAdStackOverflow) and self.pending is None:
            self.pending = err
        return err

    def replay_entry(self, program, storages, argbuf, ranges, ask_adaptive=False):
        """(program, ((direct task function, c_int64 begin, c_int64 end), ...), c_void_p of
        the buffer table, c_void_p of the argument bytes, (buffer table, argument bytes): kept
        alive, checked) when every task of the launch would run on the calling thread
        as one call (`launch`'s own choice for these ranges at capture: no adstack, no
        privatised scatter, no range read from globals, too short to split), else None. Its
        own buffer table: one program launched with other arrays in the same graph keeps its
        own. (A task free of atomics, `adaptive`, gives the same values split or not; one with
        atomics, is split by its length alone, so the choice holds at every replay.)
        `ask_adaptive` (`eager_entry`): such a task is recorded with its `Adaptive`, which the
        run asks at every launch as `launch` does, unless its range is too short ever to be
        split (`Adaptive.min_split`: a loop made parallel, launched over one environment),
        which is recorded as the plain call the serial code would be. Each call: (function, c_int64 begin, c_int64
        end, None or (Adaptive, its task function for `CpuRuntime.run`, begin, end))."""
        if any(program.stacks):
            return None
        calls = []
        rt = self.rt
        for (tfn, kind, stacks, _, adaptive, scatter, min_split), (fn, fn1), rng in zip(
                program.launch_tasks, program.direct, ranges):
            if rng is None:
                return None
            b, e = rng
            if e <= b:
                continue
            if scatter is not None and e - b >= 2 * rt.num_workers:
                return None  # maybe privatised (`_privatised` decides per launch)
            if adaptive is not None and e - b < adaptive.min_split:
                calls.append((fn, b, e, None))  # never split: the serial code's one call
            elif adaptive is not None and ask_adaptive:
                calls.append((fn, b, e, (adaptive, tfn, b, e)))
            elif adaptive is not None and not adaptive.splits(e - b):
                calls.append((fn, b, e, None))
            elif adaptive is not None:
                return None  # long enough to split: through `launch`
            elif fn1 is not None and e - b < min_split:
                calls.append((fn1, b, e, None))
            elif kind != "range" or rt.num_workers == 1 or \
                    e - b < (rt.parallel_min if min_split is None else min_split):
                calls.append((fn, b, e, None))
            else:
                return None
        bufs = (ctypes.c_void_p * len(program.bufs)).from_buffer_copy(program.bufs)
        _fill_buffers(bufs, program, storages)
        addr = ctypes.cast(ctypes.c_char_p(argbuf), ctypes.c_void_p).value
        calls = tuple((fn, ctypes.c_int64(b), ctypes.c_int64(e), ad) for fn, b, e, ad in calls)
        return (program, calls, ctypes.c_void_p(ctypes.addressof(bufs)), ctypes.c_void_p(addr),
                (bufs, argbuf), program.bounds is not None or program.oob)

    def replay(self, entries) -> None:
        """Call each record's task functions in order (ctypes calls, nothing else between them
        but the interrupt check and, for checked programs, the status word)."""
        cancelled = self.rt.cancelled
        with self.rt.calls_lock():
            for program, calls, bufs, addr, (_, argbuf), checked in entries:
                if cancelled():
                    return
                for fn, b, e, _ in calls:  # direct functions, prebuilt ctypes instances
                    fn(bufs, addr, b, e, _WORKER0)
                if checked and program.status_word.value:
                    self._status(program, argbuf, None)

    def eager_entry(self, program, storages, argbuf, ranges):
        """`replay_entry`'s record as a function of no arguments that runs the launch again
        as `launch` would (the interrupt check before and the status word after each task,
        the task calls on this thread), for launches whose run `launch` decides from the
        ranges and, for a task split by its measured time (`Adaptive`, a range task free of
        atomics, such as Genesis' serialised loops made parallel: passes/independent_loops),
        from that `Adaptive`, asked at every run as `launch` asks it. Every Genesis kernel on
        the CPU qualifies (one task: one ctypes call, everything it passes built here, once)."""
        rec = self.replay_entry(program, storages, argbuf, ranges, ask_adaptive=True)
        if rec is None:
            return None
        _, calls, bufs, addr, keep, checked = rec
        cancel = self.rt.cancel
        cancelled = (lambda: False) if cancel is None else cancel.is_set
        lock = self.rt.calls_lock()
        status = program.status_word if checked else None
        on_status = self._status
        w0 = _WORKER0
        if len(calls) == 1 and calls[0][3] is None:  # every Genesis kernel: one plain call
            ((fn, b, e, _),) = calls

            def run() -> None:
                if cancelled():  # interrupted (spirad.runtime.guard)
                    return
                with lock:
                    fn(bufs, addr, b, e, w0)
                if status is not None and status.value:
                    on_status(program, argbuf, None)  # kept for the next sync
        else:
            table, run_split = keep[0], self.rt.run

            def run() -> None:
                for fn, b, e, ad in calls:
                    if cancelled():
                        return
                    if ad is None:
                        with lock:
                            fn(bufs, addr, b, e, w0)
                    else:
                        adaptive, tfn, ib, ie = ad
                        n = ie - ib
                        if adaptive.splits(n):
                            adaptive.run(run_split, tfn, table, addr.value, ib, ie)
                        else:  # on this thread: the direct call, timed as `Adaptive.run` does
                            clk = adaptive.clock_for(n)
                            t0 = clk()
                            with lock:
                                fn(bufs, addr, b, e, w0)
                            adaptive.unsplit(n, clk() - t0, clk)
                    if status is not None and status.value:
                        on_status(program, argbuf, None)  # kept for the next sync
        run.keep = keep  # the buffer table and argument bytes the calls point into
        return run

    def _privatised(self, program, ti, scatter, fn, storages, argbuf, addr, b, e) -> bool:
        """Run task `ti` over [b, e) privatised (`private_scatter`) where its slabs allow it and
        it pays; False where it did not run."""
        n, workers = e - b, self.rt.num_workers
        if n < 2 * workers:
            return False
        slabs = scatter.slabs(argbuf)
        if slabs is None or any(storages[k] is not None and any(
                st is storages[k] for j, st in enumerate(storages) if j != k)
                for k, *_ in slabs):  # one ndarray passed twice: its other uses see the adds
            return False
        nbytes = self.private.fits(slabs)
        split_own = program.fns_1t[ti] is not None and n >= program.min_split[ti]
        if not nbytes or not worth(n, scatter.own, scatter.alone, split_own,
                                   sum(s[3] for s in slabs), workers):
            return False
        self.private.run(fn, program.bufs, addr, b, e, slabs,
                         lambda k: storages[k] if storages[k] is not None else program.temps[k],
                         nbytes)
        return True

    def sync(self):
        if self.pending is not None:
            err, self.pending = self.pending, None
            raise err

    def close(self):
        self.rt.close()


_WORKER0 = ctypes.c_int32(0)  # the worker slot of a call on the calling thread
_I64S: dict = {}  # c_int64 instances of the task bounds direct calls pass (never changed)


def _i64(v: int):
    """A c_int64 of `v`, built once (a few thousand kept: serial tasks run over (0, 1))."""
    c = _I64S.get(v)
    if c is None:
        c = ctypes.c_int64(v)
        if len(_I64S) < 4096:
            _I64S[v] = c
    return c


def _fill_buffers(bufs, program, storages) -> None:
    """Point the binding slots of buffer table `bufs` at `storages` (kernel temporaries where
    None), and the unsplit copy slots of privatised scatters at their real buffers."""
    for k, st in enumerate(storages):
        bufs[k] = (st if st is not None else program.temps[k]).__array_interface__["data"][0]
    for j, k in enumerate(program.copies):  # unsplit: the adds go to the real buffer
        bufs[program.copy_base + j] = bufs[k]


Backend = CpuBackend
