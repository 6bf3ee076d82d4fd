"""Where argument blocks go in an arena: the placement rules both SPIR-V runtimes follow.

A pipeline made with `arguments=True` is given its binding 0 as bytes with each dispatch (the
launch's arguments, `gfx_runtime.protocol`). The runtime puts those bytes into one arena buffer
and binds the arena at the block's offset (a dynamic offset), so every launch over the same
buffers shares one descriptor set / bind group whatever its arguments. `ArgumentArena.place` is
the one definition of where a block goes:

- a block of n bytes takes `block_range(n)` bytes: whole 16-byte rows, at least one (a uniform
  binding reads uvec4s, a storage binding u32s), and it is bound with that range;
- blocks follow each other from offset 0, each at a multiple of `align` (at least 16, and the
  device's minimum storage / uniform buffer offset alignment);
- the same bytes object as the block placed last since `reset` is placed once: its offset again
  (a launch's several dispatches, or a loop whose arguments did not change: the launch path
  keeps one bytes object per set of argument values, so identity is the check, not equality);
- a block that does not fit in what is left is not placed (`place` returns None);
- the same bytes object placed first (at offset 0) as the first block before the last `reset`
  is not written again: offset 0 holds it still (only a first block writes there; the device
  only reads an arena), so a `launch; sync()` loop with unchanged arguments writes nothing.

What the runtime then does, and how the bytes reach the device, is its own: Vulkan grows the
arena or moves on to the next frame and writes into mapped memory (`vulkan/arguments.py`); wgpu
submits the pass and starts over, staging the bytes on the host and writing them with the pass
(`wgpu/runtime.py`). A subclass gives `_write`.
"""
from __future__ import annotations


def block_range(nbytes: int) -> int:
    """The bytes an argument block of `nbytes` bytes takes and is bound with: whole 16-byte
    rows, at least one."""
    return max(16, (nbytes + 15) & ~15)


class ArgumentArena:
    """The placement bookkeeping of one arena of `size` bytes (module doc); `_write(offset,
    data)` puts a placed block's bytes there."""
    __slots__ = ("size", "align", "used", "last", "last_offset", "last_range", "first")

    def __init__(self, size: int, align: int):
        align = max(16, int(align))
        if align & (align - 1):
            raise ValueError(f"argument block alignment {align} is not a power of two")
        self.size = int(size)
        self.align = align
        self.first = None  # the block written at offset 0 (kept across `reset`)
        self.reset()

    def reset(self) -> None:
        """Start over at offset 0: no pending work reads what the arena holds any more."""
        self.used = 0       # bytes taken, rounded up to `align`: the next block's offset
        self.last = None    # the block placed last, its offset and range (the bound bytes)
        self.last_offset = 0
        self.last_range = 0

    def place(self, data: bytes):
        """The offset of block `data` (written there by `_write` unless it is the block placed
        last, or the first block and there already), or None when it does not fit."""
        if data is self.last:
            return self.last_offset
        off = self.used
        rng = block_range(len(data))
        if off + rng > self.size:
            return None
        if off or data is not self.first:
            self._write(off, data)
            if not off:
                self.first = data
        self.used = (off + rng + self.align - 1) & -self.align
        self.last, self.last_offset, self.last_range = data, off, rng
        return off

    def _write(self, offset: int, data: bytes) -> None:
        raise NotImplementedError
