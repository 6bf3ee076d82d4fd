"""What the CUDA and AMDGPU backends share: the LLVM side module's GPU lowering, launched through
a device runtime (`llvm_codegen.device_runtime`), or through its CPU emulation.

Compile: every program is emitted for each of the arch's device targets
(`llvm_codegen.target.ARCH_TARGETS`: sm_80 + sm_90, gfx90a + gfx1100) and assembled
(`llvm_codegen.device_codegen`: ptxas / ld.lld; cached by content, so a repeated kernel costs a
file read). An assembly failure is an internal error (RuntimeError), never a skip. On a device
the code of its target is loaded; with `SPIRAD_<ARCH>_EMULATE=1` the program is also compiled for
`emulation(target)` and run on the CPU JIT with the same entry, thread-to-row mapping, grid stride,
heap layout and atomics, and the emulated runtime's device memory and stream queue.

Memory: fields, ndarrays, temporaries, adstack heaps and staging are device memory
(`rt.alloc`); the host reaches them only through asynchronous copies on the one stream
(`write`: `from_numpy`, `fill`, element writes; `read`: `to_numpy`, element reads, which wait).
`sd.init(managed_memory=True)` puts fields and ndarrays in managed memory instead (host views
after a sync: `host_views`).

Launch: launches are queued on the stream and never wait for the host; only `sync()` and host
reads wait. Each launch writes its status words (zeroed), buffer-address table and argument
bytes into a fresh slot of a device arena with one asynchronous upload, so later launches
never change what an earlier, still queued one reads; the status words are read back at
`sync()`. A range task runs on a grid of `min(iterations, rt.max_threads)` threads rounded up
to whole blocks, each thread one adstack heap row (heaps sized at each launch from the sizing
cache's layout: `layout.heap_bytes(threads)`, fewer threads when the rows would pass
`HEAP_BUDGET`); a serial task on one thread. A range whose bounds read globals is evaluated by
the kernel itself from device memory (`kernel_entry`: device ranges) on a grid chosen without
the bound (`device_grid`); with `init(debug=True)` (so that an out-of-range bound read is
reported by the host's bounds message) it is read on the host after waiting for the device.

Adstack sizing: the sizing cache (`spirad.runtime.sizing_cache`) sizes each launch; a task whose size
expressions read device data is sized by the GPU sizer (`gpu_sizer`: the sizer kernels of
`shaders/` compiled by this lowering, writing the task's metadata words on the device; one
read-back on a cache miss, none on a hit). `SPIRAD_GPU_HOST_SIZING=1` keeps the path from before
the GPU sizer and device ranges (host sizing and host-read bounds, each a wait), for comparisons.

Errors: every task launch has its own status words (adstack overflow, bounds checks with
`init(debug=True)`), read at `sync()` in launch order; the first error is raised there, about
the launch that made it (its arguments, its adstack sizes), as the user error the CPU backend
raises. The size an overflowing stack needed is computed from the data as it was at the launch
when no write has touched that data since (the device is idle then: nothing syncs again), else
the message states the capacity only.
"""
from __future__ import annotations

import numpy as np

from kernel_ir.abi import STATUS_BYTES, StatusWord

from .adstack_support import grown
from .base import BackendBase, default_checks
from .program import AdstackTaskPlan, Program, status_error
from .range_bounds import HostBounds

HEAP_BUDGET = 1 << 31  # bytes of adstack heap rows one launch may use on a device
DEVICE_RANGE_ROWS = 1 << 16  # threads of a device-range task with adstacks (its range unknown)
ARENA_BYTES = 1 << 16
ARENA_LIMIT = 1 << 24  # a full arena this large is reused after waiting, not replaced
# device memory of dropped arrays is freed at the next wait (their launches may still read it):
# past this many bytes waiting, an allocation waits first, so a loop that creates and drops
# ndarrays without syncing holds a bounded amount (before: up to a full arena of launches)
RELEASED_LIMIT = 64 << 20
DEVICE_RANGE_HINT = (0, 1 << 30)  # begin / end arguments of a device-range task (not read)
HOST_PATH_ENV = "SPIRAD_GPU_HOST_SIZING"


