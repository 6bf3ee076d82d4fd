"""Root buffers: the memory of every field (and its .grad / .dual) and kernel temporary on the
SPIR-V backends (Vulkan, Metal), shared by offset.

Why: one storage buffer per field makes a kernel's binding count grow with the number of fields
it touches, past what a device allows (Metal: 8 per stage). Here fields live in a few large
buffers, *chunks*, at 8-byte aligned offsets (`spirv_codegen.buffers`), so a kernel binds the
chunk(s) it touches, and the SPIR-V addresses a field as (chunk view, element offset).

Allocation: first fit, in the order fields are first used. A chunk's buffer starts small and is
replaced by one twice as large (the contents copied on the device, `rt.copy`) until it reaches
`limit` = the device's largest binding (maxStorageBufferRange / wgpu's storage binding size,
capped below 2**31 bytes: element indices are i32); then a new chunk starts. So most programs
have one chunk; one whose fields pass the limit has as few as fit (a kernel then binds only the
chunks of the fields it uses). Offsets never change once given: a kernel compiled earlier keeps
its code when fields are added; its next launch binds the grown buffer.

A field larger than `limit` (DiffTaichi's diffmpm3d: 179 MiB of positions, lavapipe binds 128
MiB) gets a *windowed* chunk of its own: one buffer of its size (up to the device's largest
buffer, `max_bytes`; a larger field is refused here, naming it and both limits), bound as
ceil(size / limit) windows of `limit` bytes (`rt.window`; the last one shorter). A kernel that
touches it binds every window of each view it uses, and each access picks its window by
branching on element // (limit / element size) (`spirv_codegen.buffers`, `Interface.access`);
kernels that touch only fields under the limit compile exactly as before. Why windows and not
buffer device addresses (PhysicalStorageBuffer64): windows are plain storage bindings, so the
same code runs on wgpu (Metal), which has no device addresses, and under the validation layer
unchanged. Host access (`view`, `read`, `write`) is to the one buffer as for any chunk.

Fields of the default root are never freed before `close()` (they live as long as their
`sd.init()`); a replaced buffer is released by the runtime once nothing refers to it (a numpy
view handed out earlier keeps its memory valid).

A FieldsBuilder tree (`spirad.data.fields_builder`) gets chunks of its own (`Chunk.tree`; first fit
looks only at the chunks of the same tree, and spirad's own words stay in the default root's),
so `release(tree)` returns them whole: each chunk drops its buffer (the runtime destroys it once
the work launched on it is done) and its slot in `chunks` is taken by the next new chunk (chunk
indices are compiled into kernels' buffer maps; destroying a tree bumps the layout version, so
every kernel is planned and compiled again before it binds a reused index).

Ndarrays share the default root's chunks (never a tree's) (the *arenas* of docs/backends.md, "Binding model"): `sd.ndarray`s,
their gradients / duals and the device copies of host arrays passed to kernels are placed by
`place_ndarray`, so a kernel over any number of ndarrays binds one view per chunk it touches and
reads each ndarray's element offset from its argument block (`spirv_codegen.buffers`). Unlike
fields they come and go, so their slices are freed: a slice's finalizer (the last reference to
the `RootSlice` gone: its ndarray, and every alias or launch plan that holds it) queues its range
in `released`, which is appended to from any thread (a deque) and never touched by the finalizer
otherwise. Work already recorded may still read a released range, so it joins its chunk's free
list only after a flush (`_reclaim`), and only when a placement would otherwise grow a chunk or
start a new one: churn (an ndarray dropped and another created, each launch) reuses the same
bytes instead of growing the arena, and creating ndarrays costs no wait while the arena has
room. A range taken from the free list is zeroed (host write, after the work that used it) as a
new ndarray must be. An ndarray larger than one chunk (`limit`: lavapipe's 128 MiB binding) is
not placed here: the backend gives it a buffer of its own, bound directly (counted against the
binding limit).

`RootSlice` is the storage the backend hands out for a field (`BackendBase.allocate_field`);
host access (`view`, `read`, `write`) goes to its chunk's buffer at its offset.
"""
from __future__ import annotations

import weakref
from collections import deque

import numpy as np

from spirv_codegen.buffers import MAX_CHUNK_BYTES, ROOT_ALIGN

FIRST_CHUNK_BYTES = 64 << 10
_GRAIN = 256  # chunk sizes: multiples of this (wgpu binding sizes, uniform array strides)


