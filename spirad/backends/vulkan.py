"""Vulkan backend: SPIR-V from `spirv_codegen`, run by `gfx_runtime.vulkan`.

Launches are recorded into the runtime's current batch; nothing is submitted until a host read,
`sync()` or a full batch. Per program we keep: one pipeline per task, a status buffer (checked
at every sync: a lavapipe loop-cap hit raises a clear error), temp buffers, and a small cache of
argument buffers keyed by their bytes (a launch loop with unchanging arguments binds the same
buffer every time; new contents get new buffers until a flush recycles them).

With `sd.init(debug=True)` programs are compiled with bounds checks (`compile_tasks(...,
bounds_check=True)`): an out-of-range index is skipped on the device and recorded in the status
buffer (code STATUS_INDEX_OUT_OF_RANGE); `_check_status` turns it into a `SpiradValueError` at the
next sync / host read (`bounds_support`), naming the kernel, task, field/ndarray, shape and index.

A parallel loop whose range reads fields / ndarrays / temporaries (`range_bounds`) is evaluated
on the device: its range-arguments module (`spirv_codegen.compile_range_args`) runs first and the
task is dispatched indirectly from the buffer it wrote — no host round trip. Tasks with adstacks
(chunked by the host) and debug mode (bounds-check errors) evaluate such ranges on the host
instead, after flushing the queued work.
"""
from __future__ import annotations

import os
import struct

import numpy as np

from gfx_runtime.errors import GfxError, GfxUnavailable
from kernel_ir.errors import SpiradArchError, SpiradDeviceError, SpiradError
from .adstack_support import grown, overflow_error, task_stacks
from .base import BackendBase
from .bounds_support import STATUS_INDEX_OUT_OF_RANGE, BoundsInfo, index_error
from .gpu_sizer import GpuSizer
from .range_bounds import HostBounds, device_bounds

_ARG_CACHE_MAX = 256
_RECENT_ARGS_MAX = 8  # distinct argument buffers kept per program to name ndarray shapes
ROWS_CAP = 65536  # most threads of an adstack task in flight at once (heap rows)


def _user_error(e: GfxError) -> SpiradError:
    """The user error for a runtime error (same message; DESIGN §1: runtimes raise their own)."""
    return (SpiradArchError if isinstance(e, GfxUnavailable) else SpiradDeviceError)(str(e))


def _runtime_errors_as_user_errors(method):
    """Wrap a backend entry point so that the runtime's own errors reach users as theirs."""
    import functools

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except GfxError as e:
            raise _user_error(e) from None
    return wrapper


class VkProgram:
    def __init__(self, name, tasks, pipelines, status, temps, task_names, stacks, bounds=None,
                 ranges=None):
        self.name, self.tasks, self.pipelines = name, tasks, pipelines
        self.status, self.temps, self.task_names = status, temps, task_names
        self.stacks = stacks  # per task: [StackInfo] or None
        self.bounds = bounds  # BoundsInfo when compiled with bounds checks, else None
        self.blob = None  # (SPIR-V tasks, range-argument modules): what the offline cache stores
        self.recent_args: list = []  # argument buffers since the last status check (bounds)
        self.arg_bufs: dict = {}
        self.spare: list = []
        self.adstack_launches = []  # AdstackLaunch of each launch since the last status check
        # per task: None (host-given range), ('device', args pipeline, args buffer) or
        # ('host', HostBounds) for a range read from globals
        self.ranges = ranges or [None] * len(tasks)


