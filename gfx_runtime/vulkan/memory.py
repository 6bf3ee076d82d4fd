"""Device memory: choosing a memory type, allocating, mapping, and the size checks before that.

Why apart from `buffer.py`: the policy (which memory a storage buffer lives in) is the part that
differs between devices, and it is easier to read and test on its own. Policy, in order:

1. DEVICE_LOCAL | HOST_VISIBLE | HOST_COHERENT, persistently mapped: zero-copy host access. This
   is all memory on lavapipe and on integrated GPUs, and the resizable BAR on discrete GPUs.
2. DEVICE_LOCAL without host access: the host goes through a staging buffer (`transfer.py`).
3. HOST_VISIBLE | HOST_COHERENT, mapped (a device without the above).

An allocation that runs out of memory in one kind falls through to the next; a request larger
than the device's reported limits (heap size, maxMemoryAllocationSize, maxBufferSize) is refused
up front with `GfxDeviceError`, because drivers are allowed to crash on such calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import GfxDeviceError

from . import constants as C
from .instance import ffi, lib, vk
from .vkresult import check, result_name

DEVICE_LOCAL = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
HOST_VISIBLE = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
HOST_COHERENT = vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
MAPPABLE = HOST_VISIBLE | HOST_COHERENT

# (required property flags, map it?) in order of preference, per requested host access.
_POLICY = {
    None: ((DEVICE_LOCAL | MAPPABLE, True), (DEVICE_LOCAL, False), (MAPPABLE, True)),
    True: ((DEVICE_LOCAL | MAPPABLE, True), (MAPPABLE, True)),
    False: ((DEVICE_LOCAL, False), (0, False)),
}


def format_bytes(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n} bytes ({n / size:.3g} {unit})"
    return f"{n} bytes"


@dataclass
class MemoryTypes:
    flags: list[int]        # per memory type
    heap_of: list[int]      # per memory type
    heap_sizes: list[int]   # per heap

    @classmethod
    def query(cls, physical_device) -> "MemoryTypes":
        props = ffi.new("VkPhysicalDeviceMemoryProperties*")
        lib.vkGetPhysicalDeviceMemoryProperties(physical_device, props)
        types = [props.memoryTypes[i] for i in range(props.memoryTypeCount)]
        return cls(flags=[int(t.propertyFlags) for t in types],
                   heap_of=[int(t.heapIndex) for t in types],
                   heap_sizes=[int(props.memoryHeaps[i].size)
                               for i in range(props.memoryHeapCount)])

    def candidates(self, type_bits: int, host_visible: bool | None) -> list[tuple[int, bool]]:
        """(memory type index, map it) pairs to try, best first."""
        out = []
        for required, mapped in _POLICY[host_visible]:
            for i, flags in enumerate(self.flags):
                if type_bits & (1 << i) and flags & required == required:
                    if (i, mapped) not in out:
                        out.append((i, mapped))
        return out


class Allocation:
    """One VkDeviceMemory, mapped for its whole life when `ptr` is not None."""
    __slots__ = ("memory", "size", "ptr")

    def __init__(self, memory, size: int, ptr):
        self.memory = memory
        self.size = size
        self.ptr = ptr


def allocate(device, types: MemoryTypes, requirements, host_visible: bool | None,
             requested: int) -> Allocation:
    """Allocate memory for `requirements` (VkMemoryRequirements) following the policy above."""
    candidates = types.candidates(int(requirements.memoryTypeBits), host_visible)
    if not candidates:
        raise GfxDeviceError(
            "no Vulkan memory type fits a storage buffer"
            + (" with host access" if host_visible else ""))
    size = int(requirements.size)
    info = ffi.new("VkMemoryAllocateInfo*")
    info.sType = vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO
    info.allocationSize = size
    memory = ffi.new("VkDeviceMemory*")
    last_error = None
    for type_index, mapped in candidates:
        heap_size = types.heap_sizes[types.heap_of[type_index]]
        if size > heap_size:
            last_error = f"the memory heap holds only {format_bytes(heap_size)}"
            continue
        info.memoryTypeIndex = type_index
        result = lib.vkAllocateMemory(device, info, ffi.NULL, memory)
        if result in C.OUT_OF_MEMORY_RESULTS:
            last_error = result_name(result)
            continue
        check(result, "vkAllocateMemory")
        ptr = None
        if mapped:
            pptr = ffi.new("void**")
            result = lib.vkMapMemory(device, memory[0], 0, C.VK_WHOLE_SIZE, 0, pptr)
            if result != C.VK_SUCCESS:
                lib.vkFreeMemory(device, memory[0], ffi.NULL)
                last_error = f"vkMapMemory: {result_name(result)}"
                continue
            ptr = ffi.cast("char*", pptr[0])
        return Allocation(memory[0], size, ptr)
    raise GfxDeviceError(f"out of Vulkan device memory allocating {format_bytes(requested)} "
                            f"({last_error}); free fields/ndarrays or use smaller shapes")


def free(device, allocation: Allocation) -> None:
    if allocation.ptr is not None:
        lib.vkUnmapMemory(device, allocation.memory)
        allocation.ptr = None
    lib.vkFreeMemory(device, allocation.memory, ffi.NULL)
