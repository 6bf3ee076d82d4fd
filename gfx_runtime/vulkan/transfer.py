"""Host <-> device-only memory: a reusable staging buffer and synchronous copy commands.

Why: on a discrete GPU without a host-visible device-local heap, storage buffers are not
mappable; `Buffer.read` / `Buffer.write` then copy through one persistently mapped staging buffer
(grown by doubling up to STAGING_CAP, larger transfers go in chunks). Transfers run synchronously
after the runtime has flushed, so they never interleave with a recorded batch; the barrier that
ends every command buffer (`commands.end`) orders them against earlier and later dispatches.
"""

from __future__ import annotations

import numpy as np

from . import buffer as buffer_mod
from .instance import ffi, lib

STAGING_MIN = 1 << 20
STAGING_CAP = 64 << 20


class Transfer:
    def __init__(self, device, caps, types, queue):
        self.device = device
        self.caps = caps
        self.types = types
        self.queue = queue
        self.staging: buffer_mod.BufferResource | None = None
        self._region = ffi.new("VkBufferCopy*")

    def _staging(self, nbytes: int) -> buffer_mod.BufferResource:
        want = min(max(nbytes, STAGING_MIN), STAGING_CAP)
        if self.staging is None or self.staging.size < want:
            size = want
            if self.staging is not None:
                size = min(max(want, 2 * self.staging.size), STAGING_CAP)
                self.staging.destroy(self.device)
                self.staging = None
            self.staging = buffer_mod.create_resource(self.device, self.caps, self.types, size,
                                                      host_visible=True)
        return self.staging

    def _copy(self, src, dst, src_offset: int, dst_offset: int, nbytes: int) -> None:
        region = self._region
        region.srcOffset = src_offset
        region.dstOffset = dst_offset
        region.size = nbytes
        self.queue.run_once(lambda cmd: lib.vkCmdCopyBuffer(cmd, src, dst, 1, region))

    def upload(self, res, offset: int, src: np.ndarray) -> None:
        done = 0
        while done < src.nbytes:
            staging = self._staging(src.nbytes - done)
            n = min(staging.size, src.nbytes - done)
            ffi.memmove(staging.allocation.ptr, src[done:done + n], n)
            self._copy(staging.handle, res.handle, 0, offset + done, n)
            done += n

    def download(self, res, offset: int, nbytes: int) -> np.ndarray:
        out = np.empty(nbytes, dtype=np.uint8)
        done = 0
        while done < nbytes:
            staging = self._staging(nbytes - done)
            n = min(staging.size, nbytes - done)
            self._copy(res.handle, staging.handle, offset + done, 0, n)
            ffi.memmove(out[done:done + n], staging.allocation.ptr, n)
            done += n
        return out

    def fill_zero(self, res) -> None:
        self.queue.run_once(lambda cmd: lib.vkCmdFillBuffer(cmd, res.handle, 0, res.size, 0))

    def destroy(self) -> None:
        if self.staging is not None:
            self.staging.destroy(self.device)
            self.staging = None
