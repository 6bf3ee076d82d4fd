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
        return next(iter(members.values())).snode.extents
    raise TypeError(f"rescale_index needs a field or an SNode, got {type(x).__name__}")


def rescale_index(a, b, indices):
    """`indices` of field / SNode `a` mapped to the index space of SNode `b` above it (Taichi's):
    each axis divided by how many of a's indices one cell of b spans. Works on Python ints and,
    in kernels, on kernel values."""
    from ..data.sparse_layout import axes_of, factor
    ea, eb = _extents(a), _extents(b)
    if eb != ea[:len(eb)]:
        raise ValueError("rescale_index: the second node must be an ancestor of the first")
    idx = list(indices) if isinstance(indices, (tuple, list)) else [indices]
    pos = {ax: k for k, ax in enumerate(axes_of(ea))}
    if len(idx) != len(pos):
        raise ValueError(f"rescale_index: {len(pos)} indices needed, got {len(idx)}")
    return [idx[pos[ax]] // factor(ea, len(eb), ax) for ax in axes_of(eb)]
