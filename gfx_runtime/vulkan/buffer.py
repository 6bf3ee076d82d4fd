"""Storage buffers and the `Buffer` object the launcher holds.

Why apart from memory: a `Buffer` is the host's handle on device data: its size, whether it is
zero-copy mapped, and the host access API (`view`, `read`, `write`) that works the same on mapped
memory (a memcpy / a numpy view on the mapping) and on device-only memory (a staging copy through
`transfer.py`). Every host access first flushes pending GPU work, so the host never races a
recorded dispatch.

Lifetime: `free()` releases the buffer at once (after flushing pending work that may use it). A
`Buffer` that is garbage-collected instead (it and every numpy view of it gone) is queued and
released at the next flush. Views must not be used after an explicit `free()` or after the
runtime is closed: they alias the mapping, which is gone then.
"""

from __future__ import annotations

import ctypes
import weakref

import numpy as np

from ..errors import GfxDeviceError
from ..protocol import GfxBuffer

from . import memory
from .instance import ffi, lib, vk
from .vkresult import check

MIN_BUFFER_BYTES = 16
# every buffer may also hold vkCmdDispatchIndirect arguments (a kernel writes them: device ranges)
_USAGE = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
          | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT | vk.VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT)


class BufferResource:
    """The Vulkan objects behind one buffer; owned by the runtime, destroyed exactly once."""
    __slots__ = ("handle", "allocation", "size", "freed")

    def __init__(self, handle, allocation: memory.Allocation, size: int):
        self.handle = handle
        self.allocation = allocation
        self.size = size
        self.freed = False

    def destroy(self, device) -> None:
        if self.freed:
            return
        self.freed = True
        lib.vkDestroyBuffer(device, self.handle, ffi.NULL)
        memory.free(device, self.allocation)


def create_resource(device, caps, types: memory.MemoryTypes, nbytes: int,
                    host_visible: bool | None) -> BufferResource:
    """Create and bind a storage buffer of at least `nbytes` (at least 16 bytes, 16-aligned)."""
    if nbytes < 0:
        raise ValueError(f"buffer size must be >= 0, got {nbytes}")
    size = max(MIN_BUFFER_BYTES, (nbytes + 15) & ~15)
    for limit, what in ((caps.max_buffer_size, "maxBufferSize"),
                        (caps.max_memory_allocation_size, "maxMemoryAllocationSize")):
        if size > limit:
            raise GfxDeviceError(
                f"cannot allocate a Vulkan buffer of {memory.format_bytes(nbytes)}: the device "
                f"{caps.name!r} allows at most {memory.format_bytes(limit)} ({what})")
    info = ffi.new("VkBufferCreateInfo*")
    info.sType = vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO
    info.size = size
    info.usage = _USAGE
    info.sharingMode = vk.VK_SHARING_MODE_EXCLUSIVE
    handle = ffi.new("VkBuffer*")
    check(lib.vkCreateBuffer(device, info, ffi.NULL, handle), "vkCreateBuffer")
    try:
        req = ffi.new("VkMemoryRequirements*")
        lib.vkGetBufferMemoryRequirements(device, handle[0], req)
        allocation = memory.allocate(device, types, req, host_visible, nbytes)
    except BaseException:
        lib.vkDestroyBuffer(device, handle[0], ffi.NULL)
        raise
    result = lib.vkBindBufferMemory(device, handle[0], allocation.memory, 0)
    if result != 0:
        lib.vkDestroyBuffer(device, handle[0], ffi.NULL)
        memory.free(device, allocation)
        check(result, "vkBindBufferMemory")
    return BufferResource(handle[0], allocation, size)


def _release_later(runtime_ref, res: BufferResource) -> None:
    rt = runtime_ref()
    if rt is not None:
        rt._defer_free(res)


