"""The SPIR-V backend base: SPIR-V from `spirv_codegen`, run by a `gfx_runtime` runtime (the
`gfx_runtime.protocol.GfxRuntime` contract). `vulkan.py` (Vulkan, `gfx_runtime.vulkan`) and
`metal.py` (Metal through wgpu, `gfx_runtime.wgpu`) specialise it with their runtime, SPIR-V
profile (`spirv_codegen.profile`), limits and checks; everything else is here.

Compile is pure: `compile` turns a task list into modules (code generation, validation, the
per-task buffer maps) and `_build` turns them into a program on the device (pipelines, status
words, temporaries); the offline cache stores the modules (`export_program`) and rebuilds only
the device part (`import_program`).

Launches are recorded into the runtime's current batch; nothing is submitted until a host read,
`sync()` or a full batch. Per program we keep: one pipeline per task, the status words (checked
at every sync: a lavapipe loop-cap hit raises a clear error) and temp buffers. A launch's
argument bytes (the plan's, which end with the program's root offsets: `launch_arguments`) go
to the runtime with each dispatch, as binding 0 of pipelines made with `arguments=True`: the runtime copies them into an
arena of the batch being recorded and binds them at their offset, so relaunching a kernel with a
new scalar (`step(t)`) costs a memmove, never a new buffer or a wait (`gfx_runtime.vulkan.
arguments`). The adstack metadata (rarely new) is a small device buffer per distinct contents.

With `sd.init(debug=True)` programs are compiled with bounds checks (`compile_tasks(...,
bounds_check=True)`): an out-of-range index is skipped on the device and recorded in the status
words (code STATUS_INDEX_OUT_OF_RANGE); `_check_status` turns it into a `SpiradIndexError` at the
next sync / host read (`program.status_error`), naming the kernel, task, field/ndarray, shape and
index.

A parallel loop whose range reads fields / ndarrays / temporaries (`range_bounds`) is evaluated
on the device: its range-arguments module (`spirv_codegen.compile_range_args`) runs first and the
task is dispatched indirectly from the buffer it wrote — no host round trip. Tasks with adstacks
(chunked by the host) and debug mode (bounds-check errors) evaluate such ranges on the host
instead, after flushing the queued work.

Adstack heaps: two buffers (float, int), or one (a row = the float row, then the int row) where
the profile says `single_heap` (Metal: fewer storage buffers spent of its buffer table).
"""
from __future__ import annotations

import math

import numpy as np

from gfx_runtime.errors import GfxError, GfxUnavailable
from kernel_ir.abi import (PUSH_CONSTANT_BYTES, RANGE_ARGS_WORDS, STATUS_BYTES, STATUS_GUARD,
                           STATUS_WORDS, StatusWord, offset_word, pack_push_constants,
                           patch_offset_words)
from kernel_ir.errors import SpiradArchError, SpiradDeviceError, SpiradError

from .adstack_support import grown, task_stacks
from .base import BackendBase, default_checks
from .gpu_sizer import GpuSizer
from .program import AdstackTaskPlan, Program, status_error
from .range_bounds import HostBounds
from .root_buffers import RootBuffers, RootSlice, bindings_of
from . import spirv_replay

_ARG_CACHE_MAX = 256  # distinct adstack metadata buffers kept per program between syncs
_RECENT_ARGS_MAX = 8  # distinct argument buffers kept per program to name ndarray shapes
ROWS_CAP = 65536  # most threads of an adstack task in flight at once (heap rows)
_CODE = int(StatusWord.CODE)  # a plain int indexes numpy faster than the IntEnum


def _user_error(e: GfxError) -> SpiradError:
    """The user error for a runtime error (same message; architecture §1: runtimes raise their own)."""
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


