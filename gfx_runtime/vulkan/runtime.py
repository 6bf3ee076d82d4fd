"""`VulkanRuntime`: the one object the spirad driver talks to. It never sees the IR.

Public API (stable; the driver calls exactly this; the contract is `gfx_runtime.protocol`)::

    rt = VulkanRuntime(validation: bool = False, device: str | None = None)
        validation: True enables VK_LAYER_KHRONOS_validation, its warnings and errors are
            collected (spirad passes SPIRAD_VALIDATION; the runtime reads no environment).
        device: index or name substring (spirad passes SPIRAD_VULKAN_DEVICE); None: the best
            device (discrete > integrated > virtual > CPU/lavapipe).
        Raises GfxUnavailable when no usable Vulkan device exists.
    rt.caps -> DeviceCaps                     frozen device capabilities and limits
    rt.alloc(nbytes: int, zero: bool = True, *, host_visible: bool | None = None) -> Buffer
        host_visible: None = best memory (mapped when the device allows), True = must be
        mappable, False = device-only memory through staging copies.
        Out of memory / over a device limit -> GfxDeviceError naming the size.
    rt.pipeline(spirv: bytes, num_bindings: int, push_constant_bytes: int = 0, key=None,
                entry_point: str = "main", uniform=(), readonly=(), label="",
                arguments: bool = False, specialization=()) -> Pipeline
        (Vulkan binds storage buffers only: `uniform` must be empty; `readonly` and `label`
        are the protocol's, unused here; `arguments`: binding 0 is an argument block, given to
        each dispatch as bytes and bound at a dynamic offset of an arena, `arguments.py`;
        `specialization`: (SpecId, u32 value) pairs, the module's specialization constants)
        Cached by `key` (default: sha256 of the SPIR-V, num_bindings, push_constant_bytes,
        entry_point; and `arguments` and `specialization`). Too many bindings / push-constant bytes -> GfxDeviceError.
    rt.dispatch(pipeline, buffers: list[Buffer], groups: tuple[int, int, int],
                push_constants: bytes = b"") -> None
        Records into the current batch; does not submit. buffers[0] is `bytes` for a pipeline
        with `arguments` (copied at once: the caller may reuse its object). groups beyond
        maxComputeWorkGroupCount, or a buffer larger than maxStorageBufferRange, raise
        GfxDeviceError (the caller splits). len(buffers) must equal num_bindings and
        len(push_constants) must equal push_constant_bytes.
    rt.window(buffer, offset, nbytes) -> BufferWindow   bytes of `buffer` that `dispatch` binds
        as a buffer of their own (offset: a multiple of minStorageBufferOffsetAlignment; nbytes
        at most maxStorageBufferRange): a buffer larger than one binding, bound piecewise
    rt.copy(src, dst, nbytes, src_offset=0, dst_offset=0)   buffer to buffer, after pending work
    rt.record(dispatches, blocks) -> Recording   dispatches recorded once for `replay`: each
        (pipeline, buffers, groups, push_constants, indirect) as `dispatch` takes them, except
        that buffers[0] of a pipeline with `arguments` is the index of its block in `blocks`
        (`recording.py`); records nothing yet (each copy is recorded at its first replay)
    rt.replay(recording, blocks)          submit the recording after the pending batch, its
        argument blocks now `blocks` (the same lengths as recorded; the ones that are not the
        objects last written are written); does not wait unless the device is two replays of
        it behind
    rt.flush() / rt.sync()                    submit pending work, wait for it; ~free if idle
    rt.take_validation_messages() -> list[str]   (process-wide list; returned and cleared)
    rt.timestamp_begin() -> int / rt.timestamp_end(id)   device timestamps around a launch's
        dispatches (caps.timestamp_period_ns > 0); rt.take_timestamps() -> {id: nanoseconds}
        waits for the work and returns every completed pair since the last call
    rt.close()                                destroy everything; idempotent
    rt.closed -> bool

    Buffer: .nbytes, .handle, .host_visible, .bindable,
            .view(dtype, count=None, offset=0) -> np.ndarray  (zero-copy; host-visible only),
            .read(offset=0, nbytes=None) -> np.ndarray[uint8]  (a copy),
            .write(data: bytes-like | np.ndarray, offset=0), .fill_zero(), .free()
        Host access flushes pending GPU work first, except .write_unused(data, offset=0): the
        caller knows no pending work uses the buffer (new, or recycled after a flush).

Batches: dispatches accumulate in one command buffer with a barrier between consecutive
dispatches; past `max_batch` dispatches, or at the first dispatch once the batch is older than
`max_pending_s` (2 ms), the buffer is submitted without waiting and recording continues in the
next one, so the device works on a long launch loop while Python records the rest of it (a
loop of `step(t)` then takes about the longer of recording and executing, not their sum; the
host waits only when the device is two batches behind). Each frame
of the submission ring has an argument arena, rewritten only once the frame's previous batch
has completed (`arguments.py`).

Dropped buffers: a `Buffer` garbage-collected while work is pending may still be read by that
work, so it is queued with the serial of the batch being recorded (`queue.py`) and destroyed
once that batch has finished: at the next allocation or batch start whose fence poll shows it
done, at the latest at the next flush, and at once (a flush) when the queued buffers hold more
than `MAX_DEFERRED_BYTES`. A program that creates, launches on and drops ndarrays in a loop
without ever syncing therefore holds a bounded amount of memory (before, nothing was returned
until the next sync: 267 KB per round of a 64K-float ndarray). Destroying a buffer frees the
descriptor sets that bound it (`descriptors.py`).
The VkInstance (and validation messenger) is process-global; devices are per runtime, so
`close()` and a new `VulkanRuntime` may follow each other any number of times.
"""

