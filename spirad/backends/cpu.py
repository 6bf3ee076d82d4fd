"""CPU backend: LLVM code from `llvm_codegen`, run by its JIT runtime over a thread pool.

Fields and ndarrays are numpy-owned byte arrays passed to task functions by pointer; kernel
temporaries are small arrays owned by the compiled program. Tasks with adstacks get the four
extra buffers of the Adstack ABI (`kernel_ir.abi`): metadata, float heap, int heap, status; a heap
row per worker thread, grown by amortised doubling and reused across launches.

With `sd.init(debug=True)` every program is compiled with bounds checks (`compile_tasks(...,
bounds_check=True)`): every task then reads the program's status buffer at bufs[n+3] (bufs[n..n+2]
stay null for tasks without adstacks). The status is read after each launch, like the adstack
overflow status; the first error is kept and raised at the next `sync()` (every host read syncs)
as a `SpiradValueError` (`bounds_support`). The status is cleared, so later launches run normally.

A parallel loop whose range reads fields / ndarrays / temporaries (`range_bounds`) has its bounds
evaluated on the host right before its task runs: the memory is host memory and the earlier tasks
have finished.
"""
from __future__ import annotations

import ctypes

import numpy as np

from .adstack_support import grown, overflow_error, task_stacks
from .base import BackendBase
from .bounds_support import STATUS_INDEX_OUT_OF_RANGE, BoundsInfo, index_error
from .range_bounds import HostBounds, device_bounds


class CpuProgram:
    def __init__(self, name, fns, kinds, temps, nbind, stacks, task_names, bounds=None):
        self.name, self.fns, self.kinds, self.temps = name, fns, kinds, temps
        self.stacks, self.task_names = stacks, task_names
        self.nbind = nbind
        self.bounds = bounds  # BoundsInfo when compiled with bounds checks, else None
        extra = any(stacks) or bounds is not None
        self.bufs = (ctypes.c_void_p * max(nbind + (4 if extra else 0), 1))()
        self.status = np.zeros(8, np.uint32)  # llvm_codegen.program.STATUS_WORDS
        self.status_addr = self.status.__array_interface__["data"][0]
        self.status_word = ctypes.c_uint32.from_address(self.status_addr)  # word 0, cheap to read
        self.bound_meta = self.bound_heaps = None  # what bufs[nbind:nbind + 3] now point to
        if extra:
            self.bufs[nbind + 3] = self.status_addr
        self.last_storages = None
        self.module = None  # the JIT module: keeps the task functions alive
        self.blob = None    # (object code, symbols, kinds, IR): what the offline cache stores
        self.host_bounds = ()  # per task: HostBounds of a range read from globals, else None


