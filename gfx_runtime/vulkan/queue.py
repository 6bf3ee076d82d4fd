"""Submission: command buffers in a small ring of frames, each with its own fence.

Why apart from recording: a batch that grows past the runtime's cap is submitted without waiting
and recording continues in the next frame, so the device works while Python records; `wait_all`
(the runtime's `flush`) is the only place the host blocks. After a frame's fence is waited on,
its command buffer is reset implicitly by the next `vkBeginCommandBuffer` (pool created with
RESET_COMMAND_BUFFER) and its fence is reset before reuse.

`run_once` records and runs one command buffer synchronously (staging copies, fills).

Completion serials: the runtime numbers its batches (`Frame.serial`); `completed` is the highest
serial known to have finished. A fence wait covers every earlier submission on the queue (the
fence's first synchronization scope includes all commands earlier in submission order), so a
finished serial implies every lower one finished too. The runtime frees buffers dropped while
work was pending once `completed` passes the serial they were dropped under (`runtime.py`);
`poll` advances it without blocking.
"""

from __future__ import annotations

from . import commands
from .constants import UINT64_MAX, VK_TIMEOUT
from .instance import ffi, lib, vk
from .vkresult import check

FRAMES = 2


class Frame:
    __slots__ = ("cmd", "cmd_array", "fence", "fence_array", "in_flight", "arena", "serial")

    def __init__(self, cmd, fence):
        self.cmd = cmd
        self.cmd_array = ffi.new("VkCommandBuffer[1]", [cmd])
        self.fence = fence
        self.fence_array = ffi.new("VkFence[1]", [fence])
        self.in_flight = False
        self.arena = None  # the runtime's argument arena of this frame (`arguments.py`)
        self.serial = 0    # the runtime's number of the batch recorded into it


class Queue:
    def __init__(self, device, queue, family: int):
        self.device = device
        self.queue = queue
        info = ffi.new("VkCommandPoolCreateInfo*")
        info.sType = vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO
        info.flags = vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT
        info.queueFamilyIndex = family
        pool = ffi.new("VkCommandPool*")
        check(lib.vkCreateCommandPool(device, info, ffi.NULL, pool), "vkCreateCommandPool")
        self.pool = pool[0]
        self.frames = [self._new_frame() for _ in range(FRAMES)]
        self.once = self._new_frame()
        self.next = 0
        self.others: list = []  # frames outside the ring submitted since the last wait_all
        self.completed = 0  # the highest batch serial known to have finished
        self._submit = ffi.new("VkSubmitInfo*")
        self._submit.sType = vk.VK_STRUCTURE_TYPE_SUBMIT_INFO
        self._submit.commandBufferCount = 1
        self._once_begin = commands.one_time_begin_info()

    def _new_frame(self) -> Frame:
        alloc = ffi.new("VkCommandBufferAllocateInfo*")
        alloc.sType = vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO
        alloc.commandPool = self.pool
        alloc.level = vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY
        alloc.commandBufferCount = 1
        cmd = ffi.new("VkCommandBuffer*")
        check(lib.vkAllocateCommandBuffers(self.device, alloc, cmd), "vkAllocateCommandBuffers")
        finfo = ffi.new("VkFenceCreateInfo*")
        finfo.sType = vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO
        fence = ffi.new("VkFence*")
        check(lib.vkCreateFence(self.device, finfo, ffi.NULL, fence), "vkCreateFence")
        return Frame(cmd[0], fence[0])

    def acquire(self) -> Frame:
        """The next frame of the ring, waited for if it is still in flight."""
        frame = self.frames[self.next]
        self.next = (self.next + 1) % FRAMES
        if frame.in_flight:
            self.wait(frame)
        return frame

    def submit(self, frame: Frame) -> None:
        self._submit.pCommandBuffers = frame.cmd_array
        check(lib.vkQueueSubmit(self.queue, 1, self._submit, frame.fence), "vkQueueSubmit")
        frame.in_flight = True

    def submit_other(self, frame: Frame) -> None:
        """Submit a frame that is not one of the ring's (a recording's copy, `recording.py`):
        `poll` and `wait_all` cover it too."""
        self.submit(frame)
        self.others.append(frame)

    def wait(self, frame: Frame) -> None:
        while True:
            result = lib.vkWaitForFences(self.device, 1, frame.fence_array, 1, UINT64_MAX)
            if result != VK_TIMEOUT:
                break
        frame.in_flight = False  # even on error: the device is lost then, nothing is in flight
        check(result, "vkWaitForFences")
        self._finished(frame)

    def _finished(self, frame: Frame) -> None:
        if frame.serial > self.completed:
            self.completed = frame.serial
        check(lib.vkResetFences(self.device, 1, frame.fence_array), "vkResetFences")

    def poll(self) -> int:
        """Advance `completed` over the frames whose fences have signalled (no waiting)."""
        for frame in self.frames + self.others:
            if frame.in_flight and lib.vkGetFenceStatus(self.device, frame.fence) == 0:
                frame.in_flight = False
                self._finished(frame)
        if self.others:
            self.others = [f for f in self.others if f.in_flight]
        return self.completed

    def wait_all(self) -> None:
        for frame in self.frames + self.others:
            if frame.in_flight:
                self.wait(frame)
        self.others = []

    def run_once(self, record) -> None:
        """Record with `record(cmd)`, submit, and wait. Call only with nothing pending."""
        frame = self.once
        commands.begin(frame.cmd, self._once_begin)
        record(frame.cmd)
        commands.end(frame.cmd)
        self.submit(frame)
        self.wait(frame)

    def destroy(self) -> None:
        for frame in self.frames + [self.once]:
            lib.vkDestroyFence(self.device, frame.fence, ffi.NULL)
        lib.vkDestroyCommandPool(self.device, self.pool, ffi.NULL)  # frees the command buffers
        self.frames = []
