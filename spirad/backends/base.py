"""The backend contract: one base class that lists every hook, with its default.

A backend is one module of `spirad.backends` that defines `Backend`, a subclass of `BackendBase`
(loaded by name by `spirad.compile.driver`). Required: `allocate`, `view`, `compile`, `launch`. Every
other hook has a default that suits a backend without it; callers never probe with
`getattr` / `hasattr`.

Launch data a backend receives (`spirad.runtime.launch`): storages in `abi.bindings` order (None for
kernel temporaries, which the backend owns), the argument bytes (layout: `kernel_ir.abi`; then
what `launch_arguments` appends), one
(begin, end) per task — or None for a range task whose bounds read fields / ndarrays /
temporaries, which the backend evaluates when the task starts (`range_bounds`: on the host with
`HostBounds`, or on the device) — and for adjoint programs with adstacks an `AdstackPlan`: per task the
sized stacks (`sizing_cache.SizedTask`: capacities, layout, maybe device-written metadata) and
what `plan_adstack` derived from them. Errors a kernel reports on the device (adstack overflow,
bounds checks, driver limits) are raised at the next `sync()` as user errors.
"""
from __future__ import annotations

import numpy as np


def default_checks(state) -> bool:
    """Are the default bounds checks on: not under `init(debug=True)` (whose checks name the
    line and index), and not turned off with `init(check_bounds=False)`? Every backend compiles
    with them (`oob_check`): an out-of-range access is skipped and raised at the next sync as a
    `SpiradOutOfBoundsError`, instead of crashing or overwriting other memory."""
    return not state.debug and state.options.check_bounds