class CpuBackend(BackendBase):
    name = "cpu"

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
        n = state.options.get("cpu_max_num_threads")
        from ..guard import CANCEL
        self.rt = CpuRuntime(num_workers=n, cancel=CANCEL)  # an interrupt stops a launch (guard)
        self.heap_float = np.zeros(8, np.uint8)
        self.heap_int = np.zeros(8, np.uint8)
        self.heap_addrs = (self.heap_float.__array_interface__["data"][0],
                           self.heap_int.__array_interface__["data"][0])
        self.heap_sizes = (8, 8)
        self.pending = None  # deferred adstack overflow / bounds error, raised at sync()
        self.bounds_check = bool(state.debug)

    def allocate(self, nbytes):
        return np.zeros(max(int(nbytes), 8), dtype=np.uint8)

    def host_storage(self, raw):
        return raw if isinstance(raw, np.ndarray) and raw.dtype == np.uint8 else None

    def view(self, storage, np_dtype, shape):
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(np_dtype).itemsize
        return storage[:n].view(np_dtype).reshape(shape)

    def compile(self, tl, abi):
        from llvm_codegen.codegen import compile_tasks
        prog = compile_tasks(tl, abi, bounds_check=self.bounds_check)
        obj, optimized = self.rt.compile_object(prog.llvm_ir, prog.vectorised)
        blob = (obj, tuple(t.symbol for t in prog.tasks), tuple(t.kind for t in prog.tasks),
                optimized)
        return self._build(tl, abi, blob)

    def export_program(self, program):
        return program.blob

    def import_program(self, tl, abi, blob):
        return self._build(tl, abi, blob)

    def cache_features(self) -> tuple:
        from llvm_codegen.codegen import switches_key
        return ("cpu", self.rt.target_key, self.bounds_check, switches_key())

    def _build(self, tl, abi, blob):
        """The program of `blob` = (object code, task symbols, task kinds, optimized IR text)."""
        obj, symbols, kinds, optimized = blob
        mod = self.rt.load_object(obj, symbols, optimized)
        fns = [mod.function(s) for s in symbols]
        temps = {k: np.zeros(8, np.uint8) for k, r in enumerate(abi.bindings) if r.kind == "temp"}
        stacks = [task_stacks(t) or None for t in tl.tasks]
        from llvm_codegen.codegen import task_lanes
        # an SPMD task's worker owns `lanes` heap rows (llvm_codegen.spmd_adstack)
        lanes = [task_lanes(t, self.bounds_check) if s else 1 for t, s in zip(tl.tasks, stacks)]
        p = CpuProgram(tl.name, fns, list(kinds), temps, len(abi.bindings), stacks,
                       [t.name for t in tl.tasks],
                       BoundsInfo(tl, abi) if self.bounds_check else None)
        p.module = mod
        p.blob = blob
        p.lanes = lanes
        p.host_bounds = tuple(HostBounds(tl, t, abi) if device_bounds(t) else None for t in tl.tasks)
        return p

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

    def plan_adstack(self, program, ti, sized):
        """(metadata address, float heap bytes, int heap bytes, metadata words kept alive)."""
        meta = np.array(sized.layout.metadata() or [0, 0], dtype=np.uint32)
        nf, ni = sized.layout.heap_bytes(self.rt.num_workers * program.lanes[ti])
        return meta.__array_interface__["data"][0], nf, ni, meta

    def launch(self, program, storages, argbuf, ranges, adstack=None):
        bufs = program.bufs
        last = program.last_storages
        if last is None or len(last) != len(storages) or any(a is not b for a, b in zip(storages, last)):
            for k, st in enumerate(storages):
                bufs[k] = (st if st is not None else program.temps[k]).__array_interface__["data"][0]
            program.last_storages = list(storages)
        args = ctypes.c_char_p(argbuf)
        addr = ctypes.cast(args, ctypes.c_void_p).value
        run = self.rt.run
        n = program.nbind
        checked = program.bounds is not None
        plan = None if adstack is None else adstack.tasks
        for ti, (fn, kind, rng) in enumerate(zip(program.fns, program.kinds, ranges)):
            if self.rt.cancelled():  # interrupted (spirad.guard): the later tasks do not run
                return
            b, e = rng if rng is not None else program.host_bounds[ti].evaluate(
                argbuf, lambda k, ref, shape: self.view(
                    storages[k] if storages[k] is not None else program.temps[k], ref.dtype.np, shape))
            if e <= b:
                continue
            stacks = program.stacks[ti]
            if stacks:
                meta_addr, nf, ni, _ = plan[ti]
                if nf > self.heap_sizes[0] or ni > self.heap_sizes[1]:
                    self._heaps(nf, ni)
                heaps = self.heap_addrs  # a new tuple whenever a heap grew
                if program.bound_meta != meta_addr or program.bound_heaps is not heaps:
                    bufs[n] = meta_addr
                    bufs[n + 1] = heaps[0]
                    bufs[n + 2] = heaps[1]
                    bufs[n + 3] = program.status_addr
                    program.bound_meta, program.bound_heaps = meta_addr, heaps
            run(fn, bufs, addr, b, e, kind == "range")
            if (stacks or checked) and program.status_word.value:
                words = [int(x) for x in program.status]
                code, task, stack = words[:3]
                program.status[:] = 0
                if code == STATUS_INDEX_OUT_OF_RANGE:
                    if self.pending is None:
                        self.pending = index_error(program.name, program.task_names,
                                                   program.bounds, words, (argbuf,))
                elif self.pending is None:
                    self.pending = overflow_error(program.name, program.task_names[task],
                                                  program.stacks[task][stack], stack,
                                                  adstack.capacity(task, stack),
                                                  adstack.required(task, stack))

    def sync(self):
        if self.pending is not None:
            err, self.pending = self.pending, None
            raise err

    def close(self):
        self.rt.close()


Backend = CpuBackend
