"""The Metal backend: the SPIR-V backend (`spirv_backend.py`) over the wgpu runtime, with the
Metal profile.

wgpu-py runs SPIR-V on Metal by translating it with naga, so this backend shares everything of
`spirv_backend.py` with Vulkan (launch flow, adstack heaps, GPU sizer, sizing cache, status and
overflow errors) and specialises three things:

* the runtime: `gfx_runtime.wgpu.WgpuRuntime` (`_make_runtime`);
* the SPIR-V profile `spirv_codegen.profile.METAL` (no compare-exchange, NaN / Inf by bitcast,
  a uniform argument buffer, one adstack heap);
* the checks: before code generation a kernel that uses f64 (Metal has none) or an atomic add
  that Metal cannot do is a user error naming the kernel line; after it, every module passes
  spirv-val and `spirv_codegen.metal_check` before wgpu sees it (a naga panic would end the
  process). Fields and ndarrays share root buffers (`root_buffers`: ndarrays in arenas), so a
  kernel binds one view per root chunk and element type it touches (status included), the
  ndarrays bound directly (larger than a chunk, or imported) and, with autodiff stacks, two
  buffers; a task over the storage buffers Metal leaves a spirad pipeline (28 of the 31
  entries of its buffer argument table: `gfx_runtime/wgpu/caps.py`; too many direct ndarrays)
  is a user error naming them.

Availability: a Metal adapter (macOS), or any wgpu adapter with `SPIRAD_METAL_EMULATE=1`, which
imposes the limits of an M1 (`gfx_runtime/wgpu/caps.py`). Otherwise `SpiradArchError` says why.
"""
from __future__ import annotations

import functools


from kernel_ir.dtypes import f32, f64
from kernel_ir.errors import SpiradDeviceError, SpiradTypeError
from kernel_ir.nodes import walk
from kernel_ir.ops import ATOMICS, Op
from kernel_ir.source import user_error

from . import small_types
from .spirv_backend import SpirvBackend

# why Metal runs no 8- / 16-bit int (`small_types`; f16 runs with wgpu's shader-f16)
METAL_SMALL_TYPES = ("spirad's Metal path (SPIR-V through wgpu / naga) has no 8- or 16-bit "
                     "integers: naga rejects 8-bit storage access and 16-bit ints")

EMULATE_ENV = "SPIRAD_METAL_EMULATE"


def emulated() -> bool:
    from .. import options
    return options.get("SPIRAD_METAL_EMULATE")


def _first_use(tl, pred):
    """(node, a source location near it) of the first node of `tl` for which `pred` holds."""
    for t in tl.tasks:
        loc = t.loc
        for n in walk(t.body):
            loc = n.loc or loc
            if pred(n):
                return n, loc
    return None, None


def _uses_f64(n) -> bool:
    return n.dtype == f64 or getattr(n.arg, "dtype", None) == f64