from __future__ import annotations

import ctypes
import hashlib
from collections import deque
from operator import attrgetter
from time import perf_counter

from ..arena import block_range
from ..errors import GfxDeviceError
from ..protocol import GfxRuntime

from . import buffer as buffer_mod
from .arguments import FIRST_ARENA, MAX_ARENA, Arena
from .commands import Batch
from .descriptors import DescriptorSets
from .device import DeviceCaps, create_logical_device, select_physical_device
from .instance import ffi, get_instance, lib, take_validation_messages
from .memory import MemoryTypes, format_bytes
from .pipeline import Pipeline, PipelineFactory
from .queue import Queue
from . import recording as recording_mod
from .transfer import Transfer

_bind_handle = attrgetter("_bind_handle")  # a buffer's handle for a descriptor set, in C

MAX_BATCH = 4096
MAX_PENDING_S = 0.002  # a batch older than this is submitted at its next dispatch
MAX_DEFERRED_BYTES = 64 << 20  # dropped buffers waiting for pending work: past this, flush


class VulkanRuntime(GfxRuntime):
    records = True  # `record` / `replay` (recording.py)

    def __init__(self, validation: bool = False, device: str | None = None):
        self.closed = True
        self._device = None
        self._frame = None
        self.validation = bool(validation)
        self._instance = get_instance(self.validation)
        phys = select_physical_device(self._instance, device)
        self.caps: DeviceCaps = phys.caps
        self._logical = create_logical_device(phys)
        dev = self._device = self._logical.handle
        self.closed = False
        try:
            self._types = MemoryTypes.query(phys.handle)
            self._queue = Queue(dev, self._logical.queue, self._logical.queue_family)
            self._pipelines = PipelineFactory(dev, self.caps)
            self._dsets = DescriptorSets(dev)
            self._batch = Batch()
            self._transfer = Transfer(dev, self.caps, self._types, self._queue)
        except BaseException:
            self.close()
            raise
        self._buffers: dict[int, buffer_mod.BufferResource] = {}  # id(res) -> live resource
        # (batch serial, resource) of buffers dropped while work was pending, serials ascending
        self._deferred: deque = deque()
        self._deferred_bytes = 0
        self._serial = 0  # the number of the batch being (or last) recorded; queue.completed
        self._busy = False  # anything recorded or submitted since the last wait
        self.max_batch = MAX_BATCH
        self.max_pending_s = MAX_PENDING_S
        self._batch_began = 0.0  # perf_counter() when the batch being recorded began
        self._max_groups = self.caps.max_compute_work_group_count
        self._timestamps = None  # timestamps.Timestamps, made by the first timestamp_begin
        self._arena = None  # the argument arena of the batch being recorded (its frame's)
        self._recordings: dict = {}  # id(Parts) -> Parts of each live recording
        self._dropped: list = []  # Parts of recordings dropped, destroyed at the next flush
        self._reusable = recording_mod.reusable_begin_info()

    # -- buffers -------------------------------------------------------------------------------

    def alloc(self, nbytes: int, zero: bool = True, *, host_visible: bool | None = None):
        """A new storage buffer of `nbytes` bytes (zero-filled unless zero=False)."""
        self._check_open()
        if self._deferred:
            if not self._busy:
                self._release_deferred()
            elif self._deferred_bytes > MAX_DEFERRED_BYTES and self._batch.cmd is None:
                self.flush()  # not while a dispatch records (its arena may be growing here)
            else:
                self._release_finished()
        res = buffer_mod.create_resource(self._device, self.caps, self._types, int(nbytes),
                                         host_visible)
        self._buffers[id(res)] = res
        if zero:  # a new buffer: no pending GPU work can touch it, so no flush needed
            if res.allocation.ptr is not None:
                ctypes.memset(int(ffi.cast("uintptr_t", res.allocation.ptr)), 0, res.size)
            else:
                if self._batch.cmd is None:
                    self._begin_batch()
                self._batch.fill_zero(res.handle, res.size)
        return buffer_mod.Buffer(self, res, int(nbytes))

    def window(self, buffer, offset: int, nbytes: int):
        """Bytes [offset, offset + nbytes) of `buffer`, bindable in `dispatch` like a buffer
        (its own descriptor range). `offset`: a multiple of minStorageBufferOffsetAlignment;
        `nbytes`: at most maxStorageBufferRange."""
        self._check_open()
        align = self.caps.min_storage_buffer_offset_alignment
        buffer._range(offset, nbytes)
        if offset % align or nbytes <= 0:
            raise GfxDeviceError(f"a window of {nbytes} bytes at byte {offset} of a buffer: the "
                                 f"offset must be a multiple of {align} "
                                 f"(minStorageBufferOffsetAlignment) and the size positive")
        if nbytes > self.caps.max_storage_buffer_range:
            raise GfxDeviceError(
                f"a window of {format_bytes(nbytes)} exceeds the Vulkan device limit "
                f"maxStorageBufferRange = {format_bytes(self.caps.max_storage_buffer_range)}")
        return buffer_mod.BufferWindow(buffer, offset, nbytes)

    def _defer_free(self, res) -> None:
        """A Buffer and its views were garbage-collected: release at the next idle point."""
        if not self.closed and not res.freed:
            # idle: no recorded work can use it (serial 0 is always finished)
            self._deferred.append((self._serial if self._busy else 0, res))
            self._deferred_bytes += res.size

    def _release_deferred(self) -> None:
        """Destroy every queued buffer (the device is idle)."""
        while self._deferred:
            self._destroy_buffer(self._deferred.popleft()[1])
        self._deferred_bytes = 0

    def _release_finished(self) -> None:
        """Destroy the queued buffers whose last possible use has finished (no waiting)."""
        deferred = self._deferred
        done = self._queue.poll()
        while deferred and deferred[0][0] <= done:
            res = deferred.popleft()[1]
            self._deferred_bytes -= res.size
            self._destroy_buffer(res)

    def _free_now(self, res) -> None:
        if self._busy:
            self.flush()
        self._destroy_buffer(res)

    def _destroy_buffer(self, res) -> None:
        if res.freed:
            return
        self._dsets.invalidate(res.handle)
        self._buffers.pop(id(res), None)
        res.destroy(self._device)

    def copy(self, src, dst, nbytes: int, src_offset: int = 0, dst_offset: int = 0) -> None:
        """Copy `nbytes` bytes of `src` (from `src_offset`) into `dst` (at `dst_offset`), after
        the pending work; synchronous (a root buffer that grows moves its contents this way)."""
        self._check_open()
        nbytes = int(nbytes)
        src._range(src_offset, nbytes)
        dst._range(dst_offset, nbytes)
        self.flush()
        if not nbytes:
            return
        if src.host_visible and dst.host_visible:
            ffi.memmove(dst._res.allocation.ptr + dst_offset, src._res.allocation.ptr + src_offset,
                        nbytes)
        else:
            self._transfer._copy(src._res.handle, dst._res.handle, src_offset, dst_offset, nbytes)

    # -- pipelines -----------------------------------------------------------------------------

    def pipeline(self, spirv: bytes, num_bindings: int, push_constant_bytes: int = 0, key=None,
                 entry_point: str = "main", uniform=(), readonly=(), label: str = "",
                 arguments: bool = False, specialization=(),
                 emulator_bindings: int = 0) -> Pipeline:
        """The compute pipeline for `spirv`, created once per key. `arguments`: binding 0 is
        an argument block that each dispatch gives as bytes (`arguments.py`).
        `specialization`: (SpecId, u32 value) pairs for the module's specialization constants
        (part of the key). `emulator_bindings`: none here (the Vulkan runtime emulates no
        other device)."""
        self._check_open()
        if emulator_bindings:
            raise RuntimeError("the Vulkan runtime emulates no device: no emulator bindings")
        if uniform:
            raise GfxDeviceError("the Vulkan runtime binds storage buffers only (no uniform bindings)")
        arguments, specialization = bool(arguments), tuple(specialization)
        if key is None:
            key = (hashlib.sha256(spirv).digest(), num_bindings, push_constant_bytes, entry_point,
                   arguments, specialization)
        else:
            key = (key, num_bindings, push_constant_bytes, entry_point, arguments, specialization)
        return self._pipelines.get(spirv, num_bindings, push_constant_bytes, key, entry_point,
                                   arguments, specialization)

    # -- launches ------------------------------------------------------------------------------

    def dispatch(self, pipeline: Pipeline, buffers, groups, push_constants: bytes = b"",
                 indirect=None) -> None:
        """Record one dispatch of `groups` workgroups into the current batch; with `indirect`
        = (buffer, byte offset), the workgroup counts are the three u32 there, written by an
        earlier dispatch (vkCmdDispatchIndirect; `groups` is ignored)."""
        if self.closed:
            self._check_open()
        if self._deferred_bytes > MAX_DEFERRED_BYTES:
            self.flush()  # dropped buffers waiting for pending work: wait, and free them
        gx, gy, gz = groups if indirect is None else (1, 1, 1)
        mx = self._max_groups
        if gx > mx[0] or gy > mx[1] or gz > mx[2] or gx < 0 or gy < 0 or gz < 0:
            raise GfxDeviceError(
                f"dispatch of {tuple(groups)} workgroups exceeds the Vulkan device limit "
                f"maxComputeWorkGroupCount = {tuple(mx)}; split the launch")
        nb = pipeline.num_bindings
        if type(push_constants) is not bytes:  # cffi takes only bytes for `const void *`
            push_constants = bytes(push_constants)
        if len(push_constants) != pipeline.push_constant_bytes:
            raise ValueError(f"pipeline takes {pipeline.push_constant_bytes} push-constant bytes, "
                             f"got {len(push_constants)}")
        if pipeline.arguments:  # binding 0: bytes, placed in the batch's arena
            if not gx or not gy or not gz:
                return
            data = buffers[0]
            if type(data) is not bytes:  # copied now: the caller may change its object
                data = bytes(data)
            batch = self._batch
            if batch.cmd is None:
                self._begin_batch()  # the frame's arena: the one this batch reads
            arena = self._arena
            offset = None if arena is None else arena.place(data)
            if offset is None:  # no arena yet, or the block does not fit in what is left
                offset = self._place_elsewhere(data)
                arena = self._arena
            handles = (arena.handle, *map(_bind_handle, buffers[1:]))
            if len(handles) != nb or None in handles:
                self._bad_buffers(pipeline, buffers)
            dset = self._dsets.get(pipeline.set_layout, nb, handles, arena.last_range)
        else:
            offset = None
            if nb:
                handles = tuple(map(_bind_handle, buffers))
                if len(handles) != nb or None in handles:
                    self._bad_buffers(pipeline, buffers)
                dset = self._dsets.get(pipeline.set_layout, nb, handles)
            else:
                if buffers:
                    self._bad_buffers(pipeline, buffers)
                dset = None
            if not gx or not gy or not gz:
                return
            batch = self._batch
            if batch.cmd is None:
                self._begin_batch()
        batch.dispatch(pipeline, dset, push_constants, gx, gy, gz,
                       None if indirect is None else (indirect[0]._bind_handle, indirect[1]),
                       offset)
        if batch.count >= self.max_batch or \
                perf_counter() - self._batch_began > self.max_pending_s:
            # submit without waiting (the device starts on it); record on in the next frame
            batch.finish()
            self._queue.submit(self._frame)

    # -- recordings (launch graphs, `recording.py`) ------------------------------------------------

    def record(self, dispatches, blocks) -> recording_mod.Recording:
        """A recording of `dispatches` (see the module docstring's API) for `replay`."""
        import weakref
        self._check_open()
        blocks = [b if type(b) is bytes else bytes(b) for b in blocks]
        offsets, half = recording_mod.layout(blocks, self.caps.min_storage_buffer_offset_alignment)
        arg_buffer = self.alloc(2 * half, zero=False, host_visible=True)
        parts = recording_mod.Parts(self._device)
        dispatches = [(p, list(bufs), tuple(g), bytes(pc), ind)
                      for p, bufs, g, pc, ind in dispatches]
        for p, bufs, g, pc, ind in dispatches:
            if len(bufs) != p.num_bindings or len(pc) != p.push_constant_bytes:
                raise ValueError(f"a recorded dispatch gives {len(bufs)} buffers and {len(pc)} "
                                 f"push-constant bytes to a pipeline of {p.num_bindings} and "
                                 f"{p.push_constant_bytes}")
            handles = bufs[1:] if p.arguments else bufs
            if None in map(_bind_handle, handles):
                self._bad_buffers(p, bufs)
        rec = recording_mod.Recording(dispatches, blocks, arg_buffer, half, offsets, parts)
        self._recordings[id(parts)] = parts
        weakref.finalize(rec, self._drop_recording, parts)
        return rec

    def _drop_recording(self, parts) -> None:
        if self._recordings.pop(id(parts), None) is not None:
            self._dropped.append(parts)  # its copies may be pending: destroyed at the flush

    def replay(self, rec, blocks) -> None:
        """Submit recording `rec` after the work recorded so far (module docstring's API)."""
        if self.closed:
            self._check_open()
        batch = self._batch
        queue = self._queue
        if batch.cmd is not None:  # earlier launches first, in submission order
            batch.finish()
            queue.submit(self._frame)
        k = rec.next
        rec.next = 1 - k
        frame = rec.copies[k]
        if frame is None:
            recording_mod.record_copy(self, rec, k, self._reusable, _bind_handle)
            frame = rec.copies[k]
        elif frame.in_flight:
            queue.wait(frame)
        written = rec.written[k]
        if written is not blocks:
            ptr = rec.arg_buffer._res.allocation.ptr + k * rec.half
            offsets, lengths = rec.offsets, rec.lengths
            for i, b in enumerate(blocks):
                if written is None or written[i] is not b:
                    if len(b) != lengths[i]:
                        raise ValueError(f"argument block {i} of a recording has {len(b)} "
                                         f"bytes, recorded with {lengths[i]}")
                    ffi.memmove(ptr + offsets[i], b, lengths[i])
            rec.written[k] = blocks
        self._serial += 1
        frame.serial = self._serial
        queue.submit_other(frame)
        self._busy = True

    # -- device timestamps (the kernel profiler) -------------------------------------------------

    def timestamp_begin(self) -> int:
        """Record a timestamp before the next dispatches; returns the pair's id."""
        self._check_open()
        ts = self._timestamps
        if ts is None:
            if self.caps.timestamp_period_ns <= 0:
                raise GfxDeviceError(f"{self.caps.name} cannot write timestamps on its compute queue")
            from .timestamps import Timestamps
            ts = self._timestamps = Timestamps(self._device, self.caps.timestamp_period_ns,
                                               self.caps.timestamp_valid_bits)
        if ts.full:
            self.flush()
        if self._batch.cmd is None:
            self._begin_batch()
        return ts.begin(self._batch.cmd)

    def timestamp_end(self, pid: int) -> None:
        """Record the second timestamp of pair `pid` after the dispatches since its begin."""
        if self._batch.cmd is None:
            self._begin_batch()
        self._timestamps.end(self._batch.cmd, pid)

    def take_timestamps(self) -> dict:
        """Wait for all work; pair id -> nanoseconds of every pair completed since the last call."""
        if self._timestamps is None:
            return {}
        self.flush()
        return self._timestamps.take()

    def _begin_batch(self) -> None:
        frame = self._frame = self._queue.acquire()  # waited for: its arena is free again
        if self._deferred:
            self._release_finished()
        self._serial += 1
        frame.serial = self._serial
        self._batch.begin(frame.cmd)
        self._busy = True
        self._batch_began = perf_counter()
        if frame.arena is not None:
            frame.arena.reset()
        self._arena = frame.arena

    def _place_elsewhere(self, data: bytes) -> int:
        """The offset of argument block `data`, which the arena of the batch being recorded
        lacks room for (or there is none yet): a larger arena, up to MAX_ARENA; past that the
        next batch (submitted without waiting), in its frame's arena."""
        arena = self._arena
        if arena is not None and arena.size >= MAX_ARENA and block_range(len(data)) <= arena.size:
            self._batch.finish()  # full at its largest: on in the next frame's arena
            self._queue.submit(self._frame)
            self._begin_batch()
            arena = self._arena
            offset = None if arena is None else arena.place(data)
            if offset is not None:
                return offset
        # a first arena, or twice the full one (which is freed once the batch is done: the
        # last reference to its Buffer goes with the frame's)
        size = FIRST_ARENA if arena is None else 2 * arena.size
        size = max(size, 2 * block_range(len(data)))
        buf = self.alloc(size, zero=False, host_visible=True)
        arena = self._frame.arena = self._arena = Arena(
            buf, self.caps.min_storage_buffer_offset_alignment)
        return arena.place(data)

    def _bad_buffers(self, pipeline, buffers) -> None:
        if len(buffers) != pipeline.num_bindings:
            raise ValueError(f"pipeline has {pipeline.num_bindings} bindings, "
                             f"got {len(buffers)} buffers")
        for i, b in enumerate(buffers):
            if pipeline.arguments and i == 0:
                continue  # the argument block: bytes
            if b._res.freed:
                raise GfxDeviceError(f"buffer bound at binding {i} was freed")
            if b._rt is not self:
                raise GfxDeviceError(f"buffer bound at binding {i} belongs to another runtime")
            if not b.bindable:
                raise GfxDeviceError(
                    f"buffer of {format_bytes(b.nbytes)} bound at binding {i} exceeds the "
                    f"Vulkan device limit maxStorageBufferRange = "
                    f"{format_bytes(self.caps.max_storage_buffer_range)}; use smaller "
                    "fields/ndarrays")
        raise RuntimeError("unreachable: buffers looked fine on the slow path")

    def flush(self) -> None:
        """Submit the pending batch and wait for all submitted work."""
        if not self._busy:
            return
        batch = self._batch
        queue = self._queue
        try:
            if batch.cmd is not None:
                batch.finish()
                queue.submit(self._frame)
            queue.wait_all()
            if self._timestamps is not None:
                self._timestamps.resolve()
        finally:
            self._busy = False
        self._dsets.maybe_reset()
        self._release_deferred()
        while self._dropped:
            self._dropped.pop().destroy(self._device, self._queue.pool)

    sync = flush

    def take_validation_messages(self) -> list[str]:
        return take_validation_messages()

    # -- teardown ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise GfxDeviceError("the Vulkan runtime is closed (was spirad re-initialised?)")

    def close(self) -> None:
        """Wait for the device, then destroy every object it owns. Idempotent."""
        if self._device is None:
            return
        dev = self._device
        self.closed = True
        lib.vkDeviceWaitIdle(dev)
        queue = self.__dict__.get("_queue")
        for parts in list(getattr(self, "_recordings", {}).values()) + \
                getattr(self, "_dropped", []):
            if queue is not None:
                parts.destroy(dev, queue.pool)
        self._recordings, self._dropped = {}, []
        for name in ("_transfer", "_pipelines", "_dsets", "_queue", "_timestamps"):
            part = self.__dict__.pop(name, None)
            if part is not None:
                part.destroy()
        self._timestamps = None
        for res in list(getattr(self, "_buffers", {}).values()) + \
                [res for _, res in getattr(self, "_deferred", ())]:
            res.destroy(dev)
        self._buffers = {}
        self._deferred = deque()
        self._deferred_bytes = 0
        self._busy = False
        lib.vkDestroyDevice(dev, ffi.NULL)
        self._device = None

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.caps.name
        return f"<VulkanRuntime {state}{' +validation' if self.validation else ''}>"