class BackendBase:
    name = ""
    # The most elements one field may hold, and the longest parallel loop: the 32-bit indices
    # and task ranges of the SPIR-V and GPU backends; the CPU indexes and loops in 64 bits.
    # A larger field is refused when it is created (`field.Field`), a longer loop at launch.
    max_elements = 2**31 - 1
    # The GPU sizer (`spirad.backends.gpu_sizer.GpuSizer`) or None: adstack sizes that read
    # device data are then evaluated on the host, which reads the data through `view`.
    gpu_sizer = None
    # True: `view` is live memory the host may write (after a sync). False: device memory the
    # host reaches only through `read` / `write` (asynchronous copies); `view` is a read-only
    # copy (`spirad.data.field` writes through `write`).
    host_views = True

    # -- availability (class level: asked before a backend is created) -----------------------------
    @classmethod
    def is_available(cls) -> bool:
        return True

    @classmethod
    def picked_by_gpu(cls) -> bool:
        """May `sd.gpu` choose this backend? (Not an emulation: it is asked for by name.)"""
        return cls.is_available()

    @classmethod
    def unavailable_reason(cls) -> str:
        """Why `is_available()` is False: the missing piece and how to install it."""
        return ""

    def __init__(self, state):
        self.state = state

    # -- required ----------------------------------------------------------------------------------
    def allocate(self, nbytes: int):
        """A zero-filled storage of at least `nbytes` bytes (a field's or ndarray's memory)."""
        raise NotImplementedError

    def view(self, storage, np_dtype, shape) -> np.ndarray:
        """A numpy view of `storage`, valid until the next launch (callers `sync()` first); a
        read-only copy where `host_views` is False."""
        raise NotImplementedError

    def compile(self, tl, abi):
        """The backend program of a verified task list (the only place a backend sees IR)."""
        raise NotImplementedError

    def launch(self, program, storages, argbuf: bytes, ranges, adstack=None):
        """Run (or enqueue) every task of `program`; `adstack`: an AdstackPlan or None."""
        raise NotImplementedError

    # -- optional, with defaults -------------------------------------------------------------------
    def replay_entry(self, program, storages, argbuf: bytes, ranges):
        """A launch graph's record of one launch (`spirad.launch_graph`) that `replay` runs with
        no Python of the launch path between its task calls; None (the default): the graph
        replays this launch through `launch`, as an eager launch would run it."""
        return None

    def replay(self, entries) -> None:
        """Run records of `replay_entry`, in order (only called with records this backend
        made)."""
        raise RuntimeError(f"the {self.name} backend makes no launch graph records")

    def eager_entry(self, program, storages, argbuf: bytes, ranges):
        """A function of no arguments that runs this launch again exactly as `launch` would
        run it with these arguments (the launch path's repeated-launch shortcut,
        `launch.eager_entry`: the same plan launched again and again, as a simulation step
        does); None (the default): every launch goes through `launch`."""
        return None

    def replay_kept(self, entries, keep: dict) -> None:
        """`replay(entries)` for a launch graph, which gives `keep`: a dict of its own, kept
        while the graph may replay these records again (emptied by a new capture). A backend
        may keep there what it builds for them (Vulkan: the recorded command buffer,
        `spirv_replay`). Default: `replay(entries)`."""
        self.replay(entries)

    def allocate_field(self, nbytes: int, key=None, name: str = "", tree=None):
        """A zero-filled storage for a field (or its .grad / .dual) of `nbytes` bytes; `key`: the
        field's id, `name` its name (errors); `tree`: its FieldsBuilder tree (None: the default
        root). The SPIR-V backends place fields in shared root buffers (`backends.root_buffers`),
        a tree's in chunks of its own; the default is a storage of its own (`allocate`)."""
        return self.allocate(nbytes)

    def release_tree(self, tree) -> None:
        """A FieldsBuilder tree was destroyed (`spirad.data.fields_builder`): its fields' storages are
        dropped already; return what the backend keeps for it. Default: nothing kept (each
        field's storage is freed when the last reference to it goes)."""

    def allocate_ndarray(self, nbytes: int):
        """A zero-filled storage for an ndarray (or its .grad / .dual, or the device copy of a
        host array passed to a kernel) of `nbytes` bytes, freed when it is no longer referenced.
        The SPIR-V backends place it in their shared arenas (`backends.root_buffers`), so a
        kernel's binding count does not grow with its ndarrays; the default is a storage of its
        own (`allocate`)."""
        return self.allocate(nbytes)

    def storage_parts(self, storage) -> tuple:
        """(buffer, byte offset) of a storage: where its bytes live for code that binds buffers
        itself (the GPU sizer reads fields through an alias of the buffer). Default: itself, 0."""
        return storage, 0

    def ordered_chunk(self) -> int | None:
        """Under `init(deterministic=True)`: None (the default) to run an order-sensitive
        parallel loop as a serial task, or the most iterations one ordered-task iteration runs
        (a device that caps the loop iterations of an invocation: passes/deterministic)."""
        return None

    # -- offline compile cache (spirad.compile.offline_cache) -------------------------------------------
    def cache_features(self) -> tuple:
        """What this backend's compiled code depends on besides the IR (device, features,
        compile flags): part of every offline-cache key."""
        return (self.name,)

    def export_program(self, program):
        """A picklable form of `program` for the offline cache, or None (not stored)."""
        return None

    def import_program(self, tl, abi, blob):
        """The program `export_program` gave `blob` for (maybe in another process)."""
        return self.compile(tl, abi)

    def launch_arguments(self, program, argbuf: bytes, storages) -> bytes:
        """The bytes `launch` is given for `program` with the argument buffer `argbuf` (layout:
        `kernel_ir.abi`) and the storages of its bindings (`launch`'s): `argbuf` followed by
        what this backend's programs read after it (default: nothing; SPIR-V: root and arena
        offsets). Made once per launch plan, not per launch."""
        return argbuf

    def plan_adstack(self, program, task: int, sized):
        """What this backend derives from one task's sized stacks (metadata, heap bytes): a
        `program.AdstackTaskPlan`, kept on the AdstackPlan while the sizes stay the same;
        passed back to `launch`."""
        return None

    def host_storage(self, raw: np.ndarray):
        """A storage over the host memory of `raw` (a flat uint8 numpy array the caller keeps
        alive), or None when this backend computes elsewhere and must copy (the default). Kernel
        arguments that are numpy arrays / tensors are zero-copy where this is not None
        (`spirad.interop.arrays`)."""
        return None

    # -- other libraries' GPU arrays (DLPack, __cuda_array_interface__: spirad.interop.arrays) --
    def dlpack_device(self) -> tuple:
        """The DLPack (device type, id) of this backend's storages; (1, 0): host memory (or
        exported as a host copy)."""
        return (1, 0)

    def dlpack_stream(self):
        """The stream value this backend hands a producer's `__dlpack__(stream=...)` and names
        in `__cuda_array_interface__` (None: no stream, host memory)."""
        return None

    def foreign_storage(self, ptr: int, nbytes: int, owner):
        """A storage over another library's memory on this backend's device (`owner` keeps it
        alive until the work using it has run), or None where foreign memory is not bound."""
        return None

    def order_after(self, stream) -> None:
        """Work launched from now on waits for what `stream` (a producer's; None: nothing to
        wait for) has queued so far, without the host waiting."""

    def order_before(self, stream) -> None:
        """`stream` (a consumer's DLPack stream value; None: its default stream; -1: none)
        waits for what this backend has queued so far, without the host waiting."""

    def read(self, storage, nbytes: int, offset: int = 0) -> np.ndarray:
        """`nbytes` bytes of `storage` from `offset`, as a uint8 copy (pending work finished)."""
        self.sync()
        return np.array(self.view(storage, np.uint8, (offset + nbytes,))[offset:], copy=True)

    def write(self, storage, data: np.ndarray, offset: int = 0) -> None:
        """Copy `data`'s bytes into `storage` at `offset`, after the work launched before
        (host-memory backends: pending work finished first; device-memory backends may queue
        the copy on their stream and return at once)."""
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        self.sync()
        self.view(storage, np.uint8, (offset + raw.nbytes,))[offset:] = raw

    def sync(self) -> None:
        """Wait for all launched work; raise the first error a kernel reported since the last."""

    def close(self) -> None:
        """Release everything (a new `init()` follows)."""

    def capabilities(self) -> dict:
        """Optional device features the compiler and the tests ask about."""
        return {"f64": True, "i64": True}

    def heap_bytes(self) -> tuple:
        """Bytes of the (float, int) adstack heaps now allocated."""
        return (0, 0)

    def adstack_rows(self, program, task: int, n) -> int:
        """Adstack heap rows a launch of task `task` over `n` iterations (None: not known
        before it starts) uses at full parallelism: what the memory budget
        (`init(ad_stack_memory=)`, spirad.runtime.launch) is compared with."""
        return max(int(n or 1), 1)

    def adstack_row_fits(self, layout) -> bool:
        """Can one thread's adstack heap row of `layout` be bound at all? (SPIR-V: one storage
        buffer's limit.) A launch whose row does not fit runs checkpointed (spirad.runtime.launch)."""
        return True

    def device_memory(self) -> int:
        """Bytes of memory the device has (the default adstack budget is a fraction of it):
        the host's RAM unless the backend knows better."""
        import os
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return 8 << 30

    def take_validation_messages(self) -> list:
        """Driver validation messages since the last call (the tests fail on any)."""
        return []

    # -- the kernel profiler (spirad.profiler) and `python -m spirad` ---------------------------
    def device_timer(self):
        """An object timing launches on the device — `begin() -> token` before a launch,
        `end(token)` after it, `collect() -> {token: seconds}` (waits for the work) — or None:
        the profiler then times launches on the host (sync, launch, sync)."""
        return None

    def device_name(self) -> str:
        """The device this backend runs on, for people (profiler header, `python -m spirad`)."""
        return "host CPU"