class MetalBackend(SpirvBackend):
    name = "metal"

    @classmethod
    def is_available(cls) -> bool:
        try:
            from gfx_runtime.wgpu import is_available as avail
        except ImportError:
            return False
        return avail(emulated())

    @classmethod
    def picked_by_gpu(cls) -> bool:
        try:
            from gfx_runtime.wgpu import is_available as avail
        except ImportError:
            return False
        return avail(False)  # a real Metal adapter; SPIRAD_METAL_EMULATE never changes sd.gpu

    @classmethod
    def unavailable_reason(cls) -> str:
        from gfx_runtime.wgpu import unavailable_reason as reason
        return reason(emulated())

    def device_timer(self):
        return None  # wgpu's timestamp queries are an optional feature: host times

    @functools.cached_property  # read on every adstack launch (`_heaps`): looked up once
    def profile(self):
        from spirv_codegen.profile import METAL
        return METAL

    def _make_runtime(self):
        from gfx_runtime.wgpu import WgpuRuntime
        return WgpuRuntime(emulate=emulated())

    def __init__(self, state):
        super().__init__(state)
        from sizer.device_format import F32_SLOTS, INT_SLOTS
        from .gpu_sizer import GpuSizer
        # the GPU sizer's evaluation kernel binds status, program, jobs, values, job states and
        # its data slots (no f64 slots: Metal has no f64). With Metal's 28 storage buffers per
        # spirad pipeline every int and f32 slot fits (4 + 2, as on Vulkan); a device with fewer
        # gets fewer slots, and a task whose size leaves need more distinct buffers is sized on
        # the host (through `view`), once per change thanks to the sizing cache.
        spare = self.caps.max_per_stage_storage_buffers - 1 - 4
        if spare >= 2:
            n_int = min(INT_SLOTS, spare - 1)
            self.gpu_sizer = GpuSizer(self, self.caps.loop_iteration_cap, int_slots=n_int,
                                      f32_slots=min(F32_SLOTS, spare - n_int))
        else:
            self.gpu_sizer = None

    def capabilities(self) -> dict:
        return {"f64": False, "i64": self.caps.has_i64}

    def _check_kernel(self, tl, abi) -> None:
        n, loc = _first_use(tl, _uses_f64)
        if n is not None:
            raise user_error(SpiradTypeError, (
                f"kernel {tl.name} uses f64, but Metal has no 64-bit floats; use sd.f32 "
                f"(sd.init(arch=sd.metal, default_fp=sd.f32) for literals and defaults)"), loc)
        if any(a.dtype == f64 for a in tl.args if getattr(a, "dtype", None) is not None):
            raise SpiradTypeError(f"kernel {tl.name} takes an f64 argument, but Metal has no "
                                  f"64-bit floats; use sd.f32")
        caps = self.spirv_caps
        small_types.check(tl, caps, f"Metal ({self.caps.name})", METAL_SMALL_TYPES,
                          cas=self.profile.compare_exchange)
        n, loc = _first_use(tl, lambda n: n.op == Op.ATOMIC_ADD and (
            (n.dtype.bits == 64 and not caps.has_int64_atomics) or
            (n.dtype.kind == "f" and not caps.has_atomic_float32_add)))
        if n is not None:
            raise user_error(SpiradTypeError, (
                f"kernel {tl.name}: atomic add on {n.dtype.name} is not available on Metal "
                f"({self.caps.name}); Metal has 32-bit integer and f32 atomic adds only"), loc)

        n, loc = _first_use(tl, lambda n: n.op in (Op.ATOMIC_MIN, Op.ATOMIC_MAX) and
                            n.dtype == f32 and n.arg.kind == "ndarray")
        if n is not None:  # a field's f32 min / max is two int atomics through two views of
            # its root buffer (atomics.float_min_max_by_sign); an ndarray has one binding
            raise user_error(SpiradTypeError, (
                f"kernel {tl.name}: {n.op.name.lower()} on an f32 ndarray element is not "
                f"available on Metal ({self.caps.name}): it has no compare-and-swap loop; keep "
                f"the value in an f32 field (fields support it) or use another arch"), loc)
        n, loc = _first_use(tl, lambda n: n.op in ATOMICS and n.arg.mask)
        if n is not None:
            raise user_error(SpiradTypeError, (
                f"kernel {tl.name}: a store or atomic into a quantized field (bit-packed storage) "
                f"is not available on Metal ({self.caps.name}): it needs a compare-and-swap loop "
                f"on the packed word, which Metal (through wgpu) lacks; reading quantized fields "
                f"works; write them from Python scope or use another arch"), loc)
        n, loc = _first_use(tl, lambda n: n.op == Op.ATOMIC_MUL)
        if n is not None:
            raise user_error(SpiradTypeError, (
                f"kernel {tl.name}: atomic_mul is not available on Metal ({self.caps.name}): it "
                f"needs a compare-and-swap loop, which Metal (through wgpu) lacks; multiply in a "
                f"local and store the product, or use another arch"), loc)
        n, loc = _first_use(tl, lambda n: n.op in ATOMICS and n.op != Op.ATOMIC_ADD and (
            n.dtype.bits == 64 or n.dtype.kind == "f" and n.dtype != f32 and
            n.op != Op.ATOMIC_XCHG))
        if n is not None:
            name = n.op.name.lower().replace("xchg", "exchange")
            raise user_error(SpiradTypeError, (
                f"kernel {tl.name}: {name} on {n.dtype.name} is not available on Metal "
                f"({self.caps.name}): it has no 64-bit atomics; use 32-bit integers or another "
                f"arch"), loc)

    LIMIT_NAME = "per kernel (Metal, through wgpu)"

    def _emulator_bindings(self, bmap) -> int:
        """Emulated on an adapter whose bindings are smaller than an M1's (lavapipe: 128 MiB
        against 256 MiB), a field larger than the adapter's binding is cut into more windows than
        an M1 would bind: those extra windows, per view of the chunk, are the emulator's
        (DiffTaichi's diffmpm3d binds 30 storage buffers on lavapipe, 18 at 256 MiB windows).
        Windows of another size (a binding limit lowered in tests) are the device's own."""
        c = self.caps
        if c.emulated_max_binding <= c.max_storage_buffer_range:
            return 0
        extra = 0
        for chunk, n, nbytes in bmap.windows:
            if nbytes == c.max_storage_buffer_range:
                m1 = -(-n * nbytes // c.emulated_max_binding)  # the emulated device's windows
                extra += (n - m1) * sum(1 for ch, _ in bmap.views if ch == chunk)
        return extra

    def _check_module(self, name: str, mod, emulator: int = 0, stored: bool = False) -> None:
        from spirv_codegen import metal_check, validate
        limit = self.caps.max_per_stage_storage_buffers
        storage = mod.num_bindings - len(mod.uniform_bindings)
        if storage - emulator > limit:  # `_check_bindings` counted every task before codegen
            raise RuntimeError(f"internal error: module {mod.name} of kernel {name} binds "
                               f"{storage} storage buffers, past Metal's {limit}")
        if storage > self.caps.wgpu_storage_buffers:
            raise SpiradDeviceError(
                f"kernel {name} needs {storage} storage buffers in task {mod.name} on "
                f"{self.caps.name}, {emulator} of them windows of fields larger than this "
                f"adapter's bindings ({self.caps.max_storage_buffer_range} bytes) that the device "
                f"emulated would not need, past the adapter's own limit of "
                f"{self.caps.wgpu_storage_buffers}; the device emulated binds {storage - emulator}: "
                f"split the kernel into kernels that touch fewer large fields, or run on a Mac")
        if stored and not self.validate:
            # an offline-cache entry (signed) passed both checks below when it was stored, under
            # the same cache features (profile, caps): checking it again cost ~6 s of the ~25 s
            # of Genesis' box rebuilt from the cache on lavapipe (docs/metal.md)
            return
        validate(mod.words)  # always: an invalid module could crash naga, and the process with it
        metal_check.check(mod.words, name, limit + emulator, storage, mod.uniform_bindings)



Backend = MetalBackend