class Chunk:
    __slots__ = ("index", "buffer", "used", "limit", "windows", "window_bytes", "tree", "free")

    def __init__(self, index: int, buffer, limit: int, tree=None):
        self.index, self.buffer, self.used, self.limit = index, buffer, 0, limit
        self.free = []        # freed ndarray ranges [offset, size], sorted, coalesced
        self.windows = ()     # a windowed chunk: the runtime windows its launches bind
        self.window_bytes = 0  # ... each of this many bytes (the last may be shorter)
        self.tree = tree      # the FieldsBuilder tree it holds the fields of (None: the root's)

    def __repr__(self) -> str:
        return f"<root chunk {self.index}: {self.used} of {self.buffer.nbytes} bytes>"


class WindowBinding:
    """One window of a windowed chunk, as a launch sees a chunk: `.buffer` is what it binds."""
    __slots__ = ("buffer",)

    def __init__(self, window):
        self.buffer = window


def bindings_of(chunk: Chunk) -> tuple:
    """What a launch binds for a view of `chunk`, each read as `.buffer` at the launch: the
    chunk itself (its buffer then: it may have grown), or each of its windows."""
    return (chunk,) if not chunk.windows else tuple(WindowBinding(w) for w in chunk.windows)


class RootSlice:
    """`nbytes` bytes at byte `offset` of root chunk `chunk`: a field's (or temporary's) memory
    (`name`: the field's, for errors)."""
    __slots__ = ("chunk", "offset", "nbytes", "name", "__weakref__")

    def __init__(self, chunk: Chunk, offset: int, nbytes: int, name: str = ""):
        self.chunk, self.offset, self.nbytes, self.name = chunk, offset, nbytes, name

    def __repr__(self) -> str:
        return f"<root slice {self.nbytes} bytes at {self.offset} of chunk {self.chunk.index}>"