class Buffer(GfxBuffer):
    """A device storage buffer.

    `nbytes`: the size asked for; `handle`: the VkBuffer (a cffi handle, hashable);
    `host_visible`: True when `view` works (zero-copy mapping); `bindable`: False when the buffer
    is larger than the device's maxStorageBufferRange (it can still be read and written).
    """
    __slots__ = ("_rt", "_res", "nbytes", "handle", "host_visible", "bindable", "_bind_handle",
                 "_token", "_mapbuf", "__weakref__")

    def __init__(self, runtime, res: BufferResource, nbytes: int):
        self._rt = runtime
        self._res = res
        self.nbytes = nbytes
        self.handle = res.handle
        self.host_visible = res.allocation.ptr is not None
        self.bindable = res.size <= runtime.caps.max_storage_buffer_range
        # dispatch() reads this one attribute: the handle, or None when binding must fail.
        self._bind_handle = res.handle if self.bindable else None
        # The token releases the buffer once the Buffer *and* all numpy views of it are gone:
        # views are built on ffi.buffer(token), which keeps the token alive.
        ptr = res.allocation.ptr if self.host_visible else ffi.cast("char*", 0)
        # `rel` is bound now: at interpreter exit module globals may already be None.
        self._token = ffi.gc(ptr, lambda _p, r=weakref.ref(runtime), s=res, rel=_release_later: rel(r, s))
        self._mapbuf = ffi.buffer(self._token, res.size) if self.host_visible else None

    # -- host access ---------------------------------------------------------------------------

    def _live(self):
        rt = self._rt
        if rt.closed:
            raise GfxDeviceError("this Vulkan buffer belongs to a closed runtime "
                                    "(was spirad re-initialised?)")
        if self._res.freed:
            raise GfxDeviceError("this Vulkan buffer was freed")
        return rt

    def _range(self, offset: int, nbytes: int | None) -> int:
        if nbytes is None:
            nbytes = self.nbytes - offset
        if offset < 0 or nbytes < 0 or offset + nbytes > self._res.size:
            raise ValueError(f"byte range [{offset}, {offset + nbytes}) is outside a buffer of "
                             f"{self.nbytes} bytes")
        return nbytes

    def view(self, dtype, count: int | None = None, offset: int = 0) -> np.ndarray:
        """A numpy array aliasing the mapped memory (flushes pending GPU work first)."""
        rt = self._live()
        if not self.host_visible:
            raise GfxDeviceError("this Vulkan buffer lives in device-only memory; use "
                                    "read()/write() instead of view()")
        dtype = np.dtype(dtype)
        if count is None:
            count = (self.nbytes - offset) // dtype.itemsize
        self._range(offset, count * dtype.itemsize)
        rt.flush()
        return np.frombuffer(self._mapbuf, dtype=dtype, count=count, offset=offset)

    def read(self, offset: int = 0, nbytes: int | None = None) -> np.ndarray:
        """Copy `nbytes` bytes from `offset` to a new uint8 numpy array (flushes first)."""
        rt = self._live()
        nbytes = self._range(offset, nbytes)
        rt.flush()
        if self.host_visible:
            return np.frombuffer(self._mapbuf, dtype=np.uint8, count=nbytes, offset=offset).copy()
        return rt._transfer.download(self._res, offset, nbytes)

    def write(self, data, offset: int = 0) -> None:
        """Copy bytes (bytes-like or any numpy array, C order) into the buffer at `offset`."""
        rt = self._live()
        if isinstance(data, np.ndarray):
            src = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        else:
            src = np.frombuffer(data, dtype=np.uint8)
        nbytes = self._range(offset, src.nbytes)
        rt.flush()
        if self.host_visible:
            ffi.memmove(self._res.allocation.ptr + offset, src, nbytes)
        else:
            rt._transfer.upload(self._res, offset, src)

    def write_unused(self, data, offset: int = 0) -> None:
        """`write` for a buffer that no recorded or submitted work uses (new, or recycled after
        a flush): mapped memory is written at once, without flushing the pending work (a launch
        loop writing new argument bytes each time keeps its batch)."""
        if not self.host_visible:
            self.write(data, offset)
            return
        self._live()
        src = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else \
            np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        nbytes = self._range(offset, src.nbytes)
        ffi.memmove(self._res.allocation.ptr + offset, src, nbytes)

    def fill_zero(self) -> None:
        """Set every byte to zero (flushes first)."""
        rt = self._live()
        rt.flush()
        if self.host_visible:
            ctypes.memset(int(ffi.cast("uintptr_t", self._res.allocation.ptr)), 0, self._res.size)
        else:
            rt._transfer.fill_zero(self._res)

    def free(self) -> None:
        """Release the buffer now; idempotent, and a no-op once the runtime is closed."""
        rt = self._rt
        self._bind_handle = None  # dispatch() then takes the slow path and names the problem
        if self._res.freed or rt.closed:
            return
        rt._free_now(self._res)

    def __repr__(self) -> str:
        state = "freed" if self._res.freed else ("mapped" if self.host_visible else "device-only")
        return f"<Buffer {self.nbytes} bytes, {state}>"


class BufferWindow:
    """Bytes [offset, offset + nbytes) of a `Buffer`, bound by `dispatch` as a storage buffer of
    its own (`VulkanRuntime.window`): a buffer larger than maxStorageBufferRange is bound as
    several windows (spirad's root buffers, `spirad/backends/root_buffers.py`). Keeps the
    buffer alive; binding it after the buffer was freed fails like binding the buffer."""
    __slots__ = ("buffer", "offset", "nbytes", "_rt", "_res", "bindable", "_handle")

    def __init__(self, buffer: Buffer, offset: int, nbytes: int):
        self.buffer, self.offset, self.nbytes = buffer, int(offset), int(nbytes)
        self._rt, self._res = buffer._rt, buffer._res
        self.bindable = self.nbytes <= self._rt.caps.max_storage_buffer_range
        self._handle = (self._res.handle, self.offset, self.nbytes)

    @property
    def _bind_handle(self):
        """(VkBuffer, offset, range) for the descriptor, or None when binding must fail."""
        return self._handle if self.bindable and not self._res.freed else None

    def __repr__(self) -> str:
        return f"<BufferWindow {self.nbytes} bytes at {self.offset} of {self.buffer!r}>"
