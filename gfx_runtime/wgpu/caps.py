"""What a wgpu adapter can do, as the limits spirad compiles against.

On a Mac the adapter is Metal's. With `emulate=True` any adapter is accepted and the limits of an
M1 (Apple7 GPU family, the oldest Apple silicon) are imposed on top of the adapter's own, so a
kernel that runs emulated on lavapipe also fits a real Mac:

* 8 storage buffers per shader stage (wgpu's Metal limit), no f64 (Metal has none);
* only wgpu features an M1 has: `shader-float32-atomic`, `shader-int64` (no 64-bit atomics),
  `immediates` (push constants);
* storage bindings of at most 256 MiB (Metal's default binding limit on small machines); a
  buffer may be larger (the adapter's max-buffer-size), bound through windows of at most that.

The loop-iteration cap of llvmpipe still applies when wgpu runs on lavapipe (its Vulkan
backend is underneath): `loop_iteration_cap` is then 65,535, as for the Vulkan runtime.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import GfxUnavailable

M1_STORAGE_BUFFERS = 8
M1_MAX_BINDING = 256 << 20
M1_FEATURES = ("shader-float32-atomic", "shader-int64", "immediates")
LLVMPIPE_LOOP_CAP = 65535


@dataclass(frozen=True)
class WgpuCaps:
    name: str
    backend: str           # wgpu's backend under the adapter: 'Metal', 'Vulkan', ...
    emulated: bool
    features: frozenset    # the wgpu features the device is created with
    has_f64: bool
    has_i64: bool
    has_int64_atomics: bool
    has_atomic_float32_add: bool
    has_atomic_float64_add: bool
    max_storage_buffer_range: int  # the largest storage binding
    max_buffer_size: int           # the largest buffer (bound through windows past the above)
    max_per_stage_storage_buffers: int
    max_compute_work_group_count: tuple
    max_push_constants_size: int
    loop_iteration_cap: int | None


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
    nsb = lim["max-storage-buffers-per-shader-stage"]
    rng = lim["max-storage-buffer-binding-size"]
    if emulate:
        nsb, rng = min(nsb, M1_STORAGE_BUFFERS), min(rng, M1_MAX_BINDING)
    device = str(info.get("device", "wgpu adapter"))
    ng = lim["max-compute-workgroups-per-dimension"]
    return WgpuCaps(
        name=f"{device} (wgpu/{info.get('backend_type', '?')}{', Metal emulated' if emulate else ''})",
        backend=str(info.get("backend_type", "")), emulated=emulate, features=wanted,
        has_f64="shader-f64" in wanted, has_i64="shader-int64" in wanted,
        has_int64_atomics="shader-int64-atomic-all-ops" in wanted,
        has_atomic_float32_add="shader-float32-atomic" in wanted, has_atomic_float64_add=False,
        max_storage_buffer_range=int(rng), max_buffer_size=int(lim["max-buffer-size"]),
        max_per_stage_storage_buffers=int(nsb),
        max_compute_work_group_count=(ng, ng, ng),
        max_push_constants_size=int(lim.get("max-immediate-size", 0)) if "immediates" in wanted else 0,
        loop_iteration_cap=LLVMPIPE_LOOP_CAP if "llvmpipe" in device.lower() else None)


def device_limits(adapter, caps: WgpuCaps) -> dict:
    """The limits to create the device with (wgpu's defaults are lower than the adapter's)."""
    lim = adapter.limits
    return {"max-storage-buffers-per-shader-stage": caps.max_per_stage_storage_buffers,
            "max-storage-buffer-binding-size": caps.max_storage_buffer_range,
            "max-buffer-size": caps.max_buffer_size,
            "max-immediate-size": caps.max_push_constants_size,
            "max-compute-workgroups-per-dimension": caps.max_compute_work_group_count[0]}
