"""The contract every SPIR-V runtime implements (`gfx_runtime.vulkan.VulkanRuntime`,
`gfx_runtime.wgpu.WgpuRuntime`): the calls spirad's SPIR-V backend makes, each with its
default (engineering 14: the backend never probes a runtime with `getattr` / `hasattr`).

    rt = SomeRuntime(...)                 a device; GfxUnavailable when there is none
    rt.caps                               frozen capabilities and limits: a `GfxCaps`
    rt.validation                         True when the driver's validation layer is on
    rt.closed                             after `close()`
    rt.alloc(nbytes, zero=True, *, host_visible=None) -> GfxBuffer
    rt.pipeline(spirv, num_bindings, push_constant_bytes=0, key=None, entry_point="main",
                uniform=(), readonly=(), label="", arguments=False, specialization=()) -> a pipeline
        `uniform`: binding numbers that are uniform buffers (the rest are storage buffers);
        `readonly`: storage buffers the shader only reads; `label` names it in messages;
        `arguments`: binding 0 is the argument block, given to each dispatch as bytes;
        `specialization`: (SpecId, u32 value) pairs for the module's specialization constants
        (Vulkan; wgpu refuses any: the Metal profile emits none).
    rt.dispatch(pipeline, buffers, groups, push_constants=b"", indirect=None)
        recorded, not submitted; `indirect=(buffer, byte offset)`: the workgroup counts are the
        three u32 there (written by an earlier dispatch). With a pipeline's `arguments`,
        buffers[0] is bytes: the runtime copies them at once into memory of its own that no
        pending work reads (an arena per batch, bound at a dynamic offset), so every dispatch
        sees the bytes it was given, however many follow before a flush. Where a block goes
        in the arena: `gfx_runtime.arena` (both runtimes' one placement rule).
    rt.window(buffer, offset, nbytes) -> a window
        bytes [offset, offset + nbytes) of `buffer`, which `dispatch` accepts in place of a
        buffer and binds as one of that size (a buffer larger than the device's largest binding
        is bound as several windows). `offset`: a multiple of 256 (every device's storage
        offset alignment divides it); `nbytes`: at most the largest binding. The window keeps
        the buffer alive.
    rt.copy(src, dst, nbytes, src_offset=0, dst_offset=0)
    rt.flush()                            submit what is recorded and wait for it
    rt.records                            True where the runtime keeps recordings:
    rt.record(dispatches, blocks) -> a recording / rt.replay(recording, blocks)
                                          dispatches recorded once and submitted again with
                                          new argument blocks (Vulkan, `vulkan/recording.py`;
                                          default: none, the launches are dispatched again)
    rt.take_validation_messages() -> list[str]
    rt.timestamp_begin() -> id / rt.timestamp_end(id) / rt.take_timestamps() -> {id: ns}
                                          device timestamps (default: not supported)
    rt.close()                            idempotent

    GfxBuffer: .nbytes, .view(dtype, count=None, offset=0), .read(offset=0, nbytes=None),
               .write(data, offset=0), .fill_zero(), .free()

Runtimes raise only `gfx_runtime.errors` exceptions; the backend maps them to user errors.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class GfxCaps:
    """What a SPIR-V runtime's device can do: the fields the backend and the code generator
    (`spirv_codegen.SpirvCaps.from_device`) read, the same on every runtime. A runtime's own
    caps type derives from it and adds what only that runtime reads (`DeviceCaps`,
    `WgpuCaps`)."""
    name: str
    has_f64: bool
    has_i64: bool
    has_int64_atomics: bool  # OpAtomic* on 64-bit storage-buffer ints
    has_atomic_float32_add: bool
    has_atomic_float64_add: bool
    max_storage_buffer_range: int        # the largest storage binding
    max_per_stage_storage_buffers: int   # storage buffers one spirad pipeline may bind
    max_compute_work_group_count: tuple  # (x, y, z)
    max_push_constants_size: int
    max_buffer_size: int                 # the largest buffer (bound through windows past a binding)
    # Iterations after which the driver silently ends every loop of an invocation (all loops of
    # the invocation together); None where no such cap is known. lavapipe: 65,535.
    loop_iteration_cap: int | None
    # Float bit widths whose NaN / Inf / -0 the device can preserve when a module declares
    # SignedZeroInfNanPreserve: without it a driver may fold `x - x` or `x * 0` to 0.
    preserves_float_specials: tuple = ()
    # The 8- and 16-bit types (`sd.u8 i8 u16 i16 f16`): arithmetic and storage-buffer access.
    has_int8: bool = False
    has_int16: bool = False
    has_f16: bool = False
    has_storage8: bool = False
    has_storage16: bool = False
    # Nanoseconds per timestamp tick on the compute queue, 0.0 where timestamps cannot be
    # written there (the kernel profiler then times on the host).
    timestamp_period_ns: float = 0.0


class GfxBuffer:
    """A device buffer (`nbytes` its size). Host access (view / read / write) first finishes
    pending work on it."""
    __slots__ = ()

    def view(self, dtype, count: int | None = None, offset: int = 0):
        """A numpy view of the contents (zero-copy where the memory is host-visible)."""
        raise NotImplementedError

    def read(self, offset: int = 0, nbytes: int | None = None):
        """A uint8 copy of `nbytes` bytes from `offset` (the rest of the buffer by default)."""
        raise NotImplementedError

    def write(self, data, offset: int = 0) -> None:
        raise NotImplementedError

    def fill_zero(self) -> None:
        raise NotImplementedError

    def free(self) -> None:
        """Release the memory after the work that uses it (idempotent)."""
        raise NotImplementedError


class GfxRuntime:
    """Base of the SPIR-V runtimes: every call the backend makes, with its default."""
    caps = None
    validation: bool = False
    closed: bool = True

    def alloc(self, nbytes: int, zero: bool = True, *, host_visible: bool | None = None) -> GfxBuffer:
        raise NotImplementedError

    def pipeline(self, spirv: bytes, num_bindings: int, push_constant_bytes: int = 0, key=None,
                 entry_point: str = "main", uniform=(), readonly=(), label: str = "",
                 arguments: bool = False, specialization=(), emulator_bindings: int = 0):
        """`emulator_bindings`: storage buffers among `num_bindings` that only an emulating
        device needs (windows of its smaller bindings): counted against the device's limits,
        not the emulated device's (the wgpu runtime's Metal buffer table)."""
        raise NotImplementedError

    def dispatch(self, pipeline, buffers, groups, push_constants: bytes = b"",
                 indirect=None) -> None:
        raise NotImplementedError

    def window(self, buffer: GfxBuffer, offset: int, nbytes: int):
        raise NotImplementedError

    def copy(self, src: GfxBuffer, dst: GfxBuffer, nbytes: int, src_offset: int = 0,
             dst_offset: int = 0) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        raise NotImplementedError

    # -- recordings: only where `records` ----------------------------------------------------------
    records: bool = False

    def record(self, dispatches, blocks):
        raise NotImplementedError(f"{type(self).__name__} keeps no recordings")

    def replay(self, recording, blocks) -> None:
        raise NotImplementedError(f"{type(self).__name__} keeps no recordings")

    def take_validation_messages(self) -> list:
        """Messages of the validation layer since the last call (none without one)."""
        return []

    # -- device timestamps: only where `caps.timestamp_period_ns > 0` ------------------------------
    def timestamp_begin(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} has no device timestamps")

    def timestamp_end(self, pid: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} has no device timestamps")

    def take_timestamps(self) -> dict:
        return {}

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


REQUIRED = ("alloc", "window", "pipeline", "dispatch", "copy", "flush", "close")  # no usable default
BUFFER_REQUIRED = ("view", "read", "write", "fill_zero", "free")