class SpirvProgram(Program):
    """A compiled kernel: its modules and pipelines for one *variant* (which arena chunk each
    ndarray binding sits in, `key`; -1: a buffer of its own), and the other variants built so
    far (`variants`: key -> what `parts` gives). `launch` switches variant when a launch's
    ndarrays sit elsewhere (`SpirvBackend._select`); nearly every program has one."""

    def __init__(self, tl, abi, bounds_check, blob, pipelines, status, temps, ranges, views, own,
                 arg_tail, key=(), placement=None, nd_words=()):
        super().__init__(tl, abi, bounds_check, blob)  # blob: `_build`'s
        self.tasks, self.pipelines = blob[0], pipelines
        self.status = status  # RootSlice of the status words
        self.temps = temps  # abi index -> RootSlice of each kernel temporary
        self.views = views  # per task, per root view binding: its Chunk (bound: its buffer now)
        self.own = own      # per task: abi indices of the refs with buffers of their own
        self.arg_tail = arg_tail  # root offsets, appended to the argument bytes (buffers.py)
        self.tl, self.abi, self.placement = tl, abi, placement  # to build other variants
        self.nd_refs = tuple(k for k, r in enumerate(abi.bindings) if r.kind == "ndarray")
        self.nd_words = nd_words  # (abi index, byte in arg_tail, element bytes) per ndarray
        self.key = key
        self.last_storages = None  # the storages of the last launch (the variant's input)
        self.recent_args: list = []  # argument buffers since the last status check (bounds)
        self.arg_bufs: dict = {}  # adstack metadata bytes -> its buffer (`_small_buffer`)
        self.spare: list = []
        self.adstack_launches = []  # AdstackLaunch of each launch since the last status check
        # per task: None (host-given range), ('device', args pipeline, args buffer) or
        # ('host', HostBounds) for a range read from globals
        self.ranges = ranges
        self.ordered = tuple(t.ordered for t in tl.tasks)  # one dispatch per iteration
        self.variants = {key: self.parts()}

    def parts(self) -> tuple:
        """What differs between variants."""
        return (self.key, self.blob, self.tasks, self.pipelines, self.ranges, self.views,
                self.own)

    def use(self, parts) -> None:
        """Make variant `parts` (from `parts()`) the current one."""
        (self.key, self.blob, self.tasks, self.pipelines, self.ranges, self.views,
         self.own) = parts


class _Timestamps:
    """`BackendBase.device_timer` where the runtime has device timestamps: a pair per launch."""

    def __init__(self, rt):
        self.rt = rt

    def begin(self):
        return self.rt.timestamp_begin()

    def end(self, token) -> None:
        self.rt.timestamp_end(token)

    def collect(self) -> dict:
        return {k: ns * 1e-9 for k, ns in self.rt.take_timestamps().items()}


