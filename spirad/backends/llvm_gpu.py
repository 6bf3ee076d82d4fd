"""What the CUDA and AMDGPU backends share: the LLVM side module's GPU lowering, launched through
a device runtime (`llvm_codegen.device_runtime`), or through its CPU emulation.

Compile: every program is emitted for each of the arch's device targets
(`llvm_codegen.target.ARCH_TARGETS`: sm_80 + sm_90, gfx90a + gfx1100) and assembled
(`llvm_codegen.device_codegen`: ptxas / ld.lld; cached by content, so a repeated kernel costs a
file read). An assembly failure is an internal error (RuntimeError), never a skip. On a device
the code of its target is loaded; with `SPIRAD_<ARCH>_EMULATE=1` the program is also compiled for
`emulation(target)` and run on the CPU JIT with the same entry, thread-to-row mapping, grid stride,
heap layout and atomics.

Memory: fields, ndarrays, temporaries, adstack heaps and status buffers are managed memory
(`rt.alloc`: numpy arrays the host reads once the device is idle).

Launch: launches are enqueued and run in order; nothing waits until `sync()` (every host read
syncs). Each launch writes its buffer-address table and argument bytes into a fresh slot of a
staging arena, so later launches never change what an earlier, still running one reads; the
arena (and every adstack heap or arena replaced by a larger one) is kept until `sync()`. A range
task runs on a grid of `min(iterations, rt.max_threads)` threads rounded up to whole blocks,
each thread one adstack heap row (heaps sized at each launch from the sizing cache's layout:
`layout.heap_bytes(threads)`, fewer threads when the rows would pass `HEAP_BUDGET`); a serial
task on one thread. A range whose bounds read globals is evaluated on the host after waiting for
the device.

Errors: every task launch has its own status words (adstack overflow, bounds checks with
`init(debug=True)`) in its arena slot, read at `sync()` in launch order; the first error is
raised there, about the launch that made it (its arguments, its adstack sizes), as the user
error the CPU backend raises.
"""
from __future__ import annotations


import numpy as np

from kernel_ir.abi import STATUS_BYTES, StatusWord

from .adstack_support import grown, task_stacks
from .base import BackendBase
from .bounds_support import BoundsInfo
from .program import status_error
from .range_bounds import HostBounds, device_bounds

HEAP_BUDGET = 1 << 31  # bytes of adstack heap rows one launch may use on a device
ARENA_BYTES = 1 << 16
ARENA_LIMIT = 1 << 24  # a full arena this large is reused after waiting, not replaced


class GpuProgram:
    def __init__(self, name, fns, kinds, temps, nbind, stacks, task_names, bounds):
        self.name, self.fns, self.kinds, self.temps = name, fns, kinds, temps
        self.nbind, self.stacks, self.task_names, self.bounds = nbind, stacks, task_names, bounds
        self.host_bounds = ()
        self.device_code = {}  # target name -> DeviceCode (what was assembled)
        self.module = None


