"""Where each global of a kernel lives: in its own storage buffer, or in a root buffer at an offset.

Why: a kernel that binds one buffer per field and gradient needs more storage buffers than a
device allows as soon as it touches a few dozen fields (Metal through wgpu: 8 per stage;
lavapipe: 32). Fields, their gradients / duals and the kernel temporaries live instead in shared
*root buffers* (chunks of at most the device's binding size), so a kernel binds the root
buffer(s) it touches, whatever the number of fields. Ndarrays share the same chunks (arenas,
`spirad.backends.root_buffers`) unless one is larger than a chunk (or is an imported buffer):
then it has its own buffer. Which chunk each ndarray of a launch sits in is part of the code
(the backend keeps a program variant per assignment: nearly always one); its offset is not.

    BufferMap.own_buffers(abi)            every ref in its own buffer (binding 2 + k): the layout
                                          of `spirv_codegen.lower`'s tests and tools
    root_map(tl, abi, caps, chunk_of)     refs k in `chunk_of` in root chunks, the rest own

Binding numbers (descriptor set 0):

    0                   the argument buffer
    1                   the status buffer, unless the status words live in a root chunk (then
                        they are u32 words there, at the offset of argument word `status_word`,
                        and the views start at binding 1: `first_array`)
    2 .. 2+V-1          root *views*: view v = (chunk c, element type T) is chunk c's buffer
                        declared as a runtime array of T (ArrayStride = T's size). A field is
                        read and written through the view of its storage type (`view_dtype`):
                        f32 -> f32 (u32 where a task adds to it with a compare-and-swap loop),
                        f64 -> f64 (u64 likewise), i32 / u32 / u1 -> u32 (bitcast; u1 as 0/1),
                        i64 / u64 -> u64 (bitcast), except a signed int a task takes an atomic
                        min / max of (its own type). Two views of a chunk alias one buffer but
                        (with one exception) never the same bytes within a task: a field is
                        accessed through one view per task, and distinct fields do not overlap.
                        The exception: an f32 field a task takes an atomic min / max of under a
                        profile without compare-and-swap (Metal) is accessed through its u32 view
                        and, for the signed half of that atomic, an i32 view (`extra_views`,
                        `atomics.float_min_max_by_sign`).
                        A view of a *windowed* chunk (`windows`: one field larger than the
                        device's largest binding, alone in its chunk) takes W consecutive
                        bindings, window w = bytes [w * B, min((w + 1) * B, size)) of the
                        buffer (B = the chunk's window bytes, a multiple of 256): an access to
                        element i goes through window i // (B / element size), at element
                        i % (B / element size) (`interface.Interface.access`: one branch per
                        window). A scalar never straddles two windows (B is a multiple of every
                        element size). Maps without windowed chunks number views as above.
    2+V .. 2+V+O-1      the refs with their own buffer, in ABI order (`own`; V counts window
                        bindings)
    2+V+O ...           adstack metadata and heap(s), then a device range's arguments
                        (`end` = first_array + V + O replaces 2 + the ref count of the
                        one-buffer-per-ref layout)

A root-placed ref k finds element 0 at element `base` of its view, where `base` (a u32, the ref's
byte offset / its element size) is argument-buffer word `offset_words[k]`: the words follow the
KernelABI's arguments (`arg_bytes` is the whole argument buffer). Every ndarray ref has a word,
whether it sits in a chunk or in its own buffer (then 0, unread), so the argument layout is the
same for every chunk assignment; an ndarray's word is always read from the argument buffer,
never a specialization constant (it changes between launches). Offsets are not code, so a
module does not depend on where fields were placed: fields created after a kernel was compiled,
and a program loaded from the offline cache in another process, reuse the same SPIR-V; only the
chunk a ref lives in (`chunk`) is part of the code. Where the profile has `spec_root_offsets`
(Vulkan) the module declares each such word as a specialization constant whose SpecId is the
word, and the pipeline is created with the program's values (a driver's compiler then sees
constants); elsewhere (Metal) the shader reads the word from the argument buffer. Root offsets must be aligned to 8
bytes (f64 / i64 views) and chunks stay below 2**31 bytes (element indices are i32).
"""
from __future__ import annotations

from dataclasses import dataclass

from kernel_ir.dtypes import SMALL, f32, f64, i32, u32
from kernel_ir.nodes import walk
from kernel_ir.ops import ATOMICS, GLOBAL_ACCESS, Op

from . import atomics
from .emitter import U64
ARGS_BINDING = 0
STATUS_BINDING = 1
FIRST_ARRAY_BINDING = 2
ROOT_ALIGN = 8          # byte alignment of every root-placed ref (f64 / i64 views)
MAX_CHUNK_BYTES = 1 << 31  # element indices are i32