class SpirvBackend(BackendBase):
    """The SPIR-V backends' glue; a subclass gives its runtime (`_make_runtime`), its SPIR-V
    `profile`, availability and the name of its binding limit, and may add checks before
    (`_check_kernel`) and after (`_check_module`) code generation."""
    name = ""

    @property
    def profile(self):
        """The `spirv_codegen.profile.Profile` the modules are written for."""
        raise NotImplementedError

    def _make_runtime(self):
        """The `gfx_runtime.protocol.GfxRuntime` of this backend (GfxError when it cannot)."""
        raise NotImplementedError

    def _check_kernel(self, tl, abi) -> None:
        """User errors this backend finds in a task list before code generation: an 8- / 16-bit
        type the device lacks a feature for (`small_types`)."""
        from . import small_types
        small_types.check(tl, self.spirv_caps, f"{self.name} ({self.caps.name})")

    def _emulator_bindings(self, bmap) -> int:
        """Storage buffers a task with buffer map `bmap` binds only because the device under an
        emulation has smaller bindings than the device emulated (more windows per field):
        counted against the device's own limits, not the emulated one's. None by default
        (Metal emulated on lavapipe: `metal.py`)."""
        return 0

    def _check_module(self, name: str, mod, emulator: int = 0, stored: bool = False) -> None:
        """Called on every module (a SpirvTask) before the runtime sees it; spirv-val when
        validating. `emulator`: `_emulator_bindings` of its task; `stored`: the module comes
        from the offline cache (checked when it was stored, under the same `cache_features`)."""
        from spirv_codegen import validate
        if self.validate:
            validate(mod.words)

    def _pipeline(self, mod, label: str = "", tail: bytes = b"", first_tail_word: int = 0,
                  emulator: int = 0):
        """`mod`'s pipeline; its specialization constants (root offsets: `mod.spec_words`) take
        their values from the program's argument tail, whose first word is argument word
        `first_tail_word`. `emulator`: `_emulator_bindings` of its task."""
        spec = tuple((w, offset_word(tail, w - first_tail_word))
                     for w in mod.spec_words)  # the tail's words: `buffers.offset_words`
        return self.rt.pipeline(mod.words, mod.num_bindings, mod.push_constant_bytes,
                                uniform=mod.uniform_bindings, readonly=mod.readonly_bindings,
                                label=label, arguments=True,  # binding 0: the arguments
                                specialization=spec, emulator_bindings=emulator)

    # the binding limit, as the error names it
    LIMIT_NAME = "per shader stage"

    def _heap_row_bytes(self, layout) -> int:
        """Bytes of one adstack heap row in the largest heap buffer a launch binds."""
        if self.profile.single_heap:
            return max(layout.stride_float + layout.stride_int, 1)
        return max(layout.stride_float, layout.stride_int, 1)

    def _heaps(self, layout, rows: int) -> list:
        """The adstack heap buffers a launch binds after the metadata, grown for `rows` rows:
        float and int heaps, or one heap of both rows (profile `single_heap`)."""
        if self.profile.single_heap:
            need = (layout.stride_float + layout.stride_int) * rows
            self.heap_float = self._grown_heap(self.heap_float, need)
            return [self.heap_float]
        hf = self.heap_float = self._grown_heap(self.heap_float, layout.stride_float * rows)
        hi = self.heap_int = self._grown_heap(self.heap_int, layout.stride_int * rows)
        return [hf, hi]

    def __init__(self, state):
        super().__init__(state)
        from spirv_codegen import SpirvCaps, dispatch_geometry
        self._dispatch_geometry = dispatch_geometry  # per launch: no import statement there
        try:
            self.rt = self._make_runtime()
        except GfxError as e:
            raise _user_error(e) from None
        self.caps = self.rt.caps
        self.spirv_caps = SpirvCaps.from_device(self.caps, self.profile)
        from spirv_codegen import validator

        from .. import options
        validator.configure(options.get("SPIRAD_SPIRV_TOOLS_LIB"))
        self.validate = state.debug or self.rt.validation or options.get("SPIRAD_VALIDATE_SPIRV")
        self.bounds_check = bool(state.debug)
        self.oob_check = default_checks(state)  # the default bounds checks (base.default_checks)
        self.launched: list = []  # programs with work since the last status check
        self.pending = None       # an error found early, raised at the next sync
        self.heap_float = self.heap_int = None  # adstack heaps, grown before launches
        self.roots = RootBuffers(self.rt, self.caps.max_storage_buffer_range,  # fields' memory
                                 self._max_buffer_bytes(), self.caps.name)
        self.gpu_sizer = GpuSizer(self, self.caps.loop_iteration_cap)

    def _max_buffer_bytes(self) -> int:
        """The largest buffer the runtime allocates (a field larger than one binding must fit)."""
        return self.caps.max_buffer_size

    def capabilities(self) -> dict:
        return {"f64": self.caps.has_f64, "i64": self.caps.has_i64}

    def device_name(self) -> str:
        return self.caps.name

    def device_timer(self):
        """Timestamp queries around each launch's dispatches (`gfx_runtime.vulkan.timestamps`)."""
        if self.caps.timestamp_period_ns <= 0:
            return None
        return _Timestamps(self.rt)

    @_runtime_errors_as_user_errors
    def allocate(self, nbytes):
        return self.rt.alloc(max(int(nbytes), 16))

    @_runtime_errors_as_user_errors
    def allocate_field(self, nbytes, key=None, name="", tree=None):
        return self.roots.place(nbytes, key, name, tree=tree)

    def release_tree(self, tree) -> None:
        self.roots.release(tree)

    @_runtime_errors_as_user_errors
    def allocate_ndarray(self, nbytes):
        """In an arena (a root chunk, freed with the ndarray), or, larger than one chunk, a
        buffer of its own (bound directly, counted against the binding limit)."""
        sl = self.roots.place_ndarray(nbytes)
        return sl if sl is not None else self.rt.alloc(max(int(nbytes), 16))

    def storage_parts(self, storage) -> tuple:
        if type(storage) is RootSlice:
            if storage.chunk.windows:  # its buffer is larger than one binding
                raise SpiradDeviceError(
                    f"field {storage.name or '?'} takes {storage.nbytes} bytes, more than one "
                    f"storage binding on {self.caps.name} ({self.roots.limit} bytes): kernels "
                    f"bind it in windows, but checkpointed() state and the GPU stack sizer bind "
                    f"a field's buffer whole; use smaller fields there")
            return storage.chunk.buffer, storage.offset
        return storage, 0

    @_runtime_errors_as_user_errors
    def view(self, storage, np_dtype, shape):
        count = math.prod(shape)  # exact Python ints; np.prod cost ~2 us on every status read
        if type(storage) is RootSlice:
            return storage.chunk.buffer.view(np_dtype, count, storage.offset).reshape(shape)
        return storage.view(np_dtype, count).reshape(shape)

    @_runtime_errors_as_user_errors
    def compile(self, tl, abi):
        self._check_kernel(tl, abi)
        placement = self._placement(tl, abi)
        return self._compile(tl, abi, placement, self._default_key(abi, placement))

    def _default_key(self, abi, placement) -> tuple:
        """The variant compiled first: every ndarray in the arena chunk of the status words
        (the first chunk: where ndarrays go while it has room)."""
        c = placement[None].chunk.index
        return tuple(c for r in abi.bindings if r.kind == "ndarray")

    def _select(self, p: SpirvProgram, storages) -> None:
        """Switch `p` to the variant for the chunks `storages`' ndarrays sit in (built at
        first use: a new chunk assignment is new code, a new offset is not)."""
        key = []
        for k in p.nd_refs:
            st = storages[k]
            if type(st) is RootSlice:
                if st.chunk.windows:
                    raise RuntimeError(f"ndarray storage {st!r} in a windowed chunk")
                key.append(st.chunk.index)
            else:
                key.append(-1)
        key = tuple(key)
        if key != p.key:
            parts = p.variants.get(key)
            if parts is None:
                parts = p.variants[key] = self._compile(p.tl, p.abi, p.placement, key).parts()
            p.use(parts)
        p.last_storages = storages

    def _compile(self, tl, abi, placement, key):
        from spirv_codegen import compile_range_args, compile_tasks
        where = self._map_inputs(abi, placement, key)
        maps = self._buffer_maps(tl, abi, where)
        read = [i for i, r in enumerate(abi.device_ranges) if r]
        on_device = frozenset(i for i in read if not self.bounds_check and not task_stacks(tl.tasks[i])
                              and not tl.tasks[i].ordered)  # ordered: one dispatch per iteration
        self._check_bindings(tl, abi, maps, on_device)  # before code generation: a user error
        tasks = compile_tasks(tl, abi, self.spirv_caps, bounds_check=self.bounds_check,
                              device_ranges=on_device, bmap=maps, oob_check=self.oob_check)
        range_mods = {i: compile_range_args(tl, i, abi, self.spirv_caps, maps[i])
                      for i in sorted(on_device)}
        for i, m in list(enumerate(tasks)) + list(range_mods.items()):
            # spirv-val, and the profile's own checks
            self._check_module(tl.name, m, self._emulator_bindings(maps[i]))
        return self._build(tl, abi, (tasks, range_mods, maps, where, key), placement)

    def _placement(self, tl, abi) -> dict:
        """abi index -> RootSlice of every field and temporary, and under None the program's
        status words (temporaries and status get new slices: one per compiled program). Fields
        were allocated by the driver before compiling."""
        out = {None: self._guarded(STATUS_BYTES, "status")}
        for k, ref in enumerate(abi.bindings):
            if ref.kind == "field":
                sl = self.roots.by_key.get(ref.key)
                if sl is None:
                    raise RuntimeError(f"field {ref.name} of kernel {tl.name} has no memory yet")
                out[k] = sl
            elif ref.kind == "temp":
                out[k] = self._guarded(8, "temp")
        return out

    def _guarded(self, nbytes: int, name: str):
        """A root slice of spirad's own words (status, kernel temporaries) with STATUS_GUARD
        unused bytes on either side: a user's write just past the end of the field before it
        (or before the start of the one after it), possible under `init(check_bounds=False)`,
        lands in the guard, never on these words."""
        sl = self.roots.place(nbytes + 2 * STATUS_GUARD)
        return RootSlice(sl.chunk, sl.offset + STATUS_GUARD, nbytes, name)

    def _map_inputs(self, abi, placement, key) -> tuple:
        """What the buffer maps depend on besides the task list, the ABI and the profile: the
        root chunk of each placed ref and of each ndarray in an arena (`key`: per ndarray
        binding, its chunk or -1), the status words' chunk and the windowed chunks."""
        chunk_of = {k: sl.chunk.index for k, sl in placement.items() if k is not None}
        nd = [k for k, r in enumerate(abi.bindings) if r.kind == "ndarray"]
        chunk_of.update((k, c) for k, c in zip(nd, key) if c >= 0)
        return (chunk_of, placement[None].chunk.index, self.roots.windowed())

    def _buffer_maps(self, tl, abi, where) -> tuple:
        """Per task, the `spirv_codegen.buffers.BufferMap` of what it binds: the root views and
        ndarrays it touches (offsets: the kernel's); `where`: `_map_inputs`."""
        from spirv_codegen.buffers import root_map, task_map
        chunk_of, status_chunk, windows = where
        bmap = root_map(tl, abi, self.spirv_caps, chunk_of, status_chunk=status_chunk,
                        windows=windows)
        return tuple(task_map(bmap, t, abi, self.spirv_caps) for t in tl.tasks)

    def _check_bindings(self, tl, abi, maps, on_device) -> None:
        """Every storage buffer a launch of each task binds, counted before the device (or wgpu)
        sees a module: a kernel over the limit is a user error naming what to change."""
        from spirv_codegen.buffers import task_refs
        from spirv_codegen.lower import task_bindings
        prof = self.profile
        limit = self.caps.max_per_stage_storage_buffers
        for i, t in enumerate(tl.tasks):
            bmap = maps[i]
            # as the device emulated would bind it (the emulator's extra windows: `_check_module`)
            n = task_bindings(t, bmap, prof, i in on_device) - len(prof.uniform_bindings) - \
                self._emulator_bindings(bmap)
            if n <= limit:
                continue
            parts = ([] if prof.args_uniform else ["the argument buffer"]) + \
                ([] if bmap.status_chunk >= 0 else ["status"])
            refs = task_refs(t, abi)
            n_fields = sum(1 for k in refs if abi.bindings[k].kind == "field")
            n_arena = sum(1 for k in refs if abi.bindings[k].kind == "ndarray" and bmap.in_root(k))
            n_views = bmap.num_view_bindings
            wins = "" if not bmap.windows else (
                f", fields larger than one binding taking one per window of "
                f"{bmap.windows[0][2]} bytes")
            arena = f", its {n_arena} ndarrays/gradients in arenas" if n_arena else ""
            parts.append(f"{n_views} root-buffer view(s) holding its {n_fields} "
                         f"fields/gradients{arena} and the status words{wins}")
            names = [abi.bindings[k].name for k in bmap.own]
            if names:
                parts.append(f"{len(names)} ndarrays with buffers of their own, larger than one "
                             f"arena ({self.roots.limit} bytes) or imported ({', '.join(names)})")
            if task_stacks(t):
                parts.append(f"{prof.adstack_buffers()} autodiff-stack buffers")
            if i in on_device:
                parts.append("the range arguments of its parallel loop (read from memory)")
            args = list(dict.fromkeys(nm.split(".")[0] for nm in names))
            if args:
                advice = (f"pass fewer such ndarrays: split the large ndarray arguments "
                          f"{', '.join(args)} into ones of at most {self.roots.limit} bytes "
                          f"(they then share arenas), or make them fields")
            else:
                advice = "split the kernel into kernels that touch fewer fields"
            raise SpiradDeviceError(
                f"kernel {tl.name} needs {n} storage buffers in task {t.name or i} "
                f"({', '.join(parts)}) but {self.caps.name} allows {limit} {self.LIMIT_NAME}; "
                f"{advice}")

    def export_program(self, program):
        return program.blob

    @_runtime_errors_as_user_errors
    def import_program(self, tl, abi, blob):
        tasks, range_mods, maps, where, key = blob
        placement = self._placement(tl, abi)
        key = self._default_key(abi, placement)
        if self._map_inputs(abi, placement, key) != where:
            # its fields sit in other root chunks than where it was compiled: new code (offsets
            # alone never make a stored module stale: they are arguments, or on Vulkan the
            # pipeline's specialization constants, `_pipeline`). The same inputs give
            # the same maps (the task list, ABI and profile are in the cache key): no walk here
            return self._compile(tl, abi, placement, key)
        for i, m in list(enumerate(tasks)) + list(range_mods.items()):
            # a stored module meets this backend's profile too
            self._check_module(tl.name, m, self._emulator_bindings(maps[i]), stored=True)
        return self._build(tl, abi, blob, placement)

    def cache_features(self) -> tuple:
        return (self.name, self.profile, self.caps, self.spirv_caps, self.bounds_check, self.validate,
                ("oob", self.oob_check))

    def _build(self, tl, abi, blob, placement):
        """The program of SPIR-V modules `blob` = (tasks, {task: range-arguments module}, the
        BufferMaps they were compiled for, their `_map_inputs`); `placement`: abi index ->
        RootSlice."""
        from spirv_codegen.buffers import offset_words
        tasks, range_mods, maps, _, key = blob
        label = lambda m: f"kernel {tl.name} task {m.name}"  # noqa: E731
        status = placement[None]  # the status words: in a root chunk
        tail = offset_words(maps[0], abi, {k: sl.offset for k, sl in placement.items()},
                            status.offset) if maps else b""
        first = abi.arg_buffer_size // 4  # the tail's first argument word (`buffers.root_map`)
        extra = [self._emulator_bindings(m) for m in maps]
        pipes = [self._pipeline(t, label(t), tail, first, extra[i]) for i, t in enumerate(tasks)]
        ranges = [None] * len(tasks)
        for i, t in enumerate(tl.tasks):
            mod = range_mods.get(i)
            if mod is not None:
                ranges[i] = ("device", self._pipeline(mod, label(mod), tail, first, extra[i]),
                             self.rt.alloc(4 * RANGE_ARGS_WORDS))
            elif abi.device_ranges[i]:
                ranges[i] = ("host", HostBounds(tl, t, abi))
        temps = {k: placement[k] for k, r in enumerate(abi.bindings) if r.kind == "temp"}
        # per task: what its view bindings bind (root chunks, or the windows of a windowed
        # chunk) and the abi indices of its own buffers
        views = tuple(tuple(b for c, _ in m.views for b in bindings_of(self.roots.chunks[c]))
                      for m in maps)
        nd_words = tuple((k, 4 * w - abi.arg_buffer_size, abi.bindings[k].dtype.nbytes)
                         for k, w in enumerate(maps[0].offset_words if maps else ())
                         if w >= 0 and abi.bindings[k].kind == "ndarray")
        return SpirvProgram(tl, abi, self.bounds_check, blob, pipes, status, temps, ranges, views,
                            tuple(m.own for m in maps), tail, key, placement, nd_words)

    def _small_buffer(self, p: SpirvProgram, key, data: bytes, tail: bytes = b""):
        """A device buffer holding `data` + `tail`, reused while `key` (its contents) is
        unchanged (the tail is appended only when a new buffer is written)."""
        buf = p.arg_bufs.get(key)
        if buf is not None:
            return buf
        data = data + tail
        if len(p.arg_bufs) >= _ARG_CACHE_MAX:
            self.sync()  # all recorded launches done: their argument buffers are free again
            p.spare.extend(p.arg_bufs.values())
            p.arg_bufs.clear()
        buf = p.spare.pop() if p.spare else self.rt.alloc(256, zero=False)
        if len(data) > buf.nbytes:
            buf = self.rt.alloc(len(data), zero=False)
        buf.write_unused(data)  # new, or spare since the sync above: no pending work reads it
        p.arg_bufs[key] = buf
        return buf

    def _storage_of(self, p: SpirvProgram, storages, k: int):
        """The storage of abi binding k at a launch (temporaries: the program's own)."""
        st = storages[k]
        return st if st is not None else p.temps[k]

    def _grown_heap(self, cur, nbytes: int):
        """`cur`, or a larger heap buffer when it is smaller than `nbytes` (the old one is freed
        after its last use)."""
        size = cur.nbytes if cur is not None else 0
        if nbytes > size or cur is None:
            limit = self.caps.max_storage_buffer_range
            new = min(grown(size, max(nbytes, 16)), max(limit, nbytes))
            return self.rt.alloc(new, zero=False)
        return cur

    def ordered_chunk(self) -> int | None:
        """lavapipe ends an invocation's loops after `loop_iteration_cap` iterations: a quarter
        of that per ordered iteration leaves room for a few inner loop visits each."""
        cap = self.caps.loop_iteration_cap
        return None if cap is None else max(1, cap // 4)

    def heap_bytes(self) -> tuple:
        return tuple(h.nbytes if h is not None else 0 for h in (self.heap_float, self.heap_int))

    @_runtime_errors_as_user_errors
    def read(self, storage, nbytes: int, offset: int = 0) -> np.ndarray:
        if type(storage) is RootSlice:
            return storage.chunk.buffer.read(storage.offset + offset, nbytes)
        return storage.read(offset, nbytes)

    @_runtime_errors_as_user_errors
    def write(self, storage, data, offset: int = 0) -> None:
        if type(storage) is RootSlice:
            storage.chunk.buffer.write(np.ascontiguousarray(data), storage.offset + offset)
            return
        storage.write(np.ascontiguousarray(data), offset)

    def adstack_row_fits(self, layout) -> bool:
        return self._heap_row_bytes(layout) <= self.caps.max_storage_buffer_range

    def adstack_rows(self, program, task, n) -> int:
        return max(1, min(ROWS_CAP, n if n is not None else ROWS_CAP))

    def plan_adstack(self, program, ti, sized):
        """The bytes of the larger heap row, and the metadata buffer to bind, else the metadata
        bytes to upload. The GPU sizer wrote its result's words into `sized.device_meta`: bound
        as it is."""
        lay = sized.layout
        per_row = self._heap_row_bytes(lay)
        if sized.device_meta is not None:
            return AdstackTaskPlan(lay, sized.device_meta, row_bytes=per_row)
        return AdstackTaskPlan(lay, words=np.array(lay.metadata() or [0, 0], dtype=np.uint32)
                               .tobytes(), row_bytes=per_row)

    def launch_arguments(self, program: SpirvProgram, argbuf: bytes, storages) -> bytes:
        """The argument bytes, then the program's root offsets (`spirv_codegen.buffers`) with
        the element offset of each ndarray in an arena (0 for one in its own buffer): what
        binding 0 holds. Made once per plan, so the runtime sees one bytes object per set of
        argument values and places it once (`gfx_runtime.arena`)."""
        if not program.nd_words:
            return argbuf + program.arg_tail
        return argbuf + patch_offset_words(program.arg_tail, (
            (pos, storages[k].offset // size if type(storages[k]) is RootSlice else 0)
            for k, pos, size in program.nd_words))

    def _chunk_dispatches(self, t, b, e, chunk, maxg):
        """(workgroups, push constants) of each dispatch of task `t` over iterations [b, e) in
        chunks of `chunk` (a serial task: one workgroup of one thread): what an eager launch
        dispatches and what a recorded graph replays (spirv_replay)."""
        for c in range(b, e, chunk):
            ce = min(c + chunk, e)
            if t.kind == "serial":
                groups, tpr = (1, 1, 1), 1
            else:
                groups, tpr = self._dispatch_geometry(ce - c, maxg, t.local_size)
            yield groups, pack_push_constants(c, ce, tpr)

    @_runtime_errors_as_user_errors
    def launch(self, p: SpirvProgram, storages, argbuf, ranges, adstack=None):
        if storages is not p.last_storages:  # another plan: its ndarrays may sit elsewhere
            self._select(p, storages)
        maxg = self.caps.max_compute_work_group_count
        if p.bounds is not None and len(p.recent_args) < _RECENT_ARGS_MAX \
                and argbuf not in p.recent_args:
            p.recent_args.append(argbuf)  # ndarray shapes for a bounds error
        if adstack is not None and len(p.adstack_launches) < 64:
            p.adstack_launches.append(adstack)  # since the last sync: names the needed size
        plans = None if adstack is None else adstack.tasks
        for ti, (t, pipe, rng) in enumerate(zip(p.tasks, p.pipelines, ranges)):
            bufs = [argbuf]  # the status words are in a root chunk: one of the views
            for c in p.views[ti]:  # root chunks: their buffers now (a chunk grows by a new one)
                bufs.append(c.buffer)
            for k in p.own[ti]:
                bufs.append(storages[k])
            if rng is None:
                how = p.ranges[ti]
                if how[0] == "device":  # evaluated and dispatched on the device
                    _, args_pipe, args_buf = how
                    rbufs = bufs + [args_buf]
                    unused = bytes(PUSH_CONSTANT_BYTES)  # (the range comes from args_buf)
                    self.rt.dispatch(args_pipe, rbufs, (1, 1, 1), unused)
                    self.rt.dispatch(pipe, rbufs, (1, 1, 1), unused, indirect=(args_buf, 0))
                    continue
                self.rt.flush()  # the range reads what earlier work wrote: evaluate it now
                rng = how[1].evaluate(argbuf, lambda k, ref, shape: self.view(
                    self._storage_of(p, storages, k), ref.dtype.np, shape))
            b, e = rng
            n = e - b
            if n <= 0:
                continue
            stacks = p.stacks[ti]
            tbufs = bufs
            chunk = n
            if stacks:
                task_plan = plans[ti]
                layout, per_row = task_plan.layout, task_plan.row_bytes
                meta, meta_bytes = task_plan.meta, task_plan.words
                limit = self.caps.max_storage_buffer_range
                rows = max(1, min(ROWS_CAP, n, limit // per_row))
                if per_row > limit:
                    raise SpiradDeviceError(
                        f"kernel {p.name}: one thread's autodiff stacks take {per_row} bytes, more than "
                        f"one storage buffer may hold on {self.caps.name} ({limit} bytes)")
                chunk = n if t.kind == "serial" else rows
                if meta is None:
                    meta = self._small_buffer(p, (meta_bytes,), meta_bytes)
                tbufs = bufs + [meta] + self._heaps(layout, rows)
            if p.ordered[ti]:  # iterations one after another (passes/deterministic)
                chunk = 1
            if len(tbufs) < t.num_bindings:
                raise RuntimeError(f"task {t.name} declares {t.num_bindings} bindings, "
                                   f"the backend has {len(tbufs)} buffers for it")
            for groups, push in self._chunk_dispatches(t, b, e, chunk, maxg):
                self.rt.dispatch(pipe, tbufs[:t.num_bindings], groups, push)
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
    def replay_entry(self, program, storages, argbuf, ranges):
        """A launch graph's launch, replayed with its neighbours as one recorded command buffer
        (Vulkan) or as their dispatches made once (wgpu), unless it needs a host step
        (`spirv_replay`)."""
        return spirv_replay.replay_entry(self, program, storages, argbuf, ranges)

    @_runtime_errors_as_user_errors
    def replay_kept(self, entries, keep: dict) -> None:
        spirv_replay.replay(self, entries, keep)

    def replay(self, entries) -> None:
        raise RuntimeError("SPIR-V launch graph records are replayed with the graph's keep "
                           "(replay_kept)")

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
        self.rt.flush()
        for p in launched:
            st = p.status  # a RootSlice (the runtime's view: no wrapper, no reshape per sync)
            words = st.chunk.buffer.view(np.uint32, STATUS_WORDS, st.offset)
            recent, p.recent_args = p.recent_args, []
            launches, p.adstack_launches = p.adstack_launches, []
            if words[_CODE]:
                saved = words.copy()
                words[:] = 0
                raise status_error(p, saved, recent, launches, self.caps)

    def take_validation_messages(self):
        return self.rt.take_validation_messages()

    @_runtime_errors_as_user_errors
    def close(self):
        self.rt.close()