class VulkanBackend(BackendBase):
    """Vulkan through `gfx_runtime.vulkan`; also the base of the Metal backend (`metal.py`),
    which swaps the runtime (`_make_runtime`), the SPIR-V profile and the module checks."""
    name = "vulkan"

    @property
    def profile(self):
        from spirv_codegen.profile import VULKAN
        return VULKAN

    def _make_runtime(self):
        from gfx_runtime.vulkan import VulkanRuntime
        return VulkanRuntime()

    def _check_kernel(self, tl, abi) -> None:
        """User errors this backend finds in a task list before code generation (none here)."""

    def _check_module(self, name: str, mod) -> None:
        """Called on every module (a SpirvTask) before the runtime sees it; spirv-val when
        validating."""
        from spirv_codegen import validate
        if self.validate:
            validate(mod.words)

    def _pipeline(self, mod):
        return self.rt.pipeline(mod.words, mod.num_bindings, mod.push_constant_bytes)

    def _heaps(self, layout, rows: int) -> list:
        """The adstack heap buffers a launch binds after the metadata, grown for `rows` rows."""
        hf = self.heap_float = self._grown_heap(self.heap_float, layout.stride_float * rows)
        hi = self.heap_int = self._grown_heap(self.heap_int, layout.stride_int * rows)
        return [hf, hi]

    @classmethod
    def is_available(cls) -> bool:
        try:
            from gfx_runtime.vulkan import is_available as avail
        except ImportError:
            return False
        return avail()

    @classmethod
    def unavailable_reason(cls) -> str:
        try:
            from gfx_runtime.vulkan import unavailable_reason as reason
        except ImportError as e:  # an installation without the runtime package
            return f"the Vulkan runtime of spirad cannot be imported ({e})"
        return reason()

    def __init__(self, state):
        super().__init__(state)
        from spirv_codegen import SpirvCaps
        try:
            self.rt = self._make_runtime()
        except GfxError as e:
            raise _user_error(e) from None
        self.caps = self.rt.caps
        self.spirv_caps = SpirvCaps.from_device(self.caps, self.profile)
        self.validate = state.debug or self.rt.validation or os.environ.get("SPIRAD_VALIDATE_SPIRV") == "1"
        self.bounds_check = bool(state.debug)
        self.launched: list = []  # programs with work since the last status check
        self.pending = None       # an error found early, raised at the next sync
        self.heap_float = self.heap_int = None  # adstack heaps, grown before launches
        self.gpu_sizer = GpuSizer(self, self.caps.loop_iteration_cap)

    def capabilities(self) -> dict:
        return {"f64": self.caps.has_f64, "i64": self.caps.has_i64}

    @_runtime_errors_as_user_errors
    def allocate(self, nbytes):
        return self.rt.alloc(max(int(nbytes), 16))

    @_runtime_errors_as_user_errors
    def view(self, storage, np_dtype, shape):
        count = int(np.prod(shape, dtype=np.int64))
        return storage.view(np_dtype, count).reshape(shape)

    @_runtime_errors_as_user_errors
    def compile(self, tl, abi):
        from spirv_codegen import compile_tasks
        self._check_kernel(tl, abi)
        limit = self.caps.max_per_stage_storage_buffers
        uniform_args = self.profile.args_uniform  # Metal: the arguments are a uniform buffer
        if 2 - uniform_args + len(abi.bindings) > limit:
            raise SpiradDeviceError(
                f"kernel {tl.name} binds {2 - uniform_args + len(abi.bindings)} storage buffers "
                f"({'' if uniform_args else 'arguments, '}status and "
                f"{len(abi.bindings)} fields/ndarrays/temporaries) but the device allows "
                f"{limit} per stage (maxPerStageDescriptorStorageBuffers); split the kernel")
        from spirv_codegen import compile_range_args
        read = [i for i, t in enumerate(tl.tasks) if device_bounds(t)]
        on_device = frozenset(i for i in read if not self.bounds_check and not task_stacks(tl.tasks[i]))
        tasks = compile_tasks(tl, abi, self.spirv_caps, bounds_check=self.bounds_check,
                              device_ranges=on_device)
        range_mods = {i: compile_range_args(tl, i, abi, self.spirv_caps) for i in sorted(on_device)}
        for m in tasks + tuple(range_mods.values()):
            self._check_module(tl.name, m)  # spirv-val, and the profile's own checks
        return self._build(tl, abi, (tasks, range_mods))

    def export_program(self, program):
        return program.blob

    @_runtime_errors_as_user_errors
    def import_program(self, tl, abi, blob):
        tasks, range_mods = blob
        for m in tasks + tuple(range_mods.values()):
            self._check_module(tl.name, m)  # a stored module meets this backend's profile too
        return self._build(tl, abi, blob)

    def cache_features(self) -> tuple:
        return (self.name, self.profile, self.caps, self.spirv_caps, self.bounds_check, self.validate)

    def _build(self, tl, abi, blob):
        """The program of SPIR-V modules `blob` = (tasks, {task: range-arguments module})."""
        from spirv_codegen import RANGE_ARGS_WORDS, STATUS_WORDS
        tasks, range_mods = blob
        pipes = [self._pipeline(t) for t in tasks]
        ranges = [None] * len(tasks)
        for i, t in enumerate(tl.tasks):
            mod = range_mods.get(i)
            if mod is not None:
                ranges[i] = ("device", self._pipeline(mod),
                             self.rt.alloc(4 * RANGE_ARGS_WORDS))
            elif device_bounds(t):
                ranges[i] = ("host", HostBounds(tl, t, abi))
        status = self.rt.alloc(4 * STATUS_WORDS)
        temps = {k: self.rt.alloc(16) for k, r in enumerate(abi.bindings) if r.kind == "temp"}
        stacks = [task_stacks(t) or None for t in tl.tasks]
        p = VkProgram(tl.name, tasks, pipes, status, temps, [t.name for t in tl.tasks], stacks,
                      BoundsInfo(tl, abi) if self.bounds_check else None, ranges)
        p.blob = blob
        return p

    def _small_buffer(self, p: VkProgram, data: bytes):
        """A device buffer holding `data`, reused while its contents are unchanged."""
        buf = p.arg_bufs.get(data)
        if buf is not None:
            return buf
        if len(p.arg_bufs) >= _ARG_CACHE_MAX:
            self.sync()  # all recorded launches done: their argument buffers are free again
            p.spare.extend(p.arg_bufs.values())
            p.arg_bufs.clear()
        buf = p.spare.pop() if p.spare else self.rt.alloc(256, zero=False)
        if len(data) > buf.nbytes:
            buf = self.rt.alloc(len(data), zero=False)
        buf.write(data)
        p.arg_bufs[data] = buf
        return buf

    def _grown_heap(self, cur, nbytes: int):
        """`cur`, or a larger heap buffer when it is smaller than `nbytes` (the old one is freed
        after its last use)."""
        size = cur.nbytes if cur is not None else 0
        if nbytes > size or cur is None:
            limit = self.caps.max_storage_buffer_range
            new = min(grown(size, max(nbytes, 16)), max(limit, nbytes))
            return self.rt.alloc(new, zero=False)
        return cur

    def heap_bytes(self) -> tuple:
        return tuple(h.nbytes if h is not None else 0 for h in (self.heap_float, self.heap_int))

    @_runtime_errors_as_user_errors
    def read(self, storage, nbytes: int, offset: int = 0) -> np.ndarray:
        return storage.read(offset, nbytes)

    @_runtime_errors_as_user_errors
    def write(self, storage, data, offset: int = 0) -> None:
        storage.write(np.ascontiguousarray(data), offset)

    def plan_adstack(self, program, ti, sized):
        """(layout, bytes of the larger heap row, the metadata buffer to bind or None, else the
        metadata bytes to upload). The GPU sizer wrote its result's words into
        `sized.device_meta`: bound as it is."""
        lay = sized.layout
        per_row = max(lay.stride_float, lay.stride_int, 1)
        if sized.device_meta is not None:
            return lay, per_row, sized.device_meta, None
        return lay, per_row, None, np.array(lay.metadata() or [0, 0], dtype=np.uint32).tobytes()

    @_runtime_errors_as_user_errors
    def launch(self, p: VkProgram, storages, argbuf, ranges, adstack=None):
        from spirv_codegen import dispatch_geometry
        args = self._small_buffer(p, argbuf)
        bufs = [args, p.status]
        for k, st in enumerate(storages):
            bufs.append(st if st is not None else p.temps[k])
        maxg = self.caps.max_compute_work_group_count
        if p.bounds is not None and len(p.recent_args) < _RECENT_ARGS_MAX \
                and argbuf not in p.recent_args:
            p.recent_args.append(argbuf)  # ndarray shapes for a bounds error
        if adstack is not None and len(p.adstack_launches) < 64:
            p.adstack_launches.append(adstack)  # since the last sync: names the needed size
        plans = None if adstack is None else adstack.tasks
        for ti, (t, pipe, rng) in enumerate(zip(p.tasks, p.pipelines, ranges)):
            if rng is None:
                how = p.ranges[ti]
                if how[0] == "device":  # evaluated and dispatched on the device
                    _, args_pipe, args_buf = how
                    rbufs = bufs + [args_buf]
                    self.rt.dispatch(args_pipe, rbufs, (1, 1, 1), b"\0" * 12)
                    self.rt.dispatch(pipe, rbufs, (1, 1, 1), b"\0" * 12, indirect=(args_buf, 0))
                    continue
                self.rt.flush()  # the range reads what earlier work wrote: evaluate it now
                rng = how[1].evaluate(argbuf, lambda k, ref, shape: self.view(bufs[2 + k], ref.dtype.np, shape))
            b, e = rng
            n = e - b
            if n <= 0:
                continue
            stacks = p.stacks[ti]
            tbufs = bufs
            chunk = n
            if stacks:
                layout, per_row, meta, meta_bytes = plans[ti]
                limit = self.caps.max_storage_buffer_range
                rows = max(1, min(ROWS_CAP, n, limit // per_row))
                if per_row > limit:
                    raise SpiradDeviceError(
                        f"kernel {p.name}: one thread's autodiff stacks take {per_row} bytes, more than "
                        f"one storage buffer may hold on {self.caps.name} ({limit} bytes)")
                chunk = n if t.kind == "serial" else rows
                if meta is None:
                    meta = self._small_buffer(p, meta_bytes)
                tbufs = bufs + [meta] + self._heaps(layout, rows)
            if len(tbufs) < t.num_bindings:
                raise RuntimeError(f"task {t.name} declares {t.num_bindings} bindings, "
                                   f"the backend has {len(tbufs)} buffers for it")
            for c in range(b, e, chunk):
                ce = min(c + chunk, e)
                if t.kind == "serial":
                    groups, tpr = (1, 1, 1), 1
                else:
                    groups, tpr = dispatch_geometry(ce - c, maxg, t.local_size)
                self.rt.dispatch(pipe, tbufs[:t.num_bindings], groups, struct.pack("<iiI", c, ce, tpr))
        if not self.launched or self.launched[-1] is not p:
            if p not in self.launched:
                self.launched.append(p)
        if adstack is not None and adstack.forced:
            # forced stack sizes can overflow: check this launch now, so the error names the
            # size *this* launch needed; it is raised at the next sync / host read
            try:
                self._check_status([p])
            except SpiradError as e:
                if self.pending is None:
                    self.pending = e

    @_runtime_errors_as_user_errors
    def sync(self):
        if self.pending is not None:
            self.rt.flush()
            err, self.pending = self.pending, None
            self.launched = []
            raise err
        if not self.launched:
            self.rt.flush()
            return
        launched, self.launched = self.launched, []
        self._check_status(launched)

    def _check_status(self, launched):
        from spirv_codegen import STATUS_WORDS
        self.rt.flush()
        for p in launched:
            words = p.status.view(np.uint32, STATUS_WORDS)
            code = int(words[0])
            recent, p.recent_args = p.recent_args, []
            if code:
                aux, stack = int(words[1]), int(words[2])
                saved = [int(w) for w in words]
                words[:] = 0
                launches, p.adstack_launches = p.adstack_launches, []
                if code == STATUS_INDEX_OUT_OF_RANGE and p.bounds is not None:
                    raise index_error(p.name, p.task_names, p.bounds, saved, recent)
                if code == 1 and launches and p.stacks[aux]:
                    # the status word does not say which launch overflowed: name the largest
                    # capacity given and the largest size needed among them
                    cap = max(a.capacity(aux, stack) for a in launches)
                    req = [a.required(aux, stack) for a in launches]
                    req = max((r for r in req if r is not None), default=None)
                    raise overflow_error(p.name, p.task_names[aux], p.stacks[aux][stack], stack, cap, req)
                raise _status_error(p, code, aux, self.caps)
            p.adstack_launches = []

    def take_validation_messages(self):
        return self.rt.take_validation_messages()

    @_runtime_errors_as_user_errors
    def close(self):
        self.rt.close()


def _status_error(p, code, aux, caps):
    from spirv_codegen import STATUS_LOOP_CAP
    task = p.task_names[aux] if 0 <= aux < len(p.task_names) else f"#{aux}"
    if code == STATUS_LOOP_CAP:
        return SpiradDeviceError(
            f"kernel {p.name} (task {task}) stopped: a single parallel iteration ran more than "
            f"{caps.loop_iteration_cap} loop iterations, the limit of the {caps.name} driver "
            f"(llvmpipe ends every loop of an invocation silently past it; spirad stopped the "
            f"kernel instead of returning a truncated result). Spread the work over more parallel "
            f"iterations, or run this kernel on arch=cpu")
    return SpiradDeviceError(f"kernel {p.name} (task {task}) reported device error code {code} ({aux})")


Backend = VulkanBackend