def view_dtype(dt, kind: str = "native"):
    """The element type a root view of a ref of dtype `dt` is declared with, given how a task
    accesses it (`access_kinds`): 'bits' (a float updated atomically on its bit patterns: a
    compare-and-swap loop or an exchange) and plain ints use unsigned words; 'signed' (an atomic
    min / max on a signed int) keeps the signed type, whose signedness naga reads from the
    pointer, not from the opcode."""
    if dt == f32:
        return u32 if kind in ("bits", "fminmax") else f32
    if dt == f64:
        return U64 if kind == "bits" else f64
    if kind == "words":  # an 8- / 16-bit ref updated atomically: the u32 words holding it
        return u32
    if kind == "signed" or dt in SMALL:  # the 8- / 16-bit types otherwise: their own
        return dt
    return U64 if dt.bits == 64 else u32


@dataclass(frozen=True)
class BufferMap:
    chunk: tuple         # per abi binding k: root chunk index, or -1 (its own buffer)
    own: tuple           # abi indices of the refs with their own buffer, in binding order
    views: tuple         # ((chunk, view dtype), ...) in binding order from `first_array`
    offset_words: tuple  # per abi binding k: argument-buffer word of its element offset, or -1
    arg_bytes: int       # the whole argument buffer: the KernelABI's bytes + 4 per offset word
    status_chunk: int = -1  # the status words in root chunk c (its u32 view), or -1: binding 1
    status_word: int = -1   # argument-buffer word of the status words' u32 offset in the chunk
    windows: tuple = ()     # ((chunk, window count, window bytes), ...) of the windowed chunks

    @classmethod
    def own_buffers(cls, abi) -> "BufferMap":
        n = len(abi.bindings)
        return cls((-1,) * n, tuple(range(n)), (), (-1,) * n, abi.arg_buffer_size)

    @property
    def first_array(self) -> int:
        """The first binding after the argument (and status) buffer."""
        return FIRST_ARRAY_BINDING if self.status_chunk < 0 else FIRST_ARRAY_BINDING - 1

    def chunk_windows(self, chunk: int) -> tuple:
        """(window count, window bytes) of a windowed chunk, else (1, 0): one binding."""
        for c, n, nbytes in self.windows:
            if c == chunk:
                return n, nbytes
        return 1, 0

    def view_start(self, i: int) -> int:
        """The first binding of view i (a windowed chunk's views take a binding per window)."""
        if not self.windows:
            return self.first_array + i
        return self.first_array + sum(self.chunk_windows(c)[0] for c, _ in self.views[:i])

    @property
    def num_view_bindings(self) -> int:
        """Bindings of the root views (a windowed chunk's view: one per window)."""
        return self.view_start(len(self.views)) - self.first_array

    @property
    def num_arrays(self) -> int:
        """Bindings of the root views and own buffers."""
        return self.num_view_bindings + len(self.own)

    @property
    def end(self) -> int:
        """The first binding after the arrays: adstack buffers, range arguments."""
        return self.first_array + self.num_arrays

    def in_root(self, k: int) -> bool:
        return self.chunk[k] >= 0

    def view_binding(self, k: int, vdt) -> int:
        """The binding of ref k's chunk viewed as `vdt` (its first window's, if windowed)."""
        return self.view_start(self.views.index((self.chunk[k], vdt)))

    def status_binding(self) -> int:
        return self.view_start(self.views.index((self.status_chunk, u32)))

    def own_binding(self, k: int) -> int:
        return self.view_start(len(self.views)) + self.own.index(k)

    def with_own(self, extra: int) -> "BufferMap":
        """This map for an ABI with `extra` more refs at the end, each in its own buffer (the
        range-arguments module's output)."""
        n = len(self.chunk)
        return BufferMap(self.chunk + (-1,) * extra, self.own + tuple(range(n, n + extra)),
                         self.views, self.offset_words + (-1,) * extra, self.arg_bytes,
                         self.status_chunk, self.status_word, self.windows)


def extra_views(dt, kind: str) -> tuple:
    """View types a root-placed ref of dtype `dt` accessed as `kind` needs besides
    `view_dtype(dt, kind)`: 'fminmax' (an f32 atomic min / max without compare-and-swap) also
    takes the signed half of the atomic through an i32 view."""
    return (i32,) if kind == "fminmax" else ()


def access_kinds(task, abi, caps) -> dict:
    """ABI index -> 'bits' for the refs a task updates atomically on their bit patterns (a float
    atomic as a compare-and-swap loop, or an exchange), 'fminmax' for an f32 it takes an atomic
    min / max of where the profile has no compare-and-swap (bits too, and an i32 view:
    `atomics.float_min_max_by_sign`), 'signed' for signed ints it takes an atomic min / max of,
    'words' for 8- / 16-bit refs it updates atomically (`atomics.word_rmw`); refs not listed
    are 'native'."""
    out = {}
    for n in walk(task.body):
        if n.op in ATOMICS:
            dt, k = n.arg.dtype, abi.binding_index(n.arg)
            if dt in SMALL:
                out[k] = "words"
            elif atomics.by_sign(dt, caps, n.op):
                out[k] = "fminmax"
            elif atomics.needs_bits(dt, caps, n.op):
                if out.get(k) != "fminmax":
                    out[k] = "bits"
            elif dt.kind == "i" and n.op in (Op.ATOMIC_MIN, Op.ATOMIC_MAX):
                out[k] = "signed"
    return out


