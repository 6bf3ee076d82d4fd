"""Sparse SNodes (Taichi's `bitmasked`, `pointer`, `dynamic`): the data model, host side.

spirad stores a sparse SNode's fields densely, over the whole index space, and keeps the
sparsity in a small internal i32 field beside them (architecture §2: fields keep Taichi's
index space; docs/coming_from_taichi.md, "Sparse SNodes"):

* `bitmasked` and `pointer`: an *activation mask*, one word per cell of the node (1 active).
  A `pointer` is a `bitmasked` whose memory is allocated up front: the same semantics (an
  inactive cell reads 0, a write activates it, struct-for visits active cells only) without
  an allocator; `MAX_DENSE_BYTES` bounds what such a dense allocation may cost.
* `dynamic`: a *length*, one word per cell of the parent node; element j of a list is active
  while j < length. `ti.append` bumps the length atomically, a write at j raises it to j + 1.

A struct-for visits the cells active when it starts (Taichi lists them first). Where its body
writes the masks of the node it iterates, the loop's activity test reads `at_launch`, a copy of
the masks taken a step before the loop (spirad/frontend/sparse_ops.py): one more word per mask
word, allocated with the mask.

The invariant that makes reads free: data of an inactive cell is zero. Memory starts zeroed,
only writes activate, and deactivation (`ti.deactivate`, `deactivate_all`) zeroes the cell's
block of every field below the node and the masks of sparse nodes nested in it. So a read never
consults a mask, and a field under a sparse node reads like Taichi's (an inactive cell reads 0).

Index spaces: every SNode has one (its `shape`: one axis per axis label used from the root down
to it). `cell(level, extents, index)` maps an index of a deeper node's space (a field's) to the
cell of a sparse level above it: axis a divides by the product of a's extents below the level.
"""
from __future__ import annotations

from dataclasses import dataclass, field as dc_field

import numpy as np

from kernel_ir.errors import SpiradNotSupportedError, SpiradValueError
from kernel_ir.nodes import AT_LAUNCH

from ..runtime import guard as _guard

MAX_DENSE_BYTES = 1 << 32  # a pointer's dense stand-in beyond this is refused (see above)
KINDS = ("bitmasked", "pointer", "dynamic")


@dataclass(eq=False)
class SparseLevel:
    """One sparse SNode: its kind, its depth (the number of (axis, extent) pairs from the root
    down to it, itself included), and its internal mask (bitmasked / pointer: shape of the
    node's space) or length field (dynamic: shape of the parent's space)."""
    kind: str
    depth: int
    node: object            # the SNode itself
    mask: object            # spirad.data.field.Field (internal, i32)
    axis: int = -1          # dynamic: the list's axis
    capacity: int = 0       # dynamic: the list's maximum length
    fields: list = dc_field(default_factory=list)  # fields placed anywhere below (and masks)
    at_launch: object = None  # the mask's copy a struct-for whose body writes it reads


def axes_of(extents) -> list:
    """The axis labels of an index space, in index order."""
    return sorted({a for a, _ in extents})


def factor(extents, depth: int, axis: int) -> int:
    """How many indices of `axis` one cell at `depth` spans in the space of `extents`."""
    n = 1
    for a, e in extents[depth:]:
        if a == axis:
            n *= e
    return n


def cell(level: SparseLevel, extents, index, div, depth=None):
    """The cell of `level`'s node (dynamic: of its parent, `depth` = level.depth - 1) that
    `index` (one entry per axis of `extents`) lies in. `div(x, k)` divides (Python ints or IR
    nodes)."""
    depth = level.depth if depth is None else depth
    pos = {a: k for k, a in enumerate(axes_of(extents))}
    return tuple(div(index[pos[a]], factor(extents, depth, a))
                 for a in axes_of(extents[:depth]))


def list_slot(level: SparseLevel, extents, index, div, mod):
    """dynamic: the position of `index` in its list (0 .. capacity - 1)."""
    pos = axes_of(extents).index(level.axis)
    return mod(div(index[pos], factor(extents, level.depth, level.axis)), level.capacity)


def make_level(parent, kind: str, extents, internal_field, chunk_size=None):
    """The SNode `parent.<kind>(axes, shape)`; `extents` are the new node's (axis, extent);
    `internal_field(dtype, shape, name)` makes the mask (spirad.field's)."""
    from kernel_ir import dtypes as T
    if kind == "dynamic" and len(extents) != 1:
        raise SpiradValueError("dynamic() takes one axis (a list along it), e.g. "
                               "root.dense(sd.i, n).dynamic(sd.j, capacity)")
    node = parent._child(parent.extents + tuple(extents))
    if kind == "dynamic":
        axis, cap = extents[0]
        name = f"dynamic{len(node.extents)}.length"
        mask = internal_field(T.i32, parent.shape, name)
        level = SparseLevel(kind, len(node.extents), node, mask, axis, cap)
        node.chunk_size = int(chunk_size) if chunk_size else cap
    else:
        name = f"{kind}{len(node.extents)}.mask"
        mask = internal_field(T.i32, node.shape, name)
        level = SparseLevel(kind, len(node.extents), node, mask)
    # the launch-time copy (one word per mask word, made with the mask: no growth at launches)
    level.at_launch = internal_field(T.i32, mask.shape, name + AT_LAUNCH)
    for lv in parent.sparse:  # an outer level's deactivation clears this one's mask
        lv.fields.append(mask)
    node.sparse = parent.sparse + (level,)
    node.level = level
    registry().append(level)
    return node


