"""`WgpuRuntime`: the wgpu counterpart of `gfx_runtime.vulkan.VulkanRuntime` (same calls).

    rt = WgpuRuntime(emulate=False)       GfxUnavailable without a (Metal) adapter
    rt.caps -> WgpuCaps
    rt.alloc(nbytes, zero=True) -> Buffer  (wgpu zero-fills every new buffer)
    rt.pipeline(spirv, num_bindings, push_constant_bytes=0, uniform=(), readonly=(), label="",
                arguments=False)          -> Pipeline   cached by content
    rt.dispatch(pipeline, buffers, groups, push_constants=b"", indirect=None)
    rt.window(buffer, offset, nbytes) -> Window   bytes of `buffer` bound as a buffer of their own
    rt.copy(src, dst, nbytes, src_offset=0, dst_offset=0)   buffer to buffer, after pending work
    rt.flush() / rt.sync(), rt.take_validation_messages(), rt.close()

Batching: dispatches are recorded into one compute pass of one command encoder (WebGPU orders
storage accesses between dispatches of a pass), submitted at `flush` or past `max_batch`
dispatches. Host access to a buffer that the unsubmitted pass binds flushes first, because
`queue.write_buffer` / `read_buffer` are ordered before the next submission. Push constants use
wgpu's `immediates`. Bind groups are cached per (pipeline layout, buffers). A buffer may be larger than
the largest binding (up to the device's max-buffer-size); it is then bound through windows
(`window`), and binding it whole fails with an error naming the limit. Pipeline, bind group
and immediates persist within a pass, so a dispatch sets only what differs from the previous
one (each wgpu-native call costs microseconds).

Argument blocks (pipelines made with `arguments=True`; the bytes come as buffers[0]) are staged
on the host, each at an offset of one arena buffer placed by `gfx_runtime.arena` (the rules the
Vulkan runtime follows too), and bound at that dynamic offset, so every launch over the same
buffers shares one bind group whatever its arguments. The staged bytes are written with one `queue.write_buffer` just before the pass is submitted; the queue orders
that write after every earlier submission, so the arena is refilled from its start with each
pass and nothing waits. A pass whose blocks fill the arena is submitted early (without waiting).

Every SPIR-V module must already have passed spirad's Metal-profile check: naga panics on some
modules, which kills the process before Python sees an error.

Errors: wgpu validates a pass when its encoder is finished, so a validation error (which spirad's
checks are meant to prevent) surfaces at `flush`, not at the dispatch that caused it. The
runtime then drops the whole batch (nothing of it ran), resets its pass state so later work
runs as in a fresh process, and raises GfxDeviceError naming the pipelines (`label`: the
kernel and task) the batch held and wgpu's cause.
"""
from __future__ import annotations

import hashlib
from operator import attrgetter

from ..arena import ArgumentArena, block_range
from ..errors import GfxDeviceError
from ..protocol import GfxRuntime
from .buffer import Buffer, Window
from .errors import wgpu_errors
from .caps import caps_of, device_limits, find_adapter, pipeline_buffer_slots

MAX_BATCH = 4096
_BIND_CACHE_MAX = 4096
# the unsubmitted pass keeps every buffer it binds alive, and wgpu frees a destroyed buffer once
# the work using it is done: past this many bytes allocated while a pass is open, the work is
# submitted and waited for, so a loop that creates and drops ndarrays without ever syncing
# holds a bounded amount of memory (a program that allocates nothing in its loop never waits)
MAX_PENDING_BYTES = 64 << 20
ARENA_BYTES = 1 << 20  # argument blocks of one pass (MAX_BATCH blocks of up to 256 bytes)


class Pipeline:
    __slots__ = ("handle", "num_bindings", "push_constant_bytes", "layout_key", "bgl", "label",
                 "arguments")

    def __init__(self, handle, num_bindings, push_constant_bytes, layout_key, bgl, label="",
                 arguments=False):
        self.handle, self.num_bindings = handle, num_bindings
        self.push_constant_bytes, self.layout_key, self.bgl = push_constant_bytes, layout_key, bgl
        self.label = label
        self.arguments = arguments  # binding 0 is an argument block given per dispatch


