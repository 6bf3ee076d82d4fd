"""wgpu runtime of spirad: SPIR-V compute on Metal (macOS) through wgpu-py / wgpu-native.

wgpu translates each SPIR-V module with naga (to MSL on a Mac, back to SPIR-V on Linux), so the
same code path runs on Apple silicon and, with `emulate=True`, on any adapter (lavapipe in CI)
with the limits of an M1 imposed (`caps.py`). Split: `caps` (what the adapter can do), `buffer`
(storage buffers with a host mirror), `runtime` (`WgpuRuntime`, the API the backend calls; the
same shape as `gfx_runtime.vulkan.VulkanRuntime`).

This package imports neither `spirad` nor `kernel_ir` (architecture §1); errors are `gfx_runtime.errors`.
"""
from __future__ import annotations

__all__ = ["WgpuRuntime", "WgpuCaps", "is_available", "unavailable_reason"]

_probe: dict = {}  # emulate flag -> (available, reason why not)


def _probe_once(emulate: bool) -> tuple:
    if emulate not in _probe:
        try:
            from .caps import find_adapter
            find_adapter(emulate)
            _probe[emulate] = (True, "")
        except Exception as e:  # no package, no adapter, not a Metal adapter: the reason
            _probe[emulate] = (False, str(e))
    return _probe[emulate]


def is_available(emulate: bool = False) -> bool:
    """True when wgpu imports and finds a Metal adapter (any adapter with `emulate`). Never
    raises; cached per process."""
    return _probe_once(bool(emulate))[0]


def unavailable_reason(emulate: bool = False) -> str:
    return _probe_once(bool(emulate))[1]


def __getattr__(name: str):
    # Lazy: importing gfx_runtime.wgpu must not load wgpu-native (is_available() may say no).
    if name == "WgpuRuntime":
        from .runtime import WgpuRuntime
        return WgpuRuntime
    if name == "WgpuCaps":
        from .caps import WgpuCaps
        return WgpuCaps
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