class LlvmGpuBackend(BackendBase):
    name = ""
    EMULATE_ENV = ""
    _runtime = None       # the process' device runtime (one context per process)
    _runtime_error = None

    # -- availability ------------------------------------------------------------------------------
    @classmethod
    def emulated(cls) -> bool:
        from .. import options
        return options.get(cls.EMULATE_ENV)

    @classmethod
    def runtime_class(cls):
        raise NotImplementedError

    @classmethod
    def _tools_missing(cls) -> str:
        from llvm_codegen import device_libs as dl

        from .. import options
        dl.configure(**options.tool_paths())  # SPIRAD_PTXAS, ...: the code generator reads no env
        finders = ((dl.find_ptxas, dl.find_libdevice) if cls.name == "cuda" else
                   (dl.find_rocm_bitcode, dl.find_lld))
        try:
            for f in finders:
                f()
        except dl.ToolMissing as e:
            return str(e)
        return ""

    @classmethod
    def device_runtime(cls):
        """The device runtime, created once; None (with `_runtime_error`) without a driver."""
        if cls._runtime is None and cls._runtime_error is None:
            from llvm_codegen.device_runtime import DriverUnavailable
            try:
                cls._runtime = cls.runtime_class()()
            except (DriverUnavailable, OSError, AttributeError) as e:
                cls._runtime_error = str(e)
        return cls._runtime

    @classmethod
    def is_available(cls) -> bool:
        try:
            import llvmlite  # noqa: F401
        except ImportError:
            return False
        if cls.emulated():
            return not cls._tools_missing()
        return cls.device_runtime() is not None

    @classmethod
    def picked_by_gpu(cls) -> bool:
        return not cls.emulated() and cls.is_available()

    @classmethod
    def unavailable_reason(cls) -> str:
        try:
            import llvmlite  # noqa: F401
        except ImportError:
            return "llvmlite is not installed (pip install llvmlite)"
        if cls.emulated():
            return cls._tools_missing()
        cls.device_runtime()
        return (f"{cls._runtime_error}; set {cls.EMULATE_ENV}=1 to run the {cls.name} lowering on "
                f"the CPU (docs/gpu.md)")

    # -- setup -------------------------------------------------------------------------------------
    def __init__(self, state):
        super().__init__(state)
        from llvm_codegen.target import ARCH_TARGETS, TARGETS
        self.targets = tuple(TARGETS[t] for t in ARCH_TARGETS[self.name])
        if self.emulated():
            from llvm_codegen.device_runtime.emu_runtime import EmuRuntime
            self.rt = EmuRuntime()
        else:
            self.rt = self.device_runtime()
        self.bounds_check = bool(state.debug)
        self.heap_float = self.rt.alloc(8)
        self.heap_int = self.rt.alloc(8)
        self.arena = self.rt.alloc(ARENA_BYTES)
        self.arena_used = 0
        self.inflight = []   # storages replaced while launches that use them may run
        self.launched = []   # (program, status words, argbuf, adstack plan) per task launch
        self.pending = None  # an error found while draining, raised at the next sync()

    def device_name(self) -> str:
        return f"{self.name} emulated on the host CPU" if self.emulated() else f"{self.name} device"

    def allocate(self, nbytes):
        return self.rt.alloc(nbytes)

    def view(self, storage, np_dtype, shape):
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(np_dtype).itemsize
        return storage[:n].view(np_dtype).reshape(shape)

    def capabilities(self) -> dict:
        return {"f64": True, "i64": True}

    def heap_bytes(self) -> tuple:
        return self.heap_float.nbytes, self.heap_int.nbytes

    # -- compile -----------------------------------------------------------------------------------
    def compile(self, tl, abi):
        from llvm_codegen.codegen import compile_tasks
        from llvm_codegen.device_codegen import build_many
        from llvm_codegen.target import emulation
        progs = [compile_tasks(tl, abi, bounds_check=self.bounds_check, target=t)
                 for t in self.targets]
        built = build_many([(p.llvm_ir, t, [ti.symbol for ti in p.tasks])
                            for p, t in zip(progs, self.targets)], self.emulated())
        codes = {t.name: c for t, c in zip(self.targets, built)}
        prog = progs[0]
        symbols = [ti.symbol for ti in prog.tasks]
        if self.emulated():
            emu = compile_tasks(tl, abi, bounds_check=self.bounds_check,
                                target=emulation(self.targets[0]))
            module = self.rt.load(emu.llvm_ir, symbols)
        else:
            module = self.load_device_code(codes, symbols)
        temps = {k: self.rt.alloc(8) for k, r in enumerate(abi.bindings) if r.kind == "temp"}
        stacks = [task_stacks(t) or None for t in tl.tasks]
        p = GpuProgram(tl.name, [module.function(s) for s in symbols],
                       [t.kind for t in prog.tasks], temps, len(abi.bindings), stacks,
                       [t.name for t in tl.tasks],
                       BoundsInfo(tl, abi) if self.bounds_check else None)
        p.module, p.device_code = module, codes
        p.host_bounds = tuple(HostBounds(tl, t, abi) if device_bounds(t) else None
                              for t in tl.tasks)
        return p

    def load_device_code(self, codes, symbols):
        """Load the device code that suits the device (a subclass decides)."""
        raise NotImplementedError

    # -- launch ------------------------------------------------------------------------------------
    def plan_adstack(self, program, ti, sized):
        """(metadata words in device memory, layout)."""
        words = np.array(sized.layout.metadata() or [0, 0], dtype=np.uint32)
        meta = self.rt.alloc(words.nbytes)
        meta.view(np.uint32)[:] = words
        return meta, sized.layout

    def _stage(self, table, argbuf: bytes) -> tuple:
        """A fresh arena slot with this launch's status words (zeroed), its buffer-address table
        (`table` + the status address) and its argument bytes: (bufs addr, args addr, status)."""
        nt = 8 * (len(table) + 1)
        need = STATUS_BYTES + nt + ((len(argbuf) + 15) & ~15)
        if self.arena_used + need > self.arena.nbytes:
            if self.arena.nbytes >= ARENA_LIMIT and need <= self.arena.nbytes:
                self._drain()  # many launches without a sync: wait, and reuse the arena
            else:
                self.inflight.append(self.arena)
                self.arena = self.rt.alloc(grown(self.arena.nbytes, need))
                self.arena_used = 0
        off = self.arena_used
        a = self.arena
        base = a.__array_interface__["data"][0] + off
        status = a[off:off + STATUS_BYTES].view(np.uint32)
        status[:] = 0
        t = a[off + STATUS_BYTES:off + STATUS_BYTES + nt].view(np.uint64)
        t[:-1] = table
        t[-1] = base
        o = off + STATUS_BYTES + nt
        a[o:o + len(argbuf)] = np.frombuffer(argbuf, np.uint8)
        self.arena_used += need
        return base + STATUS_BYTES, base + STATUS_BYTES + nt, status

    def _heaps(self, nf, ni):
        if nf > self.heap_float.nbytes:
            self.inflight.append(self.heap_float)
            self.heap_float = self.rt.alloc(grown(self.heap_float.nbytes, nf))
        if ni > self.heap_int.nbytes:
            self.inflight.append(self.heap_int)
            self.heap_int = self.rt.alloc(grown(self.heap_int.nbytes, ni))

    def adstack_rows(self, program, task, n) -> int:
        if program.kinds[task] == "serial":
            return 1
        return self.heap_rows(n if n is not None else self.rt.max_threads)

    def heap_rows(self, n: int, layout=None) -> int:
        """Threads (= adstack heap rows) of a range launch of `n` iterations."""
        rt = self.rt
        block = rt.block
        t = min(-(-n // block) * block, rt.max_threads)
        if layout is not None:
            row = layout.stride_float + layout.stride_int
            if row * t > HEAP_BUDGET:
                t = max(block, (HEAP_BUDGET // row) // block * block)
        return t

    @staticmethod
    def _addr(a) -> int:
        return a.__array_interface__["data"][0]

    def launch(self, program, storages, argbuf, ranges, adstack=None):
        base = [self._addr(st if st is not None else program.temps[k])
                for k, st in enumerate(storages)]
        plan = None if adstack is None else adstack.tasks
        for ti, (fn, kind, rng) in enumerate(zip(program.fns, program.kinds, ranges)):
            if rng is None:  # the bounds read device memory: wait for the earlier launches
                self.rt.synchronize()
                rng = program.host_bounds[ti].evaluate(argbuf, lambda k, ref, shape: self.view(
                    storages[k] if storages[k] is not None else program.temps[k], ref.dtype.np,
                    shape))
            b, e = rng
            if e <= b:
                continue
            layout = None
            if program.stacks[ti]:
                meta, layout = plan[ti]
            if kind == "serial":
                nthreads, block = 1, 1
            else:
                nthreads, block = self.heap_rows(e - b, layout), self.rt.block
            extra = [0, 0, 0]
            if layout is not None:
                self._heaps(*layout.heap_bytes(nthreads))
                extra = [self._addr(meta), self._addr(self.heap_float), self._addr(self.heap_int)]
            bufs_addr, args_addr, status = self._stage(base + extra, argbuf)
            self.rt.launch(fn, bufs_addr, args_addr, b, e, nthreads, block)
            self.launched.append((program, status, argbuf, adstack))

    def _errors(self):
        """The error of the first launch (in launch order) whose status words report one."""
        err = None
        for program, status, argbuf, adstack in self.launched:
            if not status[StatusWord.CODE]:
                continue
            err = status_error(program, status, (argbuf,), () if adstack is None else (adstack,))
            break
        self.launched.clear()
        return err

    def _drain(self):
        """Wait for the device; keep the first error for `sync()`; free the staging space."""
        self.rt.synchronize()
        err = self._errors()  # reads the arena: before it is reused
        if self.pending is None:
            self.pending = err
        self.inflight.clear()
        self.arena_used = 0

    def sync(self):
        self._drain()
        if self.pending is not None:
            err, self.pending = self.pending, None
            raise err

    def close(self):
        try:
            self.rt.synchronize()
        finally:
            self.launched.clear()
            self.inflight.clear()
            if self.emulated():
                self.rt.close()