_HANDLE = attrgetter("handle")


class StagedArena(ArgumentArena):
    """The argument arena of the unsubmitted pass: blocks staged in host memory, written to
    `buffer` with one `queue.write_buffer` when the pass is submitted (`WgpuRuntime._submit`)."""
    __slots__ = ("buffer", "staged", "written")

    def __init__(self, buffer, align: int):
        super().__init__(buffer.nbytes, align)
        self.buffer = buffer
        self.staged = bytearray(buffer.nbytes)
        self.written = b""  # what the buffer holds from its start: the last upload

    def _write(self, offset: int, data: bytes) -> None:
        self.staged[offset:offset + len(data)] = data

    def upload(self, queue, used: int) -> None:
        """Write the staged bytes [0, used) to the buffer (ordered after every earlier
        submission), unless it holds them already: a pass with the blocks of the one before (a
        `launch; sync()` loop with unchanged arguments) costs no `write_buffer` (microseconds of
        wgpu-py per call). Nothing else writes the buffer, and shaders only read it."""
        data = bytes(memoryview(self.staged)[:used])
        if self.written.startswith(data):
            return
        self.written = b""  # unknown until the write succeeds
        queue.write_buffer(self.buffer.handle, 0, data)
        self.written = data


class WgpuRuntime(GfxRuntime):
    """The `gfx_runtime.protocol.GfxRuntime` contract over wgpu (no device timestamps: wgpu's
    timestamp queries are an optional feature)."""
    validation = False  # wgpu validates every call itself and raises

    def __init__(self, emulate: bool = False):
        import wgpu
        self._wgpu = wgpu
        self.closed = True
        adapter = find_adapter(emulate)
        self.caps = caps_of(adapter, emulate)
        try:
            self._device = adapter.request_device_sync(
                required_features=sorted(self.caps.features),
                required_limits=device_limits(adapter, self.caps))
        except Exception as e:
            raise GfxDeviceError(f"wgpu could not create a device on {self.caps.name}: {e}") from None
        self._queue = self._device.queue
        self.closed = False
        self._usage = (wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC |
                       wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.INDIRECT |
                       wgpu.BufferUsage.UNIFORM)
        self._bgls: dict = {}        # num_bindings -> bind group layout
        self._layouts: dict = {}     # (num_bindings, push bytes) -> pipeline layout
        self._pipelines: dict = {}
        self._bind_groups: dict = {}
        self._groups_of: dict = {}   # id(buffer handle) -> keys of the cached groups binding it
        self._encoder = self._pass = None
        self._pending: set = set()   # id() of buffers bound by the unsubmitted pass
        self._pending_refs: list = []
        self._alloc_bytes = 0        # bytes allocated since the last flush (MAX_PENDING_BYTES)
        self._labels: dict = {}      # labels of the pipelines dispatched in the unsubmitted pass
        self._count = 0
        self._fence = None
        self.max_batch = MAX_BATCH
        lim = self._device.limits
        self._args_align = max(16, int(lim["min-uniform-buffer-offset-alignment"]),
                               int(lim["min-storage-buffer-offset-alignment"]))
        self._arena = None           # StagedArena, made by the first argument block

    # -- buffers -------------------------------------------------------------------------------
    def alloc(self, nbytes: int, zero: bool = True, *, host_visible=None) -> Buffer:
        self._check_open()
        nbytes = int(nbytes)
        if nbytes > self.caps.max_buffer_size:
            raise GfxDeviceError(
                f"a buffer of {nbytes} bytes exceeds the buffer size limit of {self.caps.name} "
                f"({self.caps.max_buffer_size} bytes); use smaller fields/ndarrays")
        size = max(16, (nbytes + 15) & ~15)  # whole uvec4s: a uniform binding reads them
        self._alloc_bytes += size
        if self._alloc_bytes > MAX_PENDING_BYTES:
            self.flush()  # dropped buffers of the work so far are freed (module comment)
            self._alloc_bytes = size
        try:
            h = self._device.create_buffer(size=size, usage=self._usage)
        except Exception as e:
            raise GfxDeviceError(f"wgpu could not allocate {nbytes} bytes: {e}") from None
        return Buffer(self, h, nbytes)

    def window(self, buffer: Buffer, offset: int, nbytes: int) -> Window:
        """Bytes [offset, offset + nbytes) of `buffer`, bindable in `dispatch` like a buffer."""
        self._check_open()
        buffer._range(offset, nbytes)
        if offset % 256 or nbytes <= 0 or nbytes % 4 or nbytes > self.caps.max_storage_buffer_range:
            raise GfxDeviceError(
                f"a window of {nbytes} bytes at byte {offset}: the offset must be a multiple of "
                f"256, the size positive, whole words and at most the storage-buffer binding "
                f"limit of {self.caps.name} ({self.caps.max_storage_buffer_range} bytes)")
        return Window(buffer, offset, nbytes)

    def _before_host_access(self, buf: Buffer) -> None:
        self._check_open()
        if id(buf) in self._pending:
            self.flush()

    def _release(self, buf: Buffer) -> None:
        """Destroy `buf` and drop the cached bind groups that bind it (else each dropped
        ndarray left one group, a few KB, until the cache filled: memory that grew per round
        of an ndarray churn)."""
        if id(buf) in self._pending:
            self.flush()
        self._forget(buf.handle)
        buf.handle.destroy()

    def _forget(self, handle) -> None:
        """Drop the cached bind groups that bind `handle`."""
        for key in self._groups_of.pop(id(handle), ()):
            hit = self._bind_groups.pop(key, None)
            if hit is not None:
                for h in hit[1]:
                    keys = self._groups_of.get(id(h))
                    if keys is not None:
                        keys.discard(key)
                        if not keys:
                            del self._groups_of[id(h)]

    # -- pipelines -----------------------------------------------------------------------------
    def _bgl(self, n: int, uniform=(), readonly=(), arguments=False):
        key = (n, tuple(uniform), tuple(readonly), arguments)
        if key not in self._bgls:
            wgpu = self._wgpu
            kind = lambda i: (wgpu.BufferBindingType.uniform if i in uniform  # noqa: E731
                              else wgpu.BufferBindingType.read_only_storage if i in readonly
                              else wgpu.BufferBindingType.storage)
            self._bgls[key] = self._device.create_bind_group_layout(entries=[
                {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE,
                 "buffer": {"type": kind(i), "has_dynamic_offset": arguments and i == 0}}
                for i in range(n)])
        return self._bgls[key]

    def _check_buffer_counts(self, num_bindings: int, uniform: int, push_constant_bytes: int,
                             emulator_bindings: int = 0):
        """wgpu's per-stage storage / uniform buffer limits and, on Metal, the buffer argument
        table (`caps.pipeline_buffer_slots`: wgpu-hal would fail with an opaque out-of-memory
        error), checked before wgpu sees the layout; the table without `emulator_bindings`
        (`pipeline`)."""
        if emulator_bindings and self.caps.emulated_max_binding <= \
                self.caps.max_storage_buffer_range:
            raise RuntimeError("emulator bindings on a device that needs none")
        c, storage = self.caps, num_bindings - uniform
        if storage > c.wgpu_storage_buffers:
            raise GfxDeviceError(
                f"a pipeline with {storage} storage buffers exceeds the limit of "
                f"{c.wgpu_storage_buffers} per stage on {c.name}")
        if uniform > c.wgpu_uniform_buffers:
            raise GfxDeviceError(
                f"a pipeline with {uniform} uniform buffers exceeds the limit of "
                f"{c.wgpu_uniform_buffers} per stage on {c.name}")
        if c.buffer_slots is not None:
            n = pipeline_buffer_slots(num_bindings - emulator_bindings, uniform,
                                      push_constant_bytes)
            if n > c.buffer_slots:
                raise GfxDeviceError(
                    f"a pipeline with {storage} storage buffers takes {n} entries of Metal's "
                    f"buffer argument table ({storage} storage + {uniform} uniform"
                    f"{' + 1 immediates' if push_constant_bytes else ''}"
                    f"{' + 1 for the buffer sizes naga passes' if storage else ''}), which has "
                    f"{c.buffer_slots} per stage on {c.name}")

    def pipeline(self, spirv: bytes, num_bindings: int, push_constant_bytes: int = 0, key=None,
                 entry_point: str = "main", uniform=(), readonly=(), label: str = "",
                 arguments: bool = False, specialization=(),
                 emulator_bindings: int = 0) -> Pipeline:
        """`uniform`: binding numbers that are uniform buffers; `readonly`: storage buffers the
        shader only reads (declared NonWritable; a buffer that is also a dispatch's indirect
        argument must be one); the rest are read-write storage buffers. `label` names the
        pipeline in errors (kernel and task). `arguments`: binding 0 is an argument block that
        each dispatch gives as bytes (bound at a dynamic offset of the arena).
        `emulator_bindings`: storage buffers an emulated Metal binds only for the emulating
        adapter's smaller bindings (`caps.emulated_max_binding`): not in Metal's table."""
        self._check_open()
        if specialization:
            raise RuntimeError("the wgpu runtime takes no specialization constants (the Metal "
                               "profile reads root offsets from the arguments)")
        uniform, readonly, arguments = tuple(uniform), tuple(readonly), bool(arguments)
        if arguments and not num_bindings:
            raise ValueError("a pipeline with an argument block needs binding 0 for it")
        self._check_buffer_counts(num_bindings, len(uniform), push_constant_bytes,
                                  emulator_bindings)
        if push_constant_bytes > self.caps.max_push_constants_size:
            raise GfxDeviceError(f"{push_constant_bytes} push-constant bytes exceed the limit of "
                                 f"{self.caps.max_push_constants_size} on {self.caps.name}")
        k = (hashlib.sha256(bytes(spirv)).digest() if key is None else key, num_bindings,
             push_constant_bytes, entry_point, uniform, readonly, arguments)
        p = self._pipelines.get(k)
        if p is None:
            lk = (num_bindings, push_constant_bytes, uniform, readonly, arguments)
            if lk not in self._layouts:
                self._layouts[lk] = self._device.create_pipeline_layout(
                    bind_group_layouts=[self._bgl(num_bindings, uniform, readonly, arguments)],
                    immediate_size=push_constant_bytes)
            try:
                mod = self._device.create_shader_module(code=bytes(spirv))
                h = self._device.create_compute_pipeline(
                    layout=self._layouts[lk], compute={"module": mod, "entry_point": entry_point})
            except Exception as e:
                what = f" of {label}" if label else ""
                raise GfxDeviceError(f"wgpu rejected the compute shader{what}: {e}") from None
            p = self._pipelines[k] = Pipeline(
                h, num_bindings, push_constant_bytes, lk,
                self._bgl(num_bindings, uniform, readonly, arguments), label, arguments)
        return p

    # -- launches ------------------------------------------------------------------------------
    def _bind_group(self, pipeline: Pipeline, buffers, arg_range: int = 0, plain: bool = False):
        """The cached bind group of `buffers` (with `arg_range` > 0: buffers[0] is the arena,
        bound as an argument block of that many bytes; `plain`: no Window among them, the key
        is made in C: this runs at every dispatch)."""
        if plain:
            key = (pipeline.layout_key, arg_range, *map(id, map(_HANDLE, buffers)))
        else:
            key = (pipeline.layout_key, arg_range) + tuple([
                id(b.handle) if type(b) is not Window else (id(b.buffer.handle), b.offset)
                for b in buffers])
        hit = self._bind_groups.get(key)
        if hit is not None:
            return hit[0]
        if len(self._bind_groups) >= _BIND_CACHE_MAX:
            self._bind_groups.clear()
            self._groups_of.clear()
        entries = []
        for i, b in enumerate(buffers):
            if type(b) is Window:
                res = {"buffer": b.buffer._live(), "offset": b.offset, "size": b.nbytes}
            else:
                res = {"buffer": b._live(), "offset": 0,
                       "size": arg_range if arg_range and i == 0 else b.handle.size}
            if res["size"] > self.caps.max_storage_buffer_range:
                raise GfxDeviceError(
                    f"a buffer of {b.nbytes} bytes bound at binding {i} exceeds the "
                    f"storage-buffer binding limit of {self.caps.name} "
                    f"({self.caps.max_storage_buffer_range} bytes); use smaller fields/ndarrays")
            entries.append({"binding": i, "resource": res})
        bg = self._device.create_bind_group(layout=pipeline.bgl, entries=entries)
        handles = [e["resource"]["buffer"] for e in entries]
        self._bind_groups[key] = (bg, handles)  # holding the handles keeps their ids unique
        for h in handles:
            self._groups_of.setdefault(id(h), set()).add(key)
        return bg

    def _place_arguments(self, data: bytes) -> int:
        """The offset of argument block `data` in the arena for the unsubmitted pass (staged;
        written at `_submit`). A full arena submits the pass first, then starts over; a block
        larger than the arena gets a new one."""
        arena = self._arena
        if arena is not None:
            off = arena.place(data)
            if off is not None:
                return off
            if arena.used:
                self._submit()  # its blocks are written; the arena starts over (reset)
                off = arena.place(data)
                if off is not None:
                    return off
        size = max(ARENA_BYTES, 2 * block_range(len(data)))  # the first block, or a larger one
        arena = self._arena = StagedArena(self.alloc(size), self._args_align)
        return arena.place(data)

    @wgpu_errors
    def dispatch(self, pipeline: Pipeline, buffers, groups, push_constants: bytes = b"",
                 indirect=None) -> None:
        self._check_open()
        if len(buffers) != pipeline.num_bindings:
            raise ValueError(f"pipeline has {pipeline.num_bindings} bindings, got {len(buffers)} buffers")
        if len(push_constants) != pipeline.push_constant_bytes:
            raise ValueError(f"pipeline takes {pipeline.push_constant_bytes} push-constant bytes, "
                             f"got {len(push_constants)}")
        gx, gy, gz = groups if indirect is None else (1, 1, 1)
        mx = self.caps.max_compute_work_group_count
        if not (0 <= gx <= mx[0] and 0 <= gy <= mx[1] and 0 <= gz <= mx[2]):
            raise GfxDeviceError(f"dispatch of {tuple(groups)} workgroups exceeds the limit "
                                 f"{tuple(mx)} of {self.caps.name}; split the launch")
        if indirect is None and not (gx and gy and gz):
            return
        if pipeline.arguments:  # buffers[0]: the argument block's bytes
            data = buffers[0]
            if type(data) is not bytes:  # copied now: the caller may change its object
                data = bytes(data)
            offset = self._place_arguments(data)
            arena = self._arena
            buffers = list(buffers)
            buffers[0] = arena.buffer
        else:
            offset = None
        plain = Window not in map(type, buffers)  # the common case: no list made per dispatch
        owners = buffers if plain else [b.buffer if type(b) is Window else b for b in buffers]
        if offset is not None:
            bg = self._bind_group(pipeline, buffers, arena.last_range, plain)
        for b in owners:
            if b._mirrors is not None:
                b._upload_mirrors()
        if indirect is not None and indirect[0]._mirrors is not None:
            indirect[0]._upload_mirrors()
        if offset is None:
            bg = self._bind_group(pipeline, buffers, 0, plain)
        if self._pass is None:
            self._encoder = self._device.create_command_encoder()
            self._pass = self._encoder.begin_compute_pass()
            self._bound_pipe = self._bound_group = self._bound_pc = self._bound_off = None
        cp = self._pass
        if self._bound_pipe is not pipeline:  # pass state persists between dispatches
            cp.set_pipeline(pipeline.handle)
            self._bound_pipe = pipeline
            self._bound_pc = None  # a new pipeline layout: immediates are set again
            self._labels[pipeline.label] = None
        if self._bound_group is not bg or offset != self._bound_off:
            cp.set_bind_group(0, bg, () if offset is None else (offset,))
            self._bound_group = bg
            self._bound_off = offset
            pending = self._pending  # the pass binds these buffers: kept until it is submitted
            for b in owners:  # (the group bound already in this pass: its buffers are in)
                if id(b) not in pending:
                    pending.add(id(b))
                    self._pending_refs.append(b)
        if push_constants and push_constants != self._bound_pc:
            cp.set_immediates(0, bytes(push_constants), 0, len(push_constants))
            self._bound_pc = push_constants
        if indirect is None:
            cp.dispatch_workgroups(gx, gy, gz)
        else:
            cp.dispatch_workgroups_indirect(indirect[0]._live(), indirect[1])
            self._pending.add(id(indirect[0]))
            self._pending_refs.append(indirect[0])
        self._count += 1
        if self._count >= self.max_batch:
            self._submit()

    def _submit(self) -> None:
        cp, enc, labels = self._pass, self._encoder, self._labels
        self._pass = self._encoder = None  # whatever happens below: the next dispatch starts anew
        self._labels = {}
        self._count = 0
        arena = self._arena
        used = 0
        if arena is not None:
            used = arena.used
            arena.reset()
        try:
            if used:  # the pass's argument blocks, ordered after every earlier submission
                arena.upload(self._queue, used)
            if cp is not None:
                cp.end()
                self._queue.submit([enc.finish()])
        except Exception as e:
            if type(e).__module__.split(".")[0] != "wgpu":
                raise
            names = ", ".join(n for n in labels if n) or "unnamed pipelines"
            raise GfxDeviceError(f"wgpu rejected the batch of work holding {names} (none of it "
                                 f"ran): {e}") from None
        finally:
            self._pending.clear()
            self._pending_refs.clear()  # kept alive until submitted: ids stay unique meanwhile

    @wgpu_errors
    def copy(self, src: Buffer, dst: Buffer, nbytes: int, src_offset: int = 0,
             dst_offset: int = 0) -> None:
        """Copy `nbytes` bytes of `src` (from `src_offset`) into `dst` (at `dst_offset`), after
        the pending work and `src`'s mirrors; `dst`'s mirrors over the range are dropped."""
        self._check_open()
        nbytes = int(nbytes)
        src._range(src_offset, nbytes)
        dst._range(dst_offset, nbytes)
        if not nbytes:
            return
        self.flush()
        if src._mirrors is not None:
            src._upload_mirrors()
        if dst._mirrors is not None:
            dst._upload_mirrors()
        n4 = min((nbytes + 3) & ~3, src.handle.size - src_offset, dst.handle.size - dst_offset)
        if src_offset % 4 or dst_offset % 4 or n4 % 4:
            dst.write(src.read(src_offset, nbytes), dst_offset)
            return
        enc = self._device.create_command_encoder()
        enc.copy_buffer_to_buffer(src._live(), src_offset, dst._live(), dst_offset, n4)
        self._queue.submit([enc.finish()])

    @wgpu_errors
    def flush(self) -> None:
        """Submit the pending pass and wait for the device."""
        if self.closed:
            return
        self._alloc_bytes = 0
        busy = self._pass is not None
        self._submit()
        if busy:
            self._wait()

    def _wait(self) -> None:
        """Block until submitted work is done. wgpu-py 0.32's on_submitted_work_done has a
        broken callback signature, so this polls the device (wgpuDevicePoll, wait=True)."""
        poll = getattr(self._device, "_poll_wait", None)
        if poll is not None:
            poll()
        else:  # a read-back is ordered after all submitted work
            if self._fence is None:
                self._fence = self._device.create_buffer(size=4, usage=self._usage)
            self._queue.read_buffer(self._fence, 0, 4)

    sync = flush

    # -- teardown ------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.closed:
            raise GfxDeviceError("the wgpu runtime is closed (was spirad re-initialised?)")

    def close(self) -> None:
        if self.closed:
            return
        self.flush()
        self.closed = True
        self._bind_groups.clear()
        self._groups_of.clear()
        self._pipelines.clear()
        self._device.destroy()
        self._device = None

    def __repr__(self) -> str:
        return f"<WgpuRuntime {'closed' if self.closed else self.caps.name}>"
