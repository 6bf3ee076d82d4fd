"""Vulkan runtime of spirad, through the `vulkan` (cffi) package.

Split by Vulkan concept (as kompute / vkdispatch do): `instance` (process-wide VkInstance and
validation messages), `device` (selection, `DeviceCaps`), `memory` and `buffer` (storage buffers,
mapping), `transfer` (staging copies), `pipeline` (shader modules, layouts, pipeline cache),
`descriptors` (descriptor pools and set cache), `commands` (recording), `queue` (submission),
and `runtime` (`VulkanRuntime`, the API the driver uses; see its module docstring).
"""

from __future__ import annotations

__all__ = ["VulkanRuntime", "DeviceCaps", "Buffer", "Pipeline", "is_available"]

_available: bool | None = None


def is_available() -> bool:
    """True when a Vulkan loader and at least one usable compute device exist. Never raises.

    The answer is cached per process: the first call creates the (process-wide) instance and
    enumerates devices, later calls are free.
    """
    global _available
    if _available is None:
        try:
            from .device import select_physical_device
            from .instance import get_instance
            select_physical_device(get_instance(False))
            _available = True
        except Exception:
            _available = False
    return _available


def __getattr__(name: str):
    # Lazy: importing gfx_runtime.vulkan must not load libvulkan (is_available() may say no).
    if name == "VulkanRuntime":
        from .runtime import VulkanRuntime
        return VulkanRuntime
    if name == "DeviceCaps":
        from .device import DeviceCaps
        return DeviceCaps
    if name == "Buffer":
        from .buffer import Buffer
        return Buffer
    if name == "Pipeline":
        from .pipeline import Pipeline
        return Pipeline
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