def _round(n: int, grain: int) -> int:
    return -(-int(n) // grain) * grain


class RootBuffers:
    """The root chunks of one backend (`rt`: its runtime, `alloc` / `copy` / `Buffer.free`)."""

    def __init__(self, rt, binding_limit: int, max_bytes: int, device: str = "the device"):
        self.rt = rt
        self.limit = max(_GRAIN, min(int(binding_limit), MAX_CHUNK_BYTES) // _GRAIN * _GRAIN)
        self.max_bytes = int(max_bytes)  # the largest buffer: the largest windowed field
        self.device = device
        self.chunks: list = []  # by index; None where a released tree's chunk was
        self.by_key: dict = {}  # field id -> RootSlice
        self.grown = 0          # buffer replacements so far (tests, benchmarks)
        self.released = deque()  # (chunk, offset, size) of dropped ndarray slices, not yet free
        self.reclaims = 0       # flushes that moved released ranges to free lists (tests)

    def _new_chunk(self, buffer, limit: int, tree) -> Chunk:
        """A chunk in the first free slot of `chunks` (one a released tree left), else a new one."""
        index = next((i for i, c in enumerate(self.chunks) if c is None), len(self.chunks))
        chunk = Chunk(index, buffer, limit, tree)
        if index == len(self.chunks):
            self.chunks.append(chunk)
        else:
            self.chunks[index] = chunk
        return chunk

    def release(self, tree) -> None:
        """Return the chunks of FieldsBuilder tree `tree` (destroyed; no field uses them)."""
        for i, c in enumerate(self.chunks):
            if c is not None and c.tree is tree:
                c.buffer, c.windows, c.used = None, (), c.limit  # nothing binds or fits in it
                self.chunks[i] = None
        self.by_key = {k: s for k, s in self.by_key.items() if s.chunk.tree is not tree}

    def place(self, nbytes: int, key=None, name: str = "", tree=None) -> RootSlice:
        """A zero-filled slice of `nbytes` bytes (remembered under `key`: a field's id; `name`:
        the field's, for the error of one larger than the device's largest buffer; `tree`: the
        FieldsBuilder tree it belongs to, placed only in that tree's chunks)."""
        nbytes = max(int(nbytes), 1)
        size = _round(nbytes, ROOT_ALIGN)
        if size > self.limit:  # larger than a binding: a windowed chunk of its own
            if size > self.max_bytes:
                from kernel_ir.errors import SpiradDeviceError
                raise SpiradDeviceError(
                    f"field {name or '?'} takes {nbytes} bytes, more than the largest buffer "
                    f"{self.device} allows ({self.max_bytes} bytes; fields larger than one "
                    f"storage binding, {self.limit} bytes, are bound in windows, but must fit "
                    f"one buffer); use a smaller field or split it into several fields")
            chunk = self._new_chunk(self.rt.alloc(size), size, tree)
            chunk.window_bytes = self.limit
            chunk.windows = tuple(self.rt.window(chunk.buffer, off, min(self.limit, size - off))
                                  for off in range(0, size, self.limit))
            s = RootSlice(chunk, 0, nbytes, name)
            chunk.used = size
        else:
            chunk = next((c for c in self.chunks if c is not None and c.tree is tree
                          and c.used + size <= c.limit), None)
            if chunk is None:
                chunk = self._new_chunk(None, self.limit, tree)
            s = RootSlice(chunk, chunk.used, nbytes, name)
            self._reserve(chunk, chunk.used + size)
            chunk.used += size
        if key is not None:
            self.by_key[key] = s
        return s

    def _reserve(self, chunk: Chunk, need: int) -> None:
        """Make `chunk.buffer` hold at least `need` bytes (a new, larger buffer: contents copied)."""
        cur = chunk.buffer
        if cur is not None and cur.nbytes >= need:
            return
        have = 0 if cur is None else cur.nbytes
        size = min(chunk.limit, _round(max(need, 2 * have, FIRST_CHUNK_BYTES), _GRAIN))
        new = self.rt.alloc(size)
        if cur is not None:
            self.rt.copy(cur, new, chunk.used)
            self.grown += 1  # `cur` is released when its last user (a numpy view) is gone
        chunk.buffer = new

    # -- ndarrays: placed and freed (module doc) -------------------------------------------------
    def place_ndarray(self, nbytes: int, name: str = "ndarray"):
        """A zero-filled slice of `nbytes` bytes for an ndarray, freed when the slice is no
        longer referenced; None when it is larger than one chunk (the caller binds a buffer of
        its own)."""
        nbytes = max(int(nbytes), 1)
        size = _round(nbytes, ROOT_ALIGN)
        if size > self.limit:
            return None
        sl = self._from_free(size, nbytes, name)
        if sl is None:  # room in a chunk's buffer as it is: no growth, no wait
            chunk = next((c for c in self._arena_chunks() if c.buffer is not None
                          and c.used + size <= c.buffer.nbytes), None)
            if chunk is None and self.released:
                self._reclaim()
                sl = self._from_free(size, nbytes, name)
            if sl is None:
                if chunk is None:
                    chunk = next((c for c in self._arena_chunks() if c.used + size <= c.limit),
                                 None)
                if chunk is None:
                    chunk = self._new_chunk(None, self.limit, None)
                sl = RootSlice(chunk, chunk.used, nbytes, name)
                self._reserve(chunk, chunk.used + size)
                chunk.used += size
        f = weakref.finalize(sl, self.released.append, (sl.chunk, sl.offset, size))
        f.atexit = False
        return sl

    def _arena_chunks(self):
        """The chunks ndarrays may use: the default root's (a FieldsBuilder tree's chunks are
        returned whole by `release`), not windowed, not released."""
        return (c for c in self.chunks if c is not None and c.tree is None and not c.windows)

    def _from_free(self, size: int, nbytes: int, name: str):
        """A slice of `nbytes` (`size` rounded) bytes from a chunk's free list (first fit), zeroed; or None."""
        for c in self._arena_chunks():
            for j, (off, n) in enumerate(c.free):
                if n >= size:
                    if n == size:
                        del c.free[j]
                    else:
                        c.free[j] = [off + size, n - size]
                    c.buffer.write(np.zeros(size, np.uint8), off)  # after the work that used it
                    return RootSlice(c, off, nbytes, name)
        return None

    def _reclaim(self) -> None:
        """Move the released ranges to their chunks' free lists, after a flush: no work
        recorded before their release reads them any more."""
        self.rt.flush()
        self.reclaims += 1
        while True:
            try:
                chunk, off, size = self.released.popleft()
            except IndexError:
                return
            _insert_free(chunk.free, off, size)

    def free_bytes(self) -> int:
        """Bytes on the chunks' free lists (tests)."""
        return sum(n for c in self.chunks if c is not None for _, n in c.free)

    def nbytes(self) -> int:
        """Bytes of all chunk buffers."""
        return sum(c.buffer.nbytes for c in self.chunks if c is not None and c.buffer is not None)

    def windowed(self) -> dict:
        """chunk index -> (window count, window bytes) of the windowed chunks."""
        return {c.index: (len(c.windows), c.window_bytes) for c in self.chunks
                if c is not None and c.windows}


def _insert_free(free: list, off: int, size: int) -> None:
    """Insert [off, size] into the sorted free list `free`, merged with its neighbours."""
    import bisect
    j = bisect.bisect_left(free, [off, 0])
    if j and free[j - 1][0] + free[j - 1][1] == off:  # merge with the range before
        j -= 1
        free[j][1] += size
    else:
        free.insert(j, [off, size])
    if j + 1 < len(free) and free[j][0] + free[j][1] == free[j + 1][0]:  # ... and the one after
        free[j][1] += free.pop(j + 1)[1]
