"""Turning `VkResult` codes into Python exceptions.

The hot paths call `vk.lib` directly (the binding's wrappers are slow and some are wrong), so they
get raw result codes back; this module is the one place that decides what a code means for the
user: memory exhaustion and a lost device are `GfxDeviceError` (a device limit, recoverable or
at least explainable), anything else is an internal `RuntimeError` naming the failed call.
"""

from ..errors import GfxDeviceError

from . import constants as C


def result_name(result: int) -> str:
    return C.RESULT_NAMES.get(result, f"VkResult({result})")


def check(result: int, what: str) -> None:
    """Raise if `result` (returned by the Vulkan call described by `what`) is an error."""
    if result == C.VK_SUCCESS:
        return
    if result in C.OUT_OF_MEMORY_RESULTS:
        raise GfxDeviceError(f"{what} failed: {result_name(result)} (out of memory)")
    if result == C.VK_ERROR_DEVICE_LOST:
        raise GfxDeviceError(
            f"{what} failed: VK_ERROR_DEVICE_LOST; the Vulkan device crashed or was reset "
            "(often a kernel that ran too long or accessed memory out of bounds); "
            "re-initialise the runtime")
    if result < 0:
        raise RuntimeError(f"{what} failed: {result_name(result)}")
