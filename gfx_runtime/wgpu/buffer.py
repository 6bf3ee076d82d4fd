"""Storage buffers of the wgpu runtime, with host mirrors of byte ranges.

wgpu buffers cannot stay mapped while the GPU uses them, yet spirad's backends hand out numpy
views of a buffer (`view`) that the caller may also write (the status words are cleared in
place, a field's elements are assigned). So `view(dtype, count, offset)` reads that byte range's
device contents into a host *mirror* (after the pending work that uses the buffer is done) and
returns a view of it; the next dispatch that binds the buffer uploads its mirrors first (a view
may have been written) and drops them. Mirrors cover ranges, not whole buffers: a root buffer
holds many fields, and reading one field's elements must not copy the others. A view inside an
existing mirror shares it; one that overlaps a mirror without fitting in it uploads that mirror
first. `read` returns a copy, `write` uploads through `queue.write_buffer` (after pending work
that binds the buffer), or patches the mirror that holds its range.

Lifetime: `free()` destroys the buffer at once; a `Buffer` garbage-collected instead (a dropped
ndarray) is destroyed by its finalizer, which also drops the runtime's cached bind groups that
bind it (`WgpuRuntime._release`). The cache holds the wgpu handle, so without that a dropped
ndarray's device memory stayed allocated until the cache filled (4,096 groups).
"""
from __future__ import annotations

import weakref

import numpy as np

from ..errors import GfxDeviceError
from ..protocol import GfxBuffer
from .errors import wgpu_errors


