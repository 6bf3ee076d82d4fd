"""Storage buffers of the wgpu runtime, with a host mirror.

wgpu buffers cannot stay mapped while the GPU uses them, yet spirad's backends hand out numpy
views of a buffer (`view`) that the caller may also write (the status words are cleared in
place). So a buffer has a host mirror: `view` reads the device contents into it (after the
pending work that uses the buffer is done) and returns it; the next dispatch that binds the
buffer uploads the mirror first (the view may have been written) and drops it. `read` returns a
copy, `write` uploads through `queue.write_buffer` (after pending work that binds the buffer).
"""
from __future__ import annotations

import numpy as np

from ..errors import GfxDeviceError
from .errors import wgpu_errors


class Buffer:
    __slots__ = ("_rt", "handle", "nbytes", "_mirror", "__weakref__")

    def __init__(self, rt, handle, nbytes: int):
        self._rt, self.handle, self.nbytes = rt, handle, int(nbytes)
        self._mirror = None  # np.uint8 array handed out by view(), uploaded before the next use

    def _live(self):
        if self.handle is None:
            raise GfxDeviceError("use of a freed wgpu buffer")
        return self.handle

    def _range(self, offset: int, nbytes: int | None) -> int:
        nbytes = self.nbytes - offset if nbytes is None else int(nbytes)
        if offset < 0 or nbytes < 0 or offset + nbytes > self.nbytes:
            raise GfxDeviceError(f"range [{offset}, {offset + nbytes}) outside a buffer of "
                                 f"{self.nbytes} bytes")
        return nbytes

    def _host_bytes(self) -> np.ndarray:
        return wgpu_errors(self._fill_mirror)()

    def _fill_mirror(self) -> np.ndarray:
        """The mirror, filled from the device when there is none (waits for pending work)."""
        if self._mirror is None:
            self._rt._before_host_access(self)
            size = (self.nbytes + 3) & ~3
            data = self._rt._queue.read_buffer(self._live(), 0, size)
            self._mirror = np.frombuffer(data, dtype=np.uint8)[:self.nbytes].copy()
        return self._mirror

    def view(self, dtype, count: int | None = None, offset: int = 0) -> np.ndarray:
        """A numpy array of the contents; writes to it reach the device before its next use."""
        dt = np.dtype(dtype)
        nbytes = self._range(offset, None if count is None else count * dt.itemsize)
        return self._host_bytes()[offset:offset + nbytes].view(dt)

    def read(self, offset: int = 0, nbytes: int | None = None) -> np.ndarray:
        nbytes = self._range(offset, nbytes)
        return self._host_bytes()[offset:offset + nbytes].copy()

    def write(self, data, offset: int = 0) -> None:
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        self._range(offset, raw.nbytes)
        if self._mirror is not None:  # the mirror stays the truth until the next upload
            self._mirror[offset:offset + raw.nbytes] = raw
            return
        self._rt._before_host_access(self)
        if offset % 4 or raw.nbytes % 4:  # queue.write_buffer takes whole words only
            self._host_bytes()[offset:offset + raw.nbytes] = raw
            return
        wgpu_errors(self._rt._queue.write_buffer)(self._live(), offset, raw)

    def write_unused(self, data, offset: int = 0) -> None:
        """`write` for a buffer no pending work uses (the Vulkan runtime's name; wgpu's `write`
        already waits only for work that uses the buffer)."""
        self.write(data, offset)

    def fill_zero(self) -> None:
        self.write(np.zeros(self.nbytes, np.uint8))

    def _upload_mirror(self) -> None:
        """Called by the runtime before a dispatch binds this buffer."""
        m, self._mirror = self._mirror, None
        pad = (-m.nbytes) % 4
        self._rt._queue.write_buffer(self._live(), 0, m if not pad else np.concatenate(
            [m, np.zeros(pad, np.uint8)]))

    def free(self) -> None:
        if self.handle is not None:
            self._rt._release(self)
            self.handle = None

    def __repr__(self) -> str:
        return f"<wgpu Buffer {self.nbytes} bytes{' freed' if self.handle is None else ''}>"
