"""Vulkan runtime of spirad, through the `vulkan` (cffi) package.

Split by Vulkan concept (as kompute / vkdispatch do): `instance` (process-wide VkInstance and
validation messages), `device` (selection, `DeviceCaps`), `memory` and `buffer` (storage buffers,
mapping), `transfer` (staging copies), `pipeline` (shader modules, layouts, pipeline cache),
`descriptors` (descriptor pools and set cache), `commands` (recording), `queue` (submission),
and `runtime` (`VulkanRuntime`, the API the driver uses; see its module docstring).
"""

from __future__ import annotations

__all__ = ["VulkanRuntime", "DeviceCaps", "Buffer", "Pipeline", "is_available",
           "unavailable_reason"]

_probe: tuple | None = None  # (available, reason why not)


def _probe_once() -> tuple:
    """Create the (process-wide) instance and pick a device once per process; remember why not.

    Each missing piece has its own message: the `vulkan` Python binding, the loader library
    libvulkan.so.1 (the binding dlopens it at import), a driver (no instance), a compute device."""
    global _probe
    if _probe is None:
        try:
            import vulkan  # noqa: F401
        except ImportError:
            _probe = (False, "the Python package 'vulkan' (the Vulkan binding spirad uses) is not "
                             "installed; pip install vulkan (or pip install 'spirad[vulkan]')")
            return _probe
        except OSError:
            _probe = (False, "the Vulkan loader (libvulkan.so.1) was not found; install libvulkan1 "
                             "and a driver (mesa-vulkan-drivers for lavapipe, software Vulkan)")
            return _probe
        try:
            from .device import select_physical_device
            from .instance import get_instance
            select_physical_device(get_instance(False))
            _probe = (True, "")
        except Exception as e:  # no driver, no compute device: the runtime's own message
            _probe = (False, str(e))
    return _probe


def is_available() -> bool:
    """True when a Vulkan loader and at least one usable compute device exist. Never raises.

    The answer is cached per process: the first call creates the (process-wide) instance and
    enumerates devices, later calls are free.
    """
    return _probe_once()[0]


def unavailable_reason() -> str:
    """Why `is_available()` is False ('' when it is True)."""
    return _probe_once()[1]


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
