"""Taichi's sparse-SNode calls: `sd.is_active`, `sd.activate`, `sd.deactivate`, `sd.append`,
`sd.length`, `sd.no_activate` (kernels only; the frontend lowers them, spirad/frontend/sparse_ops.py) and
`sd.rescale_index` (also in Python scope). The indices of a node call are in that node's own
index space (its `shape`); `rescale_index` maps a field's index into it. spirad.data.sparse_layout
describes the storage."""
from __future__ import annotations

from ..lang import _python_scope


def is_active(node, indices):
    """1 where the cell of `node` at `indices` is active, else 0 (kernels only)."""
    raise _python_scope("is_active")


def activate(node, indices):
    """Activate the cell of `node` at `indices` and the cells above it (kernels only)."""
    raise _python_scope("activate")


def deactivate(node, indices):
    """Deactivate the cell of `node` at `indices` (kernels only): the fields below it read 0
    again; for a dynamic node, `indices` name the list (its parent's cell), which empties."""
    raise _python_scope("deactivate")


def append(node, indices, value):
    """Append `value` to the list of dynamic `node` at `indices` (the parent's cell); returns
    the position it took. A full list takes nothing (kernels only)."""
    raise _python_scope("append")


def length(node, indices):
    """The length of the list of dynamic `node` at `indices` (kernels only)."""
    raise _python_scope("length")


def no_activate(*nodes):
    """Taichi's hint that a kernel's writes to these nodes' fields land in active cells
    (kernels only); spirad's writes activate anyway, so it changes no result."""
    raise _python_scope("no_activate")


def _extents(x):
    from ..data.field import Field
    if isinstance(x, Field):
        return x.snode.extents
    if hasattr(x, "extents"):
        return x.extents
    members = getattr(x, "members", None)  # a struct field: its members share their node
    if members:
        return x.leaves()[0].snode.extents
    raise TypeError(f"rescale_index needs a field or an SNode, got {type(x).__name__}")


def _shape(x) -> tuple:
    """The index-space shape of field / SNode `x`: one size per axis used, in axis order."""
    sizes = {}
    for axis, n in _extents(x):
        sizes[axis] = sizes.get(axis, 1) * n
    return tuple(sizes[k] for k in sorted(sizes))


def rescale_ratios(a, b, n: int) -> list:
    """Per index position of an n-index of `a`: ('div', k), ('mul', k) or None (kept).
    Taichi's rule: position d < min(n, dims of a, dims of b) is divided by a's size over b's
    where a is larger there, multiplied by b's over a's where it is smaller; the others stay."""
    sa, sb = _shape(a), _shape(b)
    out = []
    for d in range(n):
        if d < min(len(sa), len(sb)) and sa[d] > sb[d]:
            out.append(("div", sa[d] // sb[d]))
        elif d < min(len(sa), len(sb)) and sa[d] < sb[d]:
            out.append(("mul", sb[d] // sa[d]))
        else:
            out.append(None)
    return out


def rescale_index(a, b, indices):
    """Index `indices` of field / SNode `a` mapped to the index space of field / SNode `b`, as
    Taichi's `rescale_index`: index d is divided by how many of a's indices one of b's spans
    there (b coarser: a pointer block above a's cells), or multiplied (b finer); one entry per
    index given. Works on Python ints and, in kernels, on kernel values (a vector there)."""
    idx = list(indices) if isinstance(indices, (tuple, list)) else [indices]
    out = []
    for x, r in zip(idx, rescale_ratios(a, b, len(idx))):
        out.append(x if r is None else x // r[1] if r[0] == "div" else x * r[1])
    return out