def registry() -> list:
    """The sparse levels of the current program (`deactivate_all` clears them)."""
    from ..runtime import state as _state
    st = _state.current()
    if getattr(st, "sparse_levels", None) is None:
        st.sparse_levels = []
    return st.sparse_levels


def placed(node, f) -> None:
    """`node.place(f)`: f lives below every sparse level of `node`."""
    for lv in node.sparse:
        if f not in lv.fields:
            lv.fields.append(f)
    if node.sparse:
        nbytes = int(np.prod(node.shape, dtype=np.int64)) * f.dtype.nbytes * \
            int(np.prod(f.comp_shape or (1,), dtype=np.int64))
        if nbytes > MAX_DENSE_BYTES:
            raise SpiradNotSupportedError(
                f"field {f.name} under a sparse SNode would take {nbytes} bytes: spirad stores "
                f"sparse fields densely over their whole index space (a pointer SNode is a "
                f"bitmasked one, allocated up front) and refuses more than {MAX_DENSE_BYTES} "
                f"bytes; use a smaller index space")


def levels_of(f) -> tuple:
    """The sparse levels above field `f` (a gradient / dual: its primal's), root first."""
    owner = f._primal or f._dual_of or f
    node = getattr(owner, "_snode", None)
    return node.sparse if node is not None else ()


def extents_of(f) -> tuple:
    owner = f._primal or f._dual_of or f
    return owner._snode.extents


def host_activate(f, index) -> None:
    """A host write `x[index] = v` activates the cells above it (as Taichi's does)."""
    ext = extents_of(f)
    for lv in levels_of(f):
        if lv.kind == "dynamic":
            p = cell(lv, ext, index, lambda x, k: x // k, lv.depth - 1)
            j = list_slot(lv, ext, index, lambda x, k: x // k, lambda x, k: x % k)
            if lv.mask[p if p else None] < j + 1:
                lv.mask[p if p else None] = j + 1
        else:
            c = cell(lv, ext, index, lambda x, k: x // k)
            lv.mask[c] = 1


def active_elements(f) -> np.ndarray:
    """A bool array of `f`'s shape: which elements are active (every level above them)."""
    ext = extents_of(f)
    idx = tuple(np.indices(f.shape, dtype=np.int64)) if f.shape else ()
    act = np.ones(f.shape, dtype=bool)
    div = lambda x, k: x // k  # noqa: E731
    for lv in levels_of(f):
        m = lv.mask.to_numpy()
        if lv.kind == "dynamic":
            p = cell(lv, ext, idx, div, lv.depth - 1)
            act &= list_slot(lv, ext, idx, div, lambda x, k: x % k) < m[p]
        else:
            act &= m[cell(lv, ext, idx, div)] != 0
    return act


def host_fill(f, value, store) -> None:
    """`x.fill(v)` of a field below a sparse node: its active elements only (Taichi's fill is a
    struct-for); `store(array)` writes the whole field without activating."""
    arr = f.to_numpy()
    arr[active_elements(f)] = value
    store(arr)


def activate_everything(f) -> None:
    """`x.from_numpy(a)` writes every element, so every cell above them becomes active."""
    for lv in levels_of(f):
        lv.mask.fill(lv.capacity if lv.kind == "dynamic" else 1)


def is_sparse_primal(f) -> bool:
    """A user's field below a sparse node (its gradient / dual are plain arrays to the host)."""
    return f._primal is None and f._dual_of is None and bool(levels_of(f))


def deactivate_all(node) -> None:
    """`node.deactivate_all()` (Taichi's): every cell of every sparse level at or below `node`
    inactive, and the fields below them zeroed (the invariant in the module docstring)."""
    for lv in list(registry()):
        n = lv.node
        while n is not None and n is not node:
            n = n._parent
        if n is None:
            continue
        with _guard.LOCK:  # every element below the node goes: zero them all (no host pass
            for f in lv.fields:  # over the active ones, which fill() would make)
                for g in (f, getattr(f, "_grad", None)):
                    if g is not None:
                        g._store(g._to_storage(0))
            lv.mask.fill(0)