class GpuProgram(Program):
    """A program of the CUDA / AMDGPU backends: `Program`'s part, then the task functions of the
    loaded module, the kernel temporaries' device memory and how each task's range is read."""

    def __init__(self, tl, abi, bounds_check, module, symbols, temps, device_code, on_device):
        super().__init__(tl, abi, bounds_check)
        self.module = module  # the loaded (or emulated) module: keeps the functions alive
        self.fns = [module.function(s) for s in symbols]
        self.temps = temps
        self.device_code = device_code  # target name -> DeviceCode (what was assembled)
        # per task: the kernel reads its own range from device memory
        self.device_range = tuple(i in on_device for i in range(len(tl.tasks)))
        # per task: HostBounds of a range read on the host, else None
        self.host_bounds = tuple(HostBounds(tl, t, abi) if r and i not in on_device else None
                                 for i, (t, r) in enumerate(zip(tl.tasks, abi.device_ranges)))


class _Launch:
    """One queued task launch: where its status words are, and what names its errors."""
    __slots__ = ("program", "arena", "offset", "argbuf", "adstack", "inputs")

    def __init__(self, program, arena, offset, argbuf, adstack, inputs):
        self.program, self.arena, self.offset = program, arena, offset
        self.argbuf, self.adstack, self.inputs = argbuf, adstack, inputs


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
        from .. import options
        from llvm_codegen.target import ARCH_TARGETS, TARGETS
        self.targets = tuple(TARGETS[t] for t in ARCH_TARGETS[self.name])
        if self.emulated():
            from llvm_codegen.device_runtime.emu_runtime import EmuRuntime
            self.rt = EmuRuntime()
        else:
            self.rt = self.device_runtime()
        self.bounds_check = bool(state.debug)
        self.oob_check = default_checks(state)  # the default bounds checks (base.default_checks)
        self.managed = state.options.managed_memory
        self.host_path = options.get(HOST_PATH_ENV)
        if not self.host_path:
            from .gpu_sizer import GpuSizer
            self.gpu_sizer = GpuSizer(self)
        self.heap_float = self.rt.alloc(8)
        self.heap_int = self.rt.alloc(8)
        self.arena = self.rt.alloc(ARENA_BYTES)
        self.arena_used = 0
        self.launched = []   # _Launch per queued task launch since the last drain
        self.pending = None  # an error found while draining, raised at the next sync()

    @property
    def host_views(self) -> bool:
        return self.managed

    def device_name(self) -> str:
        return f"{self.name} emulated on the host CPU" if self.emulated() else f"{self.name} device"

    def allocate(self, nbytes):
        if self.rt.released_bytes > RELEASED_LIMIT:
            self._drain()  # frees what dropped arrays held; a kernel error is kept for sync()
        return self.rt.alloc_managed(nbytes) if self.managed else self.rt.alloc(nbytes)

    def view(self, storage, np_dtype, shape):
        """Managed memory: a live view (the device is idle: callers synced). Device memory: a
        read-only copy, downloaded now."""
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(np_dtype).itemsize
        if storage.host is not None:
            return storage.host[:n].view(np_dtype).reshape(shape)
        out = self.rt.download(storage.ptr, n).view(np_dtype).reshape(shape)
        out.flags.writeable = False
        return out

    def read(self, storage, nbytes: int, offset: int = 0) -> np.ndarray:
        self._check_range(storage, offset, nbytes)
        if storage.host is not None:
            self.sync()
            return np.array(storage.host[offset:offset + nbytes], copy=True)
        data = self.rt.download(storage.ptr + offset, nbytes)
        if self.launched or self.pending is not None:  # the stream is idle: only errors left
            self.sync()
        return data

    def write(self, storage, data, offset: int = 0) -> None:
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        self._check_range(storage, offset, raw.nbytes)
        if storage.host is not None:
            self.sync()
            storage.host[offset:offset + raw.nbytes] = raw
        else:
            self.rt.upload(storage.ptr + offset, raw)  # queued: no wait

    @staticmethod
    def _check_range(storage, offset, nbytes):
        if offset < 0 or offset + nbytes > storage.nbytes:
            raise RuntimeError(f"{nbytes} bytes at offset {offset} do not fit a buffer of "
                               f"{storage.nbytes} bytes")

    def capabilities(self) -> dict:
        return {"f64": True, "i64": True}

    # -- other libraries' GPU arrays ---------------------------------------------------------------
    DLPACK_DEVICE = 0     # kDLCUDA (2) / kDLROCM (10): set by the subclass
    DEFAULT_STREAM = 0    # what a DLPack stream value of None means on this device

    def dlpack_device(self) -> tuple:
        return (self.DLPACK_DEVICE, 0)

    def dlpack_stream(self):
        return self.rt.stream

    def foreign_storage(self, ptr, nbytes, owner):
        return self.rt.wrap(ptr, nbytes, owner)

    def order_after(self, stream) -> None:
        if stream is not None and stream != -1:
            self.rt.wait_for(int(stream))

    def order_before(self, stream) -> None:
        if stream != -1:
            self.rt.signal(self.DEFAULT_STREAM if stream is None else int(stream))

    def heap_bytes(self) -> tuple:
        return self.heap_float.nbytes, self.heap_int.nbytes

    # -- compile -----------------------------------------------------------------------------------
    def compile(self, tl, abi):
        from llvm_codegen.codegen import compile_tasks
        from llvm_codegen.device_codegen import build_many
        from llvm_codegen.target import emulation
        on_device = frozenset(i for i, r in enumerate(abi.device_ranges)
                              if r and not self.bounds_check and not self.host_path)
        progs = [compile_tasks(tl, abi, bounds_check=self.bounds_check, target=t,
                               device_ranges=on_device, oob_check=self.oob_check)
                 for t in self.targets]
        built = build_many([(p.llvm_ir, t, [ti.symbol for ti in p.tasks])
                            for p, t in zip(progs, self.targets)], self.emulated())
        codes = {t.name: c for t, c in zip(self.targets, built)}
        symbols = [ti.symbol for ti in progs[0].tasks]
        if self.emulated():
            emu = compile_tasks(tl, abi, bounds_check=self.bounds_check,
                                target=emulation(self.targets[0]), device_ranges=on_device,
                                oob_check=self.oob_check)
            module = self.rt.load(emu.llvm_ir, symbols)
        else:
            module = self.load_device_code(codes, symbols)
        temps = {k: self.rt.alloc(8) for k, r in enumerate(abi.bindings) if r.kind == "temp"}
        return GpuProgram(tl, abi, self.bounds_check, module, symbols, temps, codes, on_device)

    def load_device_code(self, codes, symbols):
        """Load the device code that suits the device (a subclass decides)."""
        raise NotImplementedError

    # -- launch ------------------------------------------------------------------------------------
    def plan_adstack(self, program, ti, sized):
        """The metadata words in device memory: the buffer the GPU sizer wrote, or the host
        layout's words uploaded to a buffer of this plan."""
        if sized.device_meta is not None:
            return AdstackTaskPlan(sized.layout, sized.device_meta)
        words = np.array(sized.layout.metadata() or [0, 0], dtype=np.uint32)
        meta = self.rt.alloc(words.nbytes)
        self.rt.upload(meta.ptr, words.view(np.uint8))
        return AdstackTaskPlan(sized.layout, meta)

    def _stage(self, table, argbuf: bytes) -> tuple:
        """A fresh arena slot holding this launch's status words (zeroed), its buffer-address
        table (`table` + the status address) and its argument bytes, uploaded in stream order:
        (bufs address, args address, arena, slot offset)."""
        nt = 8 * (len(table) + 1)
        need = STATUS_BYTES + nt + ((len(argbuf) + 15) & ~15)
        if self.arena_used + need > self.arena.nbytes:
            if self.arena.nbytes >= ARENA_LIMIT and need <= self.arena.nbytes:
                self._drain()  # many launches without a sync: wait, and reuse the arena
            else:  # the old arena stays alive while its launches are listed
                self.arena = self.rt.alloc(grown(self.arena.nbytes, need))
                self.arena_used = 0
        off = self.arena_used
        a = self.arena
        base = a.ptr + off
        slot = np.zeros(need, np.uint8)
        t = slot[STATUS_BYTES:STATUS_BYTES + nt].view(np.uint64)
        t[:-1] = table
        t[-1] = base
        o = STATUS_BYTES + nt
        slot[o:o + len(argbuf)] = np.frombuffer(argbuf, np.uint8)
        self.rt.upload(base, slot)
        self.arena_used += need
        return base + STATUS_BYTES, base + STATUS_BYTES + nt, a, off

    def _heaps(self, nf, ni):
        """Heaps of at least these sizes; a replaced heap is freed by the runtime only after
        the queued launches that use it have run."""
        if nf > self.heap_float.nbytes:
            self.heap_float = self.rt.alloc(grown(self.heap_float.nbytes, nf))
        if ni > self.heap_int.nbytes:
            self.heap_int = self.rt.alloc(grown(self.heap_int.nbytes, ni))

    def adstack_rows(self, program, task, n) -> int:
        if program.kinds[task] == "serial":
            return 1
        return self.heap_rows(n if n is not None else self.rt.max_threads)

    def heap_rows(self, n: int, layout=None) -> int:
        """Threads (= adstack heap rows) of a range launch of `n` iterations."""
        rt = self.rt
        block = rt.block
        return self._budget(min(-(-n // block) * block, rt.max_threads), layout)

    def device_grid(self, layout=None) -> int:
        """Threads of a device-range launch (its iteration count unknown to the host)."""
        t = self.rt.max_threads
        if layout is not None:
            t = min(t, DEVICE_RANGE_ROWS)
        return self._budget(t, layout)

    def _budget(self, t: int, layout) -> int:
        if layout is not None:
            row = layout.stride_float + layout.stride_int
            if row * t > HEAP_BUDGET:
                block = self.rt.block
                t = max(block, (HEAP_BUDGET // row) // block * block)
        return t

    def launch(self, program, storages, argbuf, ranges, adstack=None):
        temps = program.temps
        base = [(st if st is not None else temps[k]).ptr for k, st in enumerate(storages)]
        plan = None if adstack is None else adstack.tasks
        for ti, (fn, kind, rng) in enumerate(zip(program.fns, program.kinds, ranges)):
            on_device = rng is None and program.device_range[ti]
            if on_device:
                b, e = DEVICE_RANGE_HINT
            else:
                if rng is None:  # read on the host: wait for the earlier launches
                    rng = program.host_bounds[ti].evaluate(argbuf, lambda k, ref, shape: self.view(
                        storages[k] if storages[k] is not None else temps[k], ref.dtype.np,
                        shape))
                b, e = rng
                if e <= b:
                    continue
            layout = None
            if program.stacks[ti]:
                meta, layout = plan[ti].meta, plan[ti].layout
            if kind == "serial":
                nthreads, block = 1, 1
            else:
                nthreads = self.device_grid(layout) if on_device else self.heap_rows(e - b, layout)
                block = self.rt.block
            extra = [0, 0, 0]
            inputs = None
            if layout is not None:
                self._heaps(*layout.heap_bytes(nthreads))
                extra = [meta.ptr, self.heap_float.ptr, self.heap_int.ptr]
                if adstack.forced:  # an overflow is possible: what its message would read
                    inputs = adstack.required_inputs(ti)
            bufs_addr, args_addr, arena, off = self._stage(base + extra, argbuf)
            self.rt.launch(fn, bufs_addr, args_addr, b, e, nthreads, block)
            self.launched.append(_Launch(program, arena, off, argbuf, adstack, inputs))

    # -- errors and sync ---------------------------------------------------------------------------
    def _statuses(self) -> dict:
        """Wait for the device; the status bytes of every arena with listed launches."""
        ends = {}
        for ln in self.launched:
            a = ln.arena
            end = ln.offset + STATUS_BYTES
            if id(a) not in ends or ends[id(a)][1] < end:
                ends[id(a)] = (a, end)
        if not ends:
            self.rt.synchronize()
        return {k: self.rt.download(a.ptr, end) for k, (a, end) in ends.items()}

    def _read_idle(self, array) -> np.ndarray:
        """A field's / ndarray's data while the device is idle, without syncing (the overflow
        message's required size)."""
        perm = array._perm()  # a field in Taichi's layout: in index order (spirad.data.snode_layout)
        if perm is not None:
            return self.view(array._storage(), array.dtype.np, (perm.size,))[perm]
        return self.view(array._storage(), array.dtype.np, array.full_shape)

    def _required(self, ln: _Launch, task: int, stack: int):
        ad = ln.adstack
        if ln.inputs is None or ad.required_inputs(task) != ln.inputs:
            return None  # unknown, or the data it reads was written after the launch
        return ad.required(task, stack, read=self._read_idle)

    def _errors(self, statuses):
        """The error of the first launch (in launch order) whose status words report one."""
        err = None
        for ln in self.launched:
            raw = statuses[id(ln.arena)]
            status = raw[ln.offset:ln.offset + STATUS_BYTES].view(np.uint32)
            if not status[StatusWord.CODE]:
                continue
            err = status_error(ln.program, status, (ln.argbuf,),
                               () if ln.adstack is None else (ln.adstack,),
                               required=lambda plan, task, stack, ln=ln:
                               self._required(ln, task, stack))
            break
        return err

    def _drain(self):
        """Wait for the device; keep the first error for `sync()`; free the staging space."""
        statuses = self._statuses()
        try:
            err = self._errors(statuses)
        finally:
            self.launched.clear()
            self.arena_used = 0
        if self.pending is None:
            self.pending = err

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
            if self.emulated():
                self.rt.close()
