"""Descriptor sets: pools that grow on demand and a cache keyed by the bound buffers.

Why a cache across batches: a program launches the same few kernels over the same few buffers
again and again; allocating and writing a descriptor set is most of a launch's Python cost, so a
set is built once per (binding count, buffer handles) and reused until a buffer in it is freed.
Sets are never updated after creation, so one set may be used by many command buffers.

A set whose layout has an argument block (`arguments.py`) binds the frame's arena at binding 0
as a dynamic storage buffer of `arg_range` bytes: the offset comes with each bind, so one set
serves every launch over the same buffers, whatever its arguments.

Pools are created as needed and reset all together (only when no batch is pending) once too
many sets have been allocated or invalidated; freeing a buffer only drops its cache entries
(a destroyed VkBuffer's handle value may be reused by a new buffer, so a stale entry must go).
"""

from __future__ import annotations

from .constants import VK_ERROR_FRAGMENTED_POOL, VK_ERROR_OUT_OF_POOL_MEMORY, VK_WHOLE_SIZE
from .instance import ffi, lib, vk
from .vkresult import check

SETS_PER_POOL = 1024
DESCRIPTORS_PER_POOL = 8192
RESET_AFTER_SETS = 16384  # reset everything at the next idle point beyond this many sets


class DescriptorSets:
    def __init__(self, device):
        self.device = device
        self.pools: list = []
        self.current = None
        self.allocated = 0
        self.cache: dict[tuple, object] = {}  # (num_bindings, handles, arg_range) -> set[1]
        self.by_handle: dict[object, list[tuple]] = {}  # buffer handle -> cache keys using it
        self._fresh = 0  # pools[:_fresh] have been handed out since the last reset
        self._alloc_info = ffi.new("VkDescriptorSetAllocateInfo*")
        self._alloc_info.sType = vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO
        self._alloc_info.descriptorSetCount = 1
        self._layout_slot = ffi.new("VkDescriptorSetLayout[1]")
        self._alloc_info.pSetLayouts = self._layout_slot

    def _new_pool(self):
        size = ffi.new("VkDescriptorPoolSize[2]")
        size[0].type = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
        size[0].descriptorCount = DESCRIPTORS_PER_POOL
        size[1].type = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC
        size[1].descriptorCount = SETS_PER_POOL  # at most one (the argument block) per set
        info = ffi.new("VkDescriptorPoolCreateInfo*")
        info.sType = vk.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO
        info.maxSets = SETS_PER_POOL
        info.poolSizeCount = 2
        info.pPoolSizes = size
        out = ffi.new("VkDescriptorPool*")
        check(lib.vkCreateDescriptorPool(self.device, info, ffi.NULL, out),
              "vkCreateDescriptorPool")
        self.pools.append(out[0])
        return out[0]

    def _allocate(self, set_layout):
        out = ffi.new("VkDescriptorSet[1]")
        self._layout_slot[0] = set_layout
        for attempt in range(2):
            if self.current is None:
                self.current = self._next_pool()
            self._alloc_info.descriptorPool = self.current
            result = lib.vkAllocateDescriptorSets(self.device, self._alloc_info, out)
            if result in (VK_ERROR_OUT_OF_POOL_MEMORY, VK_ERROR_FRAGMENTED_POOL):
                self.current = None
                continue
            check(result, "vkAllocateDescriptorSets")
            self.allocated += 1
            return out
        raise RuntimeError("a fresh descriptor pool could not hold one descriptor set")

    def _next_pool(self):
        # Reuse a pool emptied by reset(), else create one.
        if self._fresh < len(self.pools):
            pool = self.pools[self._fresh]
        else:
            pool = self._new_pool()
        self._fresh += 1
        return pool

    def get(self, set_layout, num_bindings: int, handles: tuple, arg_range: int = 0):
        """The descriptor set binding `handles` at bindings 0..n-1: whole buffers, or
        (buffer, offset, range) windows; with `arg_range` > 0, binding 0 is the dynamic argument
        block of that many bytes."""
        key = (num_bindings, handles, arg_range)
        dset = self.cache.get(key)
        if dset is not None:
            return dset
        dset = self._allocate(set_layout)
        if num_bindings:
            infos = ffi.new("VkDescriptorBufferInfo[]", num_bindings)
            writes = ffi.new("VkWriteDescriptorSet[]", num_bindings)
            for i, handle in enumerate(handles):
                if type(handle) is tuple:  # a window of a buffer (buffer.BufferWindow)
                    infos[i].buffer, infos[i].offset, infos[i].range = handle
                else:
                    infos[i].buffer = handle
                    infos[i].offset = 0
                    infos[i].range = arg_range if arg_range and i == 0 else VK_WHOLE_SIZE
                w = writes[i]
                w.sType = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET
                w.dstSet = dset[0]
                w.dstBinding = i
                w.descriptorCount = 1
                w.descriptorType = (vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC
                                    if arg_range and i == 0 else
                                    vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER)
                w.pBufferInfo = infos + i
            lib.vkUpdateDescriptorSets(self.device, num_bindings, writes, 0, ffi.NULL)
        self.cache[key] = dset
        for handle in {h[0] if type(h) is tuple else h for h in handles}:
            self.by_handle.setdefault(handle, []).append(key)
        return dset

    def invalidate(self, handle) -> None:
        """Forget every set that binds `handle` (the buffer is being destroyed)."""
        for key in self.by_handle.pop(handle, ()):
            self.cache.pop(key, None)

    def maybe_reset(self) -> None:
        """Call only when no command buffer using these sets is pending."""
        if self.allocated >= RESET_AFTER_SETS:
            self.reset()

    def reset(self) -> None:
        for pool in self.pools:
            lib.vkResetDescriptorPool(self.device, pool, 0)
        self.cache.clear()
        self.by_handle.clear()
        self.allocated = 0
        self.current = None
        self._fresh = 0

    def destroy(self) -> None:
        for pool in self.pools:
            lib.vkDestroyDescriptorPool(self.device, pool, ffi.NULL)
        self.pools.clear()
        self.cache.clear()
        self.by_handle.clear()
        self.current = None
        self._fresh = 0
