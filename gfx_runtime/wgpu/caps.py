"""What a wgpu adapter can do, as the limits spirad compiles against.

On a Mac the adapter is Metal's. The device is created with the adapter's limits
(`device_limits`): a wgpu device created without `required_limits` gets WebGPU's defaults (8
storage buffers per stage, 128 MiB bindings, 256 MiB buffers), far below what the GPU can do.
With `emulate=True` any adapter is accepted and the limits wgpu reports for an M1 (Apple7 GPU
family, the oldest Apple silicon) are imposed on top of the adapter's own, so a kernel that runs
emulated on lavapipe also fits a real Mac:

* Metal's buffer argument table: 31 entries per stage (`METAL_BUFFER_SLOTS`; wgpu-hal reports it
  as `max-storage-buffers-per-shader-stage` and `max-uniform-buffers-per-shader-stage` for every
  Metal device). wgpu-hal's Metal pipeline layout (`create_pipeline_layout`) spends one entry per
  buffer binding (storage *and* uniform), one for the immediates (push constants) when the layout
  has any, and one for the buffer-sizes buffer naga's MSL output reads array lengths from
  whenever a storage buffer is bound; past 31 it fails with an opaque out-of-memory error. A
  spirad pipeline has one uniform buffer (the arguments) and immediates, so it may bind
  31 - 3 = 28 storage buffers (`max_per_stage_storage_buffers`); the runtime counts every
  pipeline that way before wgpu sees it (`pipeline_buffer_slots`);
* no f64 (Metal has none); only wgpu features an M1 has: `shader-float32-atomic`,
  `shader-int64` (no 64-bit atomics), `immediates` (push constants), `shader-f16` (f16 in
  shaders and storage: Metal's `half`);
* storage bindings of at most 256 MiB: wgpu reports an M1's `maxBufferLength` (which grows with
  the machine's memory, several GiB on every Apple-silicon Mac) capped at 4 GiB - 1; the
  emulation keeps 256 MiB, the smallest buffer length Metal guarantees on any Apple GPU family,
  so that fields larger than that are bound through windows in CI too (lavapipe's own 128 MiB is
  lower still). A buffer may be larger (the adapter's max-buffer-size), bound through windows.
  Where the adapter's bindings are smaller than the M1's (lavapipe), a field is cut into more
  windows than an M1 would need: those extra bindings are the emulator's, not counted against
  the M1's table (`emulated_max_binding`; they must still fit the adapter's own limits).

The loop-iteration cap of llvmpipe still applies when wgpu runs on lavapipe (its Vulkan
backend is underneath): `loop_iteration_cap` is then 65,535, as for the Vulkan runtime.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import GfxUnavailable
from ..protocol import GfxCaps

METAL_BUFFER_SLOTS = 31  # Metal's buffer argument table per stage (wgpu-hal metal/adapter.rs)
# what every spirad pipeline spends of it besides storage buffers: the uniform argument buffer,
# the immediates and naga's buffer-sizes buffer
PIPELINE_RESERVED_SLOTS = 3
M1_MAX_BINDING = 256 << 20
M1_FEATURES = ("shader-float32-atomic", "shader-int64", "immediates", "shader-f16")
LLVMPIPE_LOOP_CAP = 65535


@dataclass(frozen=True, kw_only=True)
class WgpuCaps(GfxCaps):
    """`GfxCaps` (has_f16: shader-f16, f16 arithmetic and f16 in storage buffers; has_storage16
    the same: naga has no 16-bit ints), then what only the wgpu runtime reads."""
    backend: str           # wgpu's backend under the adapter: 'Metal', 'Vulkan', ...
    emulated: bool
    features: frozenset    # the wgpu features the device is created with
    # the largest binding of the device emulated (an M1's 256 MiB), above the adapter's own where
    # that is smaller (lavapipe: 128 MiB); else max_storage_buffer_range. Windows cut at the
    # adapter's limit are counted as the emulated device would bind them (backends/metal.py)
    emulated_max_binding: int
    wgpu_storage_buffers: int      # wgpu's max-storage-buffers-per-shader-stage of the device
    wgpu_uniform_buffers: int      # wgpu's max-uniform-buffers-per-shader-stage
    buffer_slots: int | None       # Metal's buffer argument table (None: not Metal / emulated)


def _adapter():
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")  # wgpu-native's Vulkan loader logs without it
    try:
        import wgpu
    except ImportError:
        raise GfxUnavailable("the Python package 'wgpu' (wgpu-py, spirad's route to Metal) is not "
                             "installed; pip install 'spirad[metal]'") from None
    try:
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    except Exception as e:  # wgpu raises RuntimeError when there is none
        raise GfxUnavailable(f"wgpu found no GPU adapter ({e})") from None
    if adapter is None:
        raise GfxUnavailable("wgpu found no GPU adapter")
    return adapter


def find_adapter(emulate: bool):
    """The adapter spirad's Metal backend uses; GfxUnavailable saying why there is none."""
    adapter = _adapter()
    backend = str(adapter.info.get("backend_type", ""))
    if not emulate and backend.lower() != "metal":
        raise GfxUnavailable(
            f"no Metal GPU: wgpu's adapter is {adapter.info.get('device', '?')} on {backend} "
            f"(Metal needs macOS on Apple silicon; set SPIRAD_METAL_EMULATE=1 to run the Metal "
            f"backend on this adapter with Apple-silicon limits)")
    return adapter


