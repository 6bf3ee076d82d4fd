"""Argument blocks: the few bytes a dispatch reads at binding 0, placed in a per-frame arena.

Why: a kernel relaunched with a new scalar (`step(t)`, thousands of times per iteration) used to
get a new small device buffer per distinct argument bytes, a descriptor set for it, and a wait
for the device once the buffers ran out. Instead, a pipeline created with `arguments=True`
declares binding 0 a dynamic storage buffer (VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC) and a
dispatch gives that binding as bytes: they are copied into the arena of the frame being
recorded (host-visible, coherent memory) and bound at their offset (`pDynamicOffsets`), so every
launch shares one descriptor set per set of buffers and writing the arguments is one memmove.

Reuse is safe without waiting: each frame of the submission ring (`queue.py`) owns an arena,
which is rewritten from its start only when that frame is acquired for a new batch, i.e. after
its fence says the batch that read it completed (the runtime's existing wait, at a full batch or
`flush`). A batch reads only its own frame's arena: a launch whose dispatches straddle two
batches places its bytes again in the second (`reset` forgets what the arena held).

Growth: an arena that fills up within one batch is replaced by one twice as large (the old one
is freed at the next idle point, after the batch that binds it), up to `MAX_ARENA` bytes; past
that the runtime submits the batch without waiting and continues in the next frame.
"""

from __future__ import annotations

from ..protocol import block_range
from .instance import ffi

FIRST_ARENA = 64 * 1024
MAX_ARENA = 4 * 1024 * 1024


class Arena:
    """One frame's argument arena: a mapped buffer filled from the start, batch by batch."""
    __slots__ = ("buffer", "handle", "ptr", "size", "used", "align", "last", "last_offset",
                 "last_range")

    def __init__(self, buffer, align: int):
        self.buffer = buffer              # a host-visible `Buffer` (the runtime's)
        self.handle = buffer._bind_handle
        self.ptr = buffer._res.allocation.ptr
        self.size = buffer._res.size
        self.align = max(16, align)
        self.used = 0
        self.last = None                  # the bytes placed last, their offset and range
        self.last_offset = 0
        self.last_range = 0

    def reset(self) -> None:
        """Start over for a new batch (the frame's previous batch has completed)."""
        self.used = 0
        self.last = None

    def place(self, data: bytes):
        """The offset of `data` in this arena, or None when it does not fit (the caller grows
        the arena or starts a new batch). The same bytes object as the previous call of this
        batch (a launch's several dispatches, a loop with unchanged arguments) is placed once."""
        if data is self.last:
            return self.last_offset
        off = self.used
        rng = block_range(len(data))
        if off + rng > self.size:
            return None
        ffi.memmove(self.ptr + off, data, len(data))
        self.used = (off + rng + self.align - 1) & -self.align
        self.last, self.last_offset, self.last_range = data, off, rng
        return off