class Buffer(GfxBuffer):
    __slots__ = ("_rt", "handle", "nbytes", "_mirrors", "_finalizer", "__weakref__")

    def __init__(self, rt, handle, nbytes: int):
        self._rt, self.handle, self.nbytes = rt, handle, int(nbytes)
        self._mirrors = None  # {byte offset: np.uint8 array}: host copies, uploaded before next use
        self._finalizer = weakref.finalize(self, _dropped, weakref.ref(rt), handle)

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

    # -- mirrors -------------------------------------------------------------------------------
    def _covering(self, lo: int, hi: int):
        """(offset, array) of the mirror holding bytes [lo, hi), or None."""
        if self._mirrors:
            for off, arr in self._mirrors.items():
                if off <= lo and hi <= off + arr.nbytes:
                    return off, arr
        return None

    def _upload_overlapping(self, lo: int, hi: int) -> None:
        """Upload and drop the mirrors that overlap bytes [lo, hi)."""
        if not self._mirrors:
            return
        for off in [o for o, a in self._mirrors.items() if o < hi and lo < o + a.nbytes]:
            self._upload(off, self._mirrors.pop(off))
        if not self._mirrors:
            self._mirrors = None

    def _upload(self, off: int, arr: np.ndarray) -> None:
        pad = (-arr.nbytes) % 4
        self._rt._queue.write_buffer(self._live(), off, arr if not pad else np.concatenate(
            [arr, np.zeros(pad, np.uint8)]))

    def _mirror(self, lo: int, hi: int) -> tuple:
        """(offset, array) of a mirror holding bytes [lo, hi) (read from the device when none
        does; waits for pending work)."""
        hit = self._covering(lo, hi)
        if hit is not None:
            return hit
        self._rt._before_host_access(self)
        a, b = lo & ~3, min((hi + 3) & ~3, self.handle.size)
        self._upload_overlapping(a, b)  # mirrors never overlap
        data = self._rt._queue.read_buffer(self._live(), a, b - a)
        arr = np.frombuffer(data, dtype=np.uint8)[:min(b, self.nbytes) - a].copy()
        if self._mirrors is None:
            self._mirrors = {}
        self._mirrors[a] = arr
        return a, arr

    def _upload_mirrors(self) -> None:
        """Called by the runtime before a dispatch binds this buffer (or a copy reads it)."""
        mirrors, self._mirrors = self._mirrors, None
        for off, arr in mirrors.items():
            self._upload(off, arr)

    # -- host access ---------------------------------------------------------------------------
    def view(self, dtype, count: int | None = None, offset: int = 0) -> np.ndarray:
        """A numpy array of the contents; writes to it reach the device before its next use."""
        dt = np.dtype(dtype)
        nbytes = self._range(offset, None if count is None else count * dt.itemsize)
        if not nbytes:
            return np.zeros(0, dt)
        off, arr = wgpu_errors(self._mirror)(offset, offset + nbytes)
        return arr[offset - off:offset - off + nbytes].view(dt)

    def read(self, offset: int = 0, nbytes: int | None = None) -> np.ndarray:
        nbytes = self._range(offset, nbytes)
        if not nbytes:
            return np.zeros(0, np.uint8)
        hit = self._covering(offset, offset + nbytes)
        if hit is not None:
            return hit[1][offset - hit[0]:offset - hit[0] + nbytes].copy()
        return wgpu_errors(self._read)(offset, nbytes)

    def _read(self, offset: int, nbytes: int) -> np.ndarray:
        self._rt._before_host_access(self)
        self._upload_overlapping(offset, offset + nbytes)
        a, b = offset & ~3, min((offset + nbytes + 3) & ~3, self.handle.size)
        data = self._rt._queue.read_buffer(self._live(), a, b - a)
        return np.frombuffer(data, dtype=np.uint8)[offset - a:offset - a + nbytes].copy()

    def write(self, data, offset: int = 0) -> None:
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        self._range(offset, raw.nbytes)
        if not raw.nbytes:
            return
        hit = self._covering(offset, offset + raw.nbytes)
        if hit is not None:  # the mirror stays the truth until the next upload
            hit[1][offset - hit[0]:offset - hit[0] + raw.nbytes] = raw
            return
        wgpu_errors(self._write)(raw, offset)

    def _write(self, raw: np.ndarray, offset: int) -> None:
        self._rt._before_host_access(self)
        if offset % 4 or raw.nbytes % 4:  # queue.write_buffer takes whole words only
            off, arr = self._mirror(offset, offset + raw.nbytes)
            arr[offset - off:offset - off + raw.nbytes] = raw
            return
        self._upload_overlapping(offset, offset + raw.nbytes)
        self._rt._queue.write_buffer(self._live(), offset, raw)

    def write_unused(self, data, offset: int = 0) -> None:
        """`write` for a buffer no pending work uses (the Vulkan runtime's name; wgpu's `write`
        already waits only for work that uses the buffer)."""
        self.write(data, offset)

    def fill_zero(self) -> None:
        self.write(np.zeros(self.nbytes, np.uint8))

    def free(self) -> None:
        if self.handle is not None:
            self._finalizer.detach()
            self._rt._release(self)
            self.handle = None
            self._mirrors = None

    def __repr__(self) -> str:
        return f"<wgpu Buffer {self.nbytes} bytes{' freed' if self.handle is None else ''}>"


class Window:
    """Bytes [offset, offset + nbytes) of a `Buffer`, which `dispatch` binds as a buffer of that
    size (`WgpuRuntime.window`: a buffer larger than one binding, bound piecewise). Its mirrors
    and pending state are its buffer's."""
    __slots__ = ("buffer", "offset", "nbytes")

    def __init__(self, buffer: Buffer, offset: int, nbytes: int):
        self.buffer, self.offset, self.nbytes = buffer, int(offset), int(nbytes)

    def __repr__(self) -> str:
        return f"<wgpu Window {self.nbytes} bytes at {self.offset} of {self.buffer!r}>"


def _dropped(rt_ref, handle) -> None:
    """A Buffer was garbage-collected: no pending pass binds it (the runtime keeps a reference to
    every buffer of the unsubmitted pass), so its bind groups and memory may go now."""
    rt = rt_ref()
    if rt is not None and not rt.closed:
        rt._forget(handle)
        handle.destroy()