def caps_of(adapter, emulate: bool) -> WgpuCaps:
    info, lim = adapter.info, adapter.limits
    have = set(adapter.features)
    if emulate:
        have &= set(M1_FEATURES)
    wanted = frozenset(f for f in M1_FEATURES + ("shader-int64-atomic-all-ops", "shader-f64")
                       if f in have)
    nsb = int(lim["max-storage-buffers-per-shader-stage"])
    nub = int(lim["max-uniform-buffers-per-shader-stage"])
    rng = lim["max-storage-buffer-binding-size"]
    metal = backend_is_metal(adapter)
    slots = METAL_BUFFER_SLOTS if (metal or emulate) else None
    if emulate:
        nsb, nub = min(nsb, METAL_BUFFER_SLOTS), min(nub, METAL_BUFFER_SLOTS)
        rng = min(rng, M1_MAX_BINDING)
    spirad_storage = nsb if slots is None else min(nsb, slots - PIPELINE_RESERVED_SLOTS)
    device = str(info.get("device", "wgpu adapter"))
    ng = lim["max-compute-workgroups-per-dimension"]
    return WgpuCaps(
        name=f"{device} (wgpu/{info.get('backend_type', '?')}{', Metal emulated' if emulate else ''})",
        backend=str(info.get("backend_type", "")), emulated=emulate, features=wanted,
        has_f64="shader-f64" in wanted, has_i64="shader-int64" in wanted,
        has_int64_atomics="shader-int64-atomic-all-ops" in wanted,
        has_atomic_float32_add="shader-float32-atomic" in wanted, has_atomic_float64_add=False,
        has_f16="shader-f16" in wanted, has_storage16="shader-f16" in wanted,
        max_storage_buffer_range=int(rng), max_buffer_size=int(lim["max-buffer-size"]),
        emulated_max_binding=M1_MAX_BINDING if emulate else int(rng),
        max_per_stage_storage_buffers=int(spirad_storage), wgpu_storage_buffers=nsb,
        wgpu_uniform_buffers=nub, buffer_slots=slots,
        max_compute_work_group_count=(ng, ng, ng),
        max_push_constants_size=int(lim.get("max-immediate-size", 0)) if "immediates" in wanted else 0,
        loop_iteration_cap=LLVMPIPE_LOOP_CAP if "llvmpipe" in device.lower() else None)


def backend_is_metal(adapter) -> bool:
    return str(adapter.info.get("backend_type", "")).lower() == "metal"


def pipeline_buffer_slots(num_bindings: int, uniform: int, push_constant_bytes: int) -> int:
    """Entries of Metal's buffer argument table a compute pipeline takes (wgpu-hal's Metal
    `create_pipeline_layout`): every buffer binding, the immediates, naga's buffer sizes."""
    storage = num_bindings - uniform
    return num_bindings + (1 if push_constant_bytes else 0) + (1 if storage else 0)


def device_limits(adapter, caps: WgpuCaps) -> dict:
    """The limits to create the device with: the adapter's (the M1's where emulated), within
    what spirad uses. Without them wgpu gives a device WebGPU's defaults (8 storage buffers per
    stage, 128 MiB bindings, 256 MiB buffers)."""
    return {"max-storage-buffers-per-shader-stage": caps.wgpu_storage_buffers,
            "max-uniform-buffers-per-shader-stage": caps.wgpu_uniform_buffers,
            "max-storage-buffer-binding-size": caps.max_storage_buffer_range,
            "max-buffer-size": caps.max_buffer_size,
            "max-immediate-size": caps.max_push_constants_size,
            "max-compute-workgroups-per-dimension": caps.max_compute_work_group_count[0]}
