"""Taichi's address arithmetic for a field placed on an SNode tree (architecture §2: storage
follows the SNode tree, hierarchy order).

Why: Taichi lays a field out by its SNode hierarchy, not in C order over its shape, and programs
depend on it. DiffTaichi's `rigid_body_toi` places `root.dense(ti.l, 4096).dense(ti.i, 1)
.place(x)` (shape (1, 4096): the index of `x[a, b]` follows the axis numbers, i then l) and
indexes `x[t, 0]`, over the range of axis i: Taichi's address puts that on the same element as
`x[0, t]`, so the program reads what it wrote; C order put it 4096 * t elements further (a crash).

Taichi 1.7.4's arithmetic (`taichi/transforms/scalar_pointer_lowerer.cpp`, packed extents:
a level of extent n holds exactly n cells): from the root down, at each dense level, for each
axis the level splits (in axis order), with `prev` the product of that axis' extents at this
level and below and `next` the product below,

    extracted = (index if it is the axis' first level else index % prev) / next   (C `/`, `%`)
    linear    = mixed radix of the level's extracted values (the level's extents)

and the cell is the sum over levels of `linear * cells below the level`. An index inside the
field's shape gets one cell each, in hierarchy order; one outside it (no mod at the axis' first
level) lands where Taichi's lands. Vector / matrix components follow the cell (Taichi's AoS,
the default of `Vector.field`): element = cell * components + component.

A field whose levels name its axes in increasing order, each once (every `sd.field(shape=...)`,
`Vector.field`, `root.dense(ij, ...)`, `dense(i).dense(j)`) has exactly C order, also for
indices out of its shape: `layout_of` gives None and nothing changes (the same code as before).
Only the others (an axis split over levels: `dense(i, 4).dense(i, 8)`; axes out of order:
`dense(l).dense(i)`) get a `Layout`: kernels compute its address (`passes/taichi_layout`),
host reads and writes go through `permutation` (the storage offset of each element). So does
a vector / matrix field with `layout=SOA` (Taichi places each component apart: component-major
storage, and an index past one component's cells reaches the next component's, as in Taichi).
Quadrants' `sd.tensor(layout=perm)` fields are placed as `order=` places them and marked
`per_axis`: their accesses are the same element through the storage's shape with the indices
permuted (no address arithmetic; an index outside its axis is out of bounds, as in any field,
not Taichi's neighbouring cell), and their host views are strided views (`axis_order`).

Each field keeps a storage of its own, in the units of its own elements: fields placed together
are not interleaved in one buffer (Taichi's AoS cell); an address inside the field's cells is
Taichi's, so a program reads what Taichi reads unless it reads across fields (see
docs/coming_from_taichi.md, "Physical layout"). Fields below sparse nodes keep C order
(`spirad.data.sparse_layout` indexes their masks by index, and zeroes cells in that order).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class Level:
    """One dense level's share of a field's address: per axis it splits, in axis order,
    (index position, first level of the axis?, prev, next); `extents` the level's extents in
    the same order; `below` the cells one cell of this level spans."""
    axes: tuple
    extents: tuple
    below: int


@dataclass(frozen=True)
class Layout:
    """A field's address arithmetic (module docstring): its levels from the root down, its
    shape (cells), its component shape and the number of cells."""
    levels: tuple
    shape: tuple
    comp_shape: tuple
    cells: int
    soa: bool = False  # components apart (Taichi's Layout.SOA): element = component * cells + cell
    # Quadrants' `sd.tensor(layout=...)`: an axis permutation whose accesses are checked per axis
    # like any field's (passes/taichi_layout permutes the indices, no address arithmetic)
    per_axis: bool = False

    def key(self) -> tuple:
        """What identifies the arithmetic (compiled code and the offline cache depend on it)."""
        return tuple((lv.axes, lv.extents, lv.below) for lv in self.levels) + (self.soa,
                                                                               self.per_axis)

    def element(self, cell, comp):
        """The storage element of component `comp` (its C-order number) of `cell`."""
        if self.soa:
            return comp * self.cells + cell
        return cell * math.prod(self.comp_shape) + comp

    def cell(self, idx, div, rem):
        """Taichi's cell of the index tuple `idx` (ints, numpy arrays or IR values), with C
        division `div(a, n)` and remainder `rem(a, n)` for constant n > 0 and `add` / `mul`
        by the operators of the values (IR builders wrap theirs)."""
        total = None
        for lv in self.levels:
            lin = None
            for (pos, first, prev, nxt), n in zip(lv.axes, lv.extents):
                e = idx[pos] if first else rem(idx[pos], prev)
                e = div(e, nxt) if nxt != 1 else e
                lin = e if lin is None else lin * n + e
            if lin is None:
                continue
            term = lin * lv.below if lv.below != 1 else lin
            total = term if total is None else total + term
        return total if total is not None else 0

    def axis_order(self):
        """The storage order of the axes (outermost first) where the layout only permutes them
        (one whole axis per level, components together: `sd.tensor(layout=...)`, Taichi's
        `order=`), else None: then the storage is the C-order array of that axis order."""
        if self.soa or any(len(lv.axes) != 1 or not lv.axes[0][1] or lv.axes[0][3] != 1
                           for lv in self.levels):
            return None
        order = tuple(lv.axes[0][0] for lv in self.levels)
        return order if sorted(order) == list(range(len(self.shape))) else None

    def permutation(self) -> np.ndarray:
        """The storage element (in the field's own units) of each element, C order over
        `shape + comp_shape`: int64, that shape."""
        grids = np.indices(self.shape, dtype=np.int64) if self.shape else ()
        cells = self.cell(grids, lambda a, n: a // n, lambda a, n: a % n)  # in range: >= 0
        ncomp = math.prod(self.comp_shape)
        cells = np.asarray(cells, dtype=np.int64).reshape(self.shape + (1,) * len(self.comp_shape))
        comp = np.arange(ncomp, dtype=np.int64).reshape(self.comp_shape)
        return self.element(cells, comp)


def check_order(ndim: int, order) -> None:
    """Refuse an axis order (Quadrants' `layout=`) that is not a permutation of the axes."""
    if sorted(order) != list(range(ndim)):
        from kernel_ir.errors import SpiradValueError
        raise SpiradValueError(f"layout={tuple(order)!r} is not a permutation of range({ndim})")


def per_axis(shape, comp_shape, order) -> Layout:
    """The layout of an array whose storage is the C-order array of its axes in `order`
    (outermost first; Quadrants' `layout=`): one dense level per axis, `per_axis` (an ndarray
    made with `sd.tensor(..., layout=)`; its `permutation` serves host reads and writes)."""
    shape = tuple(int(n) for n in shape)
    levels, _, _ = _build([[(a, shape[a])] for a in order])
    return Layout(levels, shape, tuple(comp_shape), math.prod(shape), per_axis=True)


def levels_of_node(node) -> list:
    """The (axis, extent) pairs each `dense` call added, from the root down to `node`."""
    chain = []
    while node is not None and node.extents:
        parent = node.parent()
        chain.append(node.extents[len(parent.extents) if parent is not None else 0:])
        node = parent
    return [lv for lv in reversed(chain) if lv]


def layout_of(f) -> Layout | None:
    """Field `f`'s Taichi arithmetic where it differs from C order, else None (a gradient /
    dual: its primal's; unplaced, 0-d or below a sparse node: None)."""
    owner = f._primal or f._dual_of or f
    node = getattr(owner, "_snode", None)
    if node is None or node.sparse or not f.shape:
        return None
    soa = bool(getattr(owner, "_soa", False)) and math.prod(f.comp_shape) > 1
    cached = getattr(node, "_taichi_layout", None)
    if cached is None:
        cached = _build(levels_of_node(node))
        node._taichi_layout = cached
    levels, shape, c_order = cached
    if c_order and not soa:
        return None
    if tuple(shape) != tuple(f.shape):
        raise RuntimeError(f"field {f.name}: shape {f.shape} differs from its node's {shape}")
    layout = Layout(levels, tuple(f.shape), tuple(f.comp_shape), math.prod(f.shape), soa)
    if getattr(owner, "_per_axis", False) and layout.axis_order() is not None:
        layout = replace(layout, per_axis=True)
    return layout


def _build(levels):
    """(levels, shape, whether it is C order) of Taichi's arithmetic over `levels`."""
    order = [a for lv in levels for a, _ in sorted(lv)]
    c_order = len(set(order)) == len(order) and order == sorted(order)
    axes = sorted(set(order))
    pos = {a: k for k, a in enumerate(axes)}
    total = {a: 1 for a in axes}
    for lv in levels:
        for a, n in lv:
            total[a] *= n
    shape = tuple(total[a] for a in axes)
    remaining = dict(total)
    seen, out = set(), []
    cells_below = [math.prod(n for _, n in lv) for lv in levels]
    for k, lv in enumerate(levels):
        below = math.prod(cells_below[k + 1:])
        parts, extents = [], []
        for a, n in sorted(lv):
            prev = remaining[a]
            remaining[a] = prev // n
            parts.append((pos[a], a not in seen, prev, remaining[a]))
            extents.append(n)
            seen.add(a)
        out.append(Level(tuple(parts), tuple(extents), below))
    return tuple(out), shape, c_order
