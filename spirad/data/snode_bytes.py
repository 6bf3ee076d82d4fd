"""Taichi's byte sizes of SNode cells: `node._cell_size_bytes` and
`node._offset_bytes_in_parent_cell` (Taichi's SNode inspection, `test_snode_layout_inspection`).

Why: Taichi programs and tests read how big a cell of their tree is and where a member sits in
it. The numbers are Taichi 1.7.4's (`taichi/codegen/llvm/struct_llvm.cpp`): a node's *cell* is
an LLVM struct of its children in the order they were made, each aligned to its own alignment,
the struct padded to its largest; a child's type is

* a placed field: its element type (a vector / matrix field: one member per component, Taichi's
  AoS places every component in the cell; `layout=SOA`: a dense node per component);
* a dense node: an array of its cells (packed: exactly the product of its extents);
* a field made with `shape=`: Taichi's `root.dense(axes, shape).place(x)`, a dense child of the
  root made with the field; a `BitpackedFields` / `quant_array` is its word (u32 / u64).

These are numbers about Taichi's memory, computed from the tree: spirad's own storage keeps
each field apart (spirad.data.snode_layout), so no spirad address depends on them. Gradients and
duals are left out (Taichi places them where `lazy_grad` runs); a sparse node below has Taichi's
allocator-specific types and is refused.
"""
from __future__ import annotations

import math

from kernel_ir.errors import SpiradNotSupportedError


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def _struct(members) -> tuple:
    """(size, alignment, member offsets) of an LLVM struct of (size, alignment) members."""
    off, big, offsets = 0, 1, []
    for size, align in members:
        off = _align(off, align)
        offsets.append(off)
        off += size
        big = max(big, align)
    return _align(off, big), big, offsets


def _element(f) -> list:
    """The cell members of field `f` placed in a cell: one per component."""
    n = f.dtype.bits // 8 if f.dtype.bits >= 8 else 1
    return [(n, n)] * math.prod(f.comp_shape)


def _children(node) -> list:
    """The children of `node` in the order Taichi made them: ('field', f) for a field placed
    on it, ('member', (f, k)) for component k of f placed on it apart, ('node', n) for a node
    below it, ('shaped', f) for a `shape=` field (root only)."""
    from ..runtime import state as _state
    found = {}
    for f in _state.current().fields:
        if f._primal is not None or f._dual_of is not None or f.shape is None:
            continue
        if f._members:  # components placed apart (spirad.data.matrix_members): one child each
            for comp, (placed, order) in f._members.items():
                _add(found, node, placed, order, ("member", (f, comp)))
            continue
        placed = f._snode
        if placed is None:
            if node._is_root:
                found[f._order] = ("shaped", f)
            continue
        _add(found, node, placed, f._place_order, ("field", f))
    return [found[k] for k in sorted(found)]


def _add(found, node, placed, order, entry) -> None:
    """Record `entry` (placed on `placed` with this order) among `node`'s children, or the
    child of `node` on the way down to it."""
    if placed is node:
        found[order] = entry
        return
    n = placed
    while n is not None and n._parent is not node:
        n = n._parent
    if n is not None:
        found[n._order] = ("node", n)


def _members(node) -> list:
    """[(size, alignment, first member index)] per child, and the flat member list."""
    members, firsts = [], []
    for kind, x in _children(node):
        firsts.append(len(members))
        if kind == "field":
            members.extend(_element(x))
        elif kind == "member":  # one component of a vector / matrix field: a scalar
            members.extend(_element(x[0])[:1])
        elif kind == "node":
            size, align = _array(x)
            members.append((size, align))
        else:  # a shape= field: root.dense(axes, shape).place(x), or one per component (SOA)
            cells = math.prod(x.shape)
            comps = _element(x)
            if x._soa:
                members.extend((cells * s, a) for s, a in comps)
            else:
                size, align, _ = _struct(comps)
                members.append((cells * size, align))
    return members, firsts


def _array(node) -> tuple:
    """(size, alignment) of dense `node` as a member of its parent's cell: its cells."""
    own = node.extents[len(node._parent.extents):] if node._parent is not None else node.extents
    size, align, _ = _cell(node)
    return size * math.prod(n for _, n in own), align


def _cell(node) -> tuple:
    if node.level is not None:
        raise SpiradNotSupportedError("the byte layout of a sparse SNode (pointer, bitmasked, "
                                      "dynamic) is Taichi's allocator's; spirad gives dense "
                                      "nodes' only")
    return _struct(_members(node)[0])


def cell_size_bytes(node) -> int:
    """Taichi's `snode._cell_size_bytes`: the bytes of one cell of `node` (module doc)."""
    if node._field is not None:  # a field's cells (Taichi's place node): no children
        return 0
    return _cell(node)[0]


def offset_bytes_in_parent_cell(node) -> int:
    """Taichi's `snode._offset_bytes_in_parent_cell`: where `node` starts in its parent's cell."""
    parent = node._parent
    if parent is None:
        return 0
    members, firsts = _members(parent)
    _, _, offsets = _struct(members)
    for (kind, x), first in zip(_children(parent), firsts):
        if x is node or (node._field is not None and x is node._field):
            return offsets[first + getattr(node, "_member", 0) if kind == "field" else first]
        if kind == "member" and node._field is x[0] and getattr(node, "_member", None) == x[1]:
            return offsets[first]
    raise SpiradNotSupportedError("this SNode is not in the current tree (made before the "
                                  "last sd.init?)")
