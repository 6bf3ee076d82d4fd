"""The Vulkan backend: the SPIR-V backend (`spirv_backend.py`) over `gfx_runtime.vulkan` with the
Vulkan profile (`spirv_codegen.profile.VULKAN`: compare-exchange, two adstack heaps, storage
buffers only).

Availability: a Vulkan loader and a compute device (lavapipe, Mesa's software Vulkan, in CI);
`SPIRAD_VULKAN_DEVICE` picks one and `SPIRAD_VALIDATION=1` turns the Khronos validation layer on
(`spirad.options`).
"""
from __future__ import annotations

import functools

from .spirv_backend import SpirvBackend


class VulkanBackend(SpirvBackend):
    name = "vulkan"

    # the per-stage storage-buffer limit, as the error names it
    LIMIT_NAME = "per shader stage (maxPerStageDescriptorStorageBuffers)"

    @functools.cached_property  # read on every adstack launch (`_heaps`): looked up once
    def profile(self):
        from spirv_codegen.profile import VULKAN
        return VULKAN

    def _max_buffer_bytes(self) -> int:
        return min(self.caps.max_buffer_size, self.caps.max_memory_allocation_size)

    def _make_runtime(self):
        from gfx_runtime.vulkan import VulkanRuntime

        from .. import options
        return VulkanRuntime(validation=options.get("SPIRAD_VALIDATION"),
                             device=options.get("SPIRAD_VULKAN_DEVICE"))

    @classmethod
    def is_available(cls) -> bool:
        try:
            from gfx_runtime.vulkan import is_available as avail
        except ImportError:
            return False
        return avail()

    @classmethod
    def unavailable_reason(cls) -> str:
        try:
            from gfx_runtime.vulkan import unavailable_reason as reason
        except ImportError as e:  # an installation without the runtime package
            return f"the Vulkan runtime of spirad cannot be imported ({e})"
        return reason()


Backend = VulkanBackend
