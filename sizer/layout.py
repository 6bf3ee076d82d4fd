"""Per-thread adstack layout from per-stack capacities.

``compute_layout(capacities, entry_sizes, kinds)`` is a pure function; the
codegen, the host launcher and the GPU sizer shader all follow this layout.

Inputs, one entry per stack ``k`` (stacks numbered in task order):
``capacities[k]`` = maximum number of entries (the evaluated SizeExpr, >= 0),
``entry_sizes[k]`` = bytes per entry (> 0, e.g. 4 for f32/i32, 8 for
f64/i64), ``kinds[k]`` = ``'float'`` (primal and adjoint entries), ``'primal'`` (a float
stack whose adjoints the kernel keeps in registers: primal entries only) or ``'int'``.

Each thread ("row") owns one slice of each heap; all sizes are in bytes and
``align8(x) = (x + 7) & ~7``.  Let ``region(k) = align8(capacities[k] *
entry_sizes[k])``.

**Int heap row** (``AdStackHeapInt``, ``stride_int`` bytes per row)::

    [counter 0][counter 1]...[counter n-1]   8 bytes each, for EVERY stack
    [int stack entries ...]                  region(k) bytes per int stack

Stack ``k``'s top-of-stack counter is an int64 at ``counter_offsets[k] =
8 * k``: the number of entries currently on the stack (the top entry is
``count - 1``).  Int stacks follow the counters in stack order, each at an
8-aligned ``offsets[k]``.

**Float heap row** (``AdStackHeapFloat``, ``stride_float`` bytes per row)::

    [stack a primal: region(a)][stack a adjoint: region(a)][stack b primal]...

Float and primal stacks in stack order; stack ``k``'s primal entries start at
``offsets[k]``; a float stack's adjoint entries follow at ``adjoint_offsets[k] =
offsets[k] + region(k)`` (adjoint entry ``i`` belongs to primal entry ``i``), a
primal stack has none (``adjoint_offsets[k] = -1``).

Addresses for row ``row`` (``heap`` = base of the right heap)::

    primal  i : heap + row*stride + offsets[k]         + i*entry_sizes[k]
    adjoint i : heap + row*stride + adjoint_offsets[k] + i*entry_sizes[k]  ('float' only)
    counter   : int_heap + row*stride_int + 8*k

``stride_float`` and ``stride_int`` are multiples of 8 (0 when the heap has
no content).  ``Layout.metadata()`` gives the words the sizer publishes:
``[stride_float, stride_int, offset_0, max_size_0, offset_1, max_size_1, ...]``;
``Layout.from_metadata`` decodes such words (the GPU sizer computes the layout on the device)
and checks that they describe a valid layout, without recomputing it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import MAX_ABS, SizerError

__all__ = ["Layout", "compute_layout", "align8", "COUNTER_BYTES"]

COUNTER_BYTES = 8
KINDS = ("float", "primal", "int")


def align8(x: int) -> int:
    return (x + 7) & ~7


@dataclass(frozen=True)
class Layout:
    """Result of ``compute_layout`` (see the module docstring)."""
    stride_float: int
    stride_int: int
    offsets: tuple           # byte offset of each stack's entries in its heap row
    adjoint_offsets: tuple   # 'float' stacks: adjoint half; 'primal' and 'int' stacks: -1
    counter_offsets: tuple   # int-heap byte offset of each stack's counter
    max_sizes: tuple         # capacities (entries)
    kinds: tuple
    entry_sizes: tuple

    def metadata(self) -> list:
        """``[stride_float, stride_int, (offset, max_size) per stack]``."""
        out = [self.stride_float, self.stride_int]
        for off, cap in zip(self.offsets, self.max_sizes):
            out += [off, cap]
        return out

    @classmethod
    def from_metadata(cls, words, entry_sizes, kinds) -> "Layout":
        """The Layout that metadata ``words`` describe for stacks of ``entry_sizes`` / ``kinds``.
        Checked, not recomputed: strides and offsets 8-aligned, int stacks after the counters,
        every stack's region(s) inside its heap row and disjoint from the others. Raises
        ``SizerError``."""
        words = [_int(w, "metadata word") for w in words]
        sizes = [_int(s, "entry size") for s in entry_sizes]
        kinds = tuple(kinds)
        n = len(sizes)
        if len(kinds) != n or len(words) != 2 + 2 * n:
            raise SizerError(f"layout metadata: {len(words)} words for {n} entry sizes and "
                             f"{len(kinds)} kinds; expected {2 + 2 * n}")
        stride_f, stride_i = words[0], words[1]
        offsets, caps = tuple(words[2::2]), tuple(words[3::2])
        spans = {"float": [], "int": [(0, COUNTER_BYTES * n)]}  # byte ranges per heap row
        adj = []
        for k in range(n):
            off, cap, size, kind = offsets[k], caps[k], sizes[k], kinds[k]
            if kind not in KINDS or size <= 0 or cap < 0 or off < 0 or off % 8:
                raise SizerError(f"layout metadata: stack {k} ({kind!r}, entry size {size}) has "
                                 f"offset {off} and capacity {cap}")
            region = align8(cap * size)
            heap = "int" if kind == "int" else "float"
            spans[heap].append((off, off + (2 * region if kind == "float" else region)))
            adj.append(off + region if kind == "float" else -1)
        for heap, stride in (("float", stride_f), ("int", stride_i)):
            if stride < 0 or stride % 8:
                raise SizerError(f"layout metadata: {heap} stride {stride} is not a multiple of 8")
            end = 0
            for lo, hi in sorted(spans[heap]):
                if lo < end or hi > stride:
                    raise SizerError(f"layout metadata: the {heap} heap row of {stride} bytes "
                                     f"does not hold the stacks' regions {sorted(spans[heap])}")
                end = hi
        if n and stride_i < COUNTER_BYTES * n:
            raise SizerError(f"layout metadata: int stride {stride_i} has no room for {n} counters")
        return cls(stride_float=stride_f, stride_int=stride_i, offsets=offsets,
                   adjoint_offsets=tuple(adj),
                   counter_offsets=tuple(COUNTER_BYTES * k for k in range(n)), max_sizes=caps,
                   kinds=kinds, entry_sizes=tuple(sizes))

    def heap_bytes(self, rows: int) -> tuple:
        """``(float_heap_bytes, int_heap_bytes)`` for ``rows`` threads."""
        return self.stride_float * rows, self.stride_int * rows


def _int(x, what: str) -> int:
    if isinstance(x, bool) or not hasattr(x, "__index__"):
        raise SizerError(f"{what} must be an int, got {x!r}")
    return x.__index__()


def compute_layout(capacities, entry_sizes, kinds) -> Layout:
    """Lay out a task's adstacks in the per-thread heap rows."""
    caps = [_int(c, "capacity") for c in capacities]
    sizes = [_int(s, "entry size") for s in entry_sizes]
    kinds = tuple(kinds)
    if not len(caps) == len(sizes) == len(kinds):
        raise SizerError(f"layout: {len(caps)} capacities, {len(sizes)} entry sizes, "
                         f"{len(kinds)} kinds")
    n = len(caps)
    for k in range(n):
        if caps[k] < 0:
            raise SizerError(f"layout: stack {k} has negative capacity {caps[k]}")
        if sizes[k] <= 0:
            raise SizerError(f"layout: stack {k} has entry size {sizes[k]}")
        if kinds[k] not in KINDS:
            raise SizerError(f"layout: stack {k} has kind {kinds[k]!r}; expected "
                             f"one of {', '.join(KINDS)}")
    off_f = 0
    off_i = COUNTER_BYTES * n
    offsets, adj = [], []
    for k in range(n):
        region = align8(caps[k] * sizes[k])
        if kinds[k] == "float":
            offsets.append(off_f)
            adj.append(off_f + region)
            off_f += 2 * region
        elif kinds[k] == "primal":
            offsets.append(off_f)
            adj.append(-1)
            off_f += region
        else:
            offsets.append(off_i)
            adj.append(-1)
            off_i += region
    if max(off_f, off_i) > MAX_ABS:
        raise SizerError("layout: per-thread stride overflows")
    return Layout(stride_float=off_f, stride_int=off_i, offsets=tuple(offsets),
                  adjoint_offsets=tuple(adj),
                  counter_offsets=tuple(COUNTER_BYTES * k for k in range(n)),
                  max_sizes=tuple(caps), kinds=kinds, entry_sizes=tuple(sizes))
