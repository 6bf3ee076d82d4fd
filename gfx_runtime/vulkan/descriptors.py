"""Descriptor sets: pools that grow on demand and a cache keyed by the bound buffers.

Why a cache across batches: a program launches the same few kernels over the same few buffers
again and again; allocating and writing a descriptor set is most of a launch's Python cost, so a
set is built once per (binding count, buffer handles) and reused until a buffer in it is freed.
Sets are never updated after creation, so one set may be used by many command buffers.

A set whose layout has an argument block (`arguments.py`) binds the frame's arena at binding 0
as a dynamic storage buffer of `arg_range` bytes: the offset comes with each bind, so one set
serves every launch over the same buffers, whatever its arguments.

Lifetime: the runtime destroys a buffer only once no pending work can use it (`runtime.py`), so
the sets that bind it are unused too: `invalidate` frees them (pools are created with
FREE_DESCRIPTOR_SET) and forgets their keys under *every* buffer they bind (a set binds an
ndarray and the long-lived argument arena: a key left under the arena would grow its list by
one per ndarray ever launched on). A destroyed VkBuffer's handle value may be reused by a new
buffer, so a stale entry must go in any case. A pool whose sets are all freed is reset (no
fragmentation left), and the next allocation prefers a pool with room over a new one, so the
pools stay as many as the live sets need. A program that keeps more than `RESET_AFTER_SETS`
sets alive (many combinations of long-lived buffers) has them all reset at the next idle point.
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
        self.allocated = 0  # sets alive (allocated and not freed) since the last reset
        self.cache: dict[tuple, object] = {}  # (num_bindings, handles, arg_range) -> set[1]
        self.pool_of: dict[tuple, object] = {}  # cache key -> the pool its set came from
        self.by_handle: dict[object, set[tuple]] = {}  # buffer handle -> cache keys using it
        self.live: dict[object, int] = {}  # pool -> its sets alive
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
        info.flags = vk.VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT
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
        tried = set()
        while True:
            if self.current is None:
                self.current = self._next_pool(tried)
            pool = self.current
            self._alloc_info.descriptorPool = pool
            result = lib.vkAllocateDescriptorSets(self.device, self._alloc_info, out)
            if result in (VK_ERROR_OUT_OF_POOL_MEMORY, VK_ERROR_FRAGMENTED_POOL):
                if self.live.get(pool, 0) == 0:
                    raise RuntimeError("an empty descriptor pool could not hold one descriptor set")
                tried.add(pool)
                self.current = None
                continue
            check(result, "vkAllocateDescriptorSets")
            self.allocated += 1
            self.live[pool] = self.live.get(pool, 0) + 1
            return out, pool

    def _next_pool(self, tried):
        # A handed-out pool at most half full (sets were freed from it), else one emptied by
        # reset(), else a new one.
        for pool in self.pools[:self._fresh]:
            if pool not in tried and self.live.get(pool, 0) <= SETS_PER_POOL // 2:
                return pool
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
        dset, pool = self._allocate(set_layout)
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
        self.pool_of[key] = pool
        for handle in _buffers_of(handles):
            self.by_handle.setdefault(handle, set()).add(key)
        return dset

    def invalidate(self, handle) -> None:
        """Free every set that binds `handle` (the buffer is being destroyed, and no pending
        work uses it) and forget it under every buffer it binds."""
        for key in self.by_handle.pop(handle, ()):
            dset = self.cache.pop(key)
            pool = self.pool_of.pop(key)
            for other in _buffers_of(key[1]):
                keys = self.by_handle.get(other)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self.by_handle[other]
            check(lib.vkFreeDescriptorSets(self.device, pool, 1, dset), "vkFreeDescriptorSets")
            self.allocated -= 1
            left = self.live[pool] = self.live[pool] - 1
            if not left:  # nothing alive in it: reset it, no fragmentation left
                lib.vkResetDescriptorPool(self.device, pool, 0)

    def maybe_reset(self) -> None:
        """Call only when no command buffer using these sets is pending."""
        if self.allocated >= RESET_AFTER_SETS:
            self.reset()

    def reset(self) -> None:
        for pool in self.pools:
            lib.vkResetDescriptorPool(self.device, pool, 0)
        self.cache.clear()
        self.pool_of.clear()
        self.by_handle.clear()
        self.live.clear()
        self.allocated = 0
        self.current = None
        self._fresh = 0

    def destroy(self) -> None:
        for pool in self.pools:
            lib.vkDestroyDescriptorPool(self.device, pool, ffi.NULL)
        self.pools.clear()
        self.cache.clear()
        self.pool_of.clear()
        self.by_handle.clear()
        self.live.clear()
        self.current = None
        self._fresh = 0


def _buffers_of(handles) -> set:
    """The buffers a set binds: whole buffers and the buffers of (buffer, offset, range)
    windows."""
    return {h[0] if type(h) is tuple else h for h in handles}
