"""Recordings: dispatches recorded once into command buffers that are submitted again and again
(spirad's launch graphs, `spirad.launch_graph`; `VulkanRuntime.record` / `replay`).

Why: an eager launch records its dispatches into the batch being built (`commands.Batch`), one
`vkCmd*` sequence of Python calls per dispatch at every launch. A replayed graph runs the same
dispatches over the same buffers every time; only argument blocks differ (rebound scalars). A
recording holds them in a command buffer recorded once, with the barriers a batch puts between
its dispatches and at its end (the same `Batch` code records it): a replay writes the argument
blocks that changed into the recording's own argument buffer and submits the command buffer,
one vkQueueSubmit and no per-dispatch work on the host.

Two copies: a command buffer may not be submitted again while it is pending (it is recorded
without SIMULTANEOUS_USE), and its argument blocks may not be rewritten while the device may
read them. A recording alternates between two copies, each a command buffer with its own fence
and its own half of the argument buffer, each recorded at its first use, so a loop of replays
waits only when the device is two replays behind (as the batch ring, `queue.py`).

Its own descriptor sets (a `DescriptorSets` of its own): the runtime's cache frees sets when a
buffer is destroyed and resets them all past a count (`descriptors.py`), either of which would
leave a recorded command buffer invalid. A recording keeps its buffers alive (`keep`); whoever
records decides when it is stale (spirad's backend: a root chunk grown into a new buffer) and
records anew. The command buffers, fences and sets are destroyed once the recording is dropped
and no submission of it is pending (`VulkanRuntime.flush`, `close`).
"""

from __future__ import annotations

from ..arena import block_range
from . import commands
from .descriptors import DescriptorSets
from .instance import ffi, lib, vk


class Parts:
    """What a recording owns on the device, destroyed apart from the `Recording` (which goes
    first, with the graph that held it)."""
    __slots__ = ("frames", "dsets")

    def __init__(self, device):
        self.frames = []  # `queue.Frame`s of the copies recorded so far
        self.dsets = DescriptorSets(device)

    def destroy(self, device, pool) -> None:
        """Call only when no submission of the frames is pending."""
        for frame in self.frames:
            lib.vkFreeCommandBuffers(device, pool, 1, frame.cmd_array)
            lib.vkDestroyFence(device, frame.fence, ffi.NULL)
        self.frames = []
        self.dsets.destroy()


class Recording:
    """Dispatches to submit again (`VulkanRuntime.record`): `dispatches` as the runtime takes
    them, with buffers[0] of a pipeline with arguments the index of its block in `blocks`."""
    __slots__ = ("dispatches", "offsets", "lengths", "half", "arg_buffer", "parts", "copies",
                 "next", "written", "keep", "__weakref__")

    def __init__(self, dispatches, blocks, arg_buffer, half: int, offsets, parts: Parts):
        self.dispatches = dispatches
        self.offsets = offsets        # per block: its byte offset in a copy's half
        self.lengths = tuple(map(len, blocks))  # per block: its bytes (fixed: the bound range)
        self.half = half              # bytes of one copy's half of `arg_buffer`
        self.arg_buffer = arg_buffer  # host-visible: two halves of argument blocks
        self.parts = parts
        self.copies = [None, None]    # per copy: its Frame once recorded
        self.next = 0                 # the copy the next replay submits
        self.written = [None, None]   # per copy: the block objects its half holds
        # every buffer the dispatches bind: alive while the recording may be submitted
        self.keep = [b for d in dispatches for b in d[1][1 if d[0].arguments else 0:]] + \
            [d[4][0] for d in dispatches if d[4] is not None]


def layout(blocks, align: int) -> tuple:
    """(offset of each block in a half, bytes of a half): blocks one after another, each at a
    multiple of `align` (the device's storage offset alignment, at least 16)."""
    align = max(16, align)
    offsets, used = [], 0
    for b in blocks:
        offsets.append(used)
        used = (used + block_range(len(b)) + align - 1) & -align
    return offsets, max(used, align)


def record_copy(rt, rec: Recording, copy: int, begin_info, bind_handle) -> None:
    """Record copy `copy` of `rec` into a new frame (command buffer and fence)."""
    frame = rt._queue._new_frame()
    rec.parts.frames.append(frame)
    batch = commands.Batch(begin_info)
    batch.begin(frame.cmd)
    base = copy * rec.half
    arg_handle = rec.arg_buffer._bind_handle
    dsets = rec.parts.dsets
    for pipeline, buffers, groups, push, indirect in rec.dispatches:
        nb = pipeline.num_bindings
        if pipeline.arguments:
            k = buffers[0]
            rng = block_range(rec.lengths[k])
            handles = (arg_handle, *map(bind_handle, buffers[1:]))
            dset = dsets.get(pipeline.set_layout, nb, handles, rng)
            offset = base + rec.offsets[k]
        else:
            dset = dsets.get(pipeline.set_layout, nb, tuple(map(bind_handle, buffers))) \
                if nb else None
            offset = None
        gx, gy, gz = groups
        batch.dispatch(pipeline, dset, push, gx, gy, gz,
                       None if indirect is None else (bind_handle(indirect[0]), indirect[1]),
                       offset)
    batch.finish()
    rec.copies[copy] = frame


def reusable_begin_info():
    """Begin info of a command buffer submitted more than once (not ONE_TIME_SUBMIT)."""
    info = ffi.new("VkCommandBufferBeginInfo*")
    info.sType = vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO
    info.flags = 0
    return info
