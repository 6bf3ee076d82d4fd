"""Argument blocks: the few bytes a dispatch reads at binding 0, placed in a per-frame arena.

Why: a kernel relaunched with a new scalar (`step(t)`, thousands of times per iteration) used to
get a new small device buffer per distinct argument bytes, a descriptor set for it, and a wait
for the device once the buffers ran out. Instead, a pipeline created with `arguments=True`
declares binding 0 a dynamic storage buffer (VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC) and a
dispatch gives that binding as bytes: they are copied into the arena of the frame being
recorded (host-visible, coherent memory) and bound at their offset (`pDynamicOffsets`), so every
launch shares one descriptor set per set of buffers and writing the arguments is one memmove.
Where a block goes (alignment, the range it is bound with, a repeated block placed once, what
does not fit) is `gfx_runtime.arena`, shared with the wgpu runtime; this module writes the bytes.

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

from ..arena import ArgumentArena
from .instance import ffi

FIRST_ARENA = 64 * 1024
MAX_ARENA = 4 * 1024 * 1024


class Arena(ArgumentArena):
    """One frame's argument arena: a mapped buffer filled from the start, batch by batch."""
    __slots__ = ("buffer", "handle", "ptr")

    def __init__(self, buffer, align: int):
        super().__init__(buffer._res.size, align)
        self.buffer = buffer              # a host-visible `Buffer` (the runtime's)
        self.handle = buffer._bind_handle
        self.ptr = buffer._res.allocation.ptr

    def _write(self, offset: int, data: bytes) -> None:
        ffi.memmove(self.ptr + offset, data, len(data))