def _ref_views(chunk: int, dt, kind: str) -> list:
    return [(chunk, view_dtype(dt, kind))] + [(chunk, v) for v in extra_views(dt, kind)]


def task_refs(task, abi) -> set:
    """ABI indices of the refs a task reads or writes (its body and its range's bounds)."""
    from kernel_ir.rewrite import expr_nodes
    nodes = list(walk(task.body))
    if task.kind == "range":
        nodes += expr_nodes(task.begin) + expr_nodes(task.end)
    return {abi.binding_index(n.arg) for n in nodes if n.op in GLOBAL_ACCESS}


def root_map(tl, abi, caps, chunk_of: dict, status_chunk: int = -1, windows=None) -> BufferMap:
    """The map placing ABI refs `chunk_of` (k -> root chunk index) in root chunks and every other
    ref in its own buffer; the views are those some task of `tl` accesses. `status_chunk`: the
    root chunk of the status words (-1: a buffer of their own at binding 1). `windows`: chunk ->
    (window count, window bytes) of the chunks larger than one binding."""
    n = len(abi.bindings)
    chunk = tuple(int(chunk_of.get(k, -1)) for k in range(n))
    views = [(status_chunk, u32)] if status_chunk >= 0 else []
    for t in tl.tasks:
        kinds = access_kinds(t, abi, caps)
        for k in sorted(task_refs(t, abi)):
            if chunk[k] >= 0:
                for v in _ref_views(chunk[k], abi.bindings[k].dtype, kinds.get(k, "native")):
                    if v not in views:
                        views.append(v)
    for k in range(n):  # a ref no task accesses (a temp of an emptied task): a view anyway
        if chunk[k] >= 0 and not any(c == chunk[k] for c, _ in views):
            views.append((chunk[k], view_dtype(abi.bindings[k].dtype)))
    views.sort(key=lambda v: (v[0], v[1].name))
    words, w = [], abi.arg_buffer_size // 4
    for k in range(n):  # every ndarray has a word, in an arena or not: one layout per kernel
        has = chunk[k] >= 0 or abi.bindings[k].kind == "ndarray"
        words.append(w if has else -1)
        w += has
    own = tuple(k for k in range(n) if chunk[k] < 0)
    status_word = w if status_chunk >= 0 else -1
    w += status_chunk >= 0
    return BufferMap(chunk, own, tuple(views), tuple(words), 4 * w, status_chunk, status_word,
                     _windows_of(views, windows))


def _windows_of(views, windows) -> tuple:
    """`BufferMap.windows` for `views`: the windowed chunks among them, in chunk order."""
    if not windows:
        return ()
    used = sorted({c for c, _ in views if c in windows})
    return tuple((c, *windows[c]) for c in used)


def task_map(bmap: BufferMap, task, abi, caps) -> BufferMap:
    """`bmap` restricted to what one task touches: the views and own buffers it accesses (a task
    binds only those; the offset words stay the kernel's, so every task reads the same argument
    buffer)."""
    refs = task_refs(task, abi)
    kinds = access_kinds(task, abi, caps)
    views = tuple(v for v in bmap.views if v == (bmap.status_chunk, u32) or any(
        v in _ref_views(bmap.chunk[k], abi.bindings[k].dtype, kinds.get(k, "native"))
        for k in refs if bmap.chunk[k] >= 0))
    own = tuple(k for k in bmap.own if k in refs)
    wins = {c: (n, b) for c, n, b in bmap.windows}
    return BufferMap(bmap.chunk, own, views, bmap.offset_words, bmap.arg_bytes,
                     bmap.status_chunk, bmap.status_word, _windows_of(views, wins))


def offset_words(bmap: BufferMap, abi, byte_offsets: dict, status_offset: int = 0) -> bytes:
    """The argument-buffer tail holding the element offsets of the root-placed refs (`byte_offsets`:
    k -> byte offset in its chunk) and of the status words (`status_offset`, bytes), to append
    to the KernelABI's argument bytes."""
    from kernel_ir.abi import pack_offset_words
    out = []
    for k, w in enumerate(bmap.offset_words):
        if w < 0:
            continue
        off = int(byte_offsets.get(k, 0))  # an ndarray's: written at each launch
        size = abi.bindings[k].dtype.nbytes
        if off % ROOT_ALIGN or off >= MAX_CHUNK_BYTES:
            raise RuntimeError(f"root offset {off} of {abi.bindings[k]!r} is not 8-byte aligned "
                               f"below 2**31")
        out.append(off // size)
    if bmap.status_chunk >= 0:
        if status_offset % ROOT_ALIGN:
            raise RuntimeError(f"status offset {status_offset} is not 8-byte aligned")
        out.append(status_offset // 4)
    return pack_offset_words(out)
