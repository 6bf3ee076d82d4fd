"""Sparse SNodes in kernels (spirad.data.sparse_layout has the storage and its invariant): what a write to
a field below a sparse node adds, the condition of a struct-for over one, and the calls
`sd.is_active / activate / deactivate / append / length / rescale_index`.

Everything lowers to ordinary IR on the internal mask / length fields, so every pass and
backend sees plain loads, stores, atomics, ifs and loops:

* a write to `x[I]` stores 1 into each mask above I (racing writers store the same 1) and
  raises a dynamic list's length to slot + 1 with an atomic max;
* a struct-for over a field or node is the dense loop over its index space whose body runs
  under `if <every level above is active>`. It visits the cells active when it starts, as
  Taichi's (which lists them first): where the body writes the mask of a level it tests
  (activates, deactivates, appends), a loop before it copies that mask into the level's
  `at_launch` field and the test reads the copy, so no iteration sees another's changes
  whatever their order. A loop whose body writes no such mask reads the masks themselves
  (nothing to copy). The copy is a parallel loop of its own (a task: every thread sees it
  finished) before a parallel struct-for; before a serial one in serial code it is a serial
  loop in place. A struct-for nested in a parallel loop has no launch of its own to copy before:
  one whose body writes its masks is refused (Taichi refuses every nested struct-for);
* `deactivate` clears the cell's mask (empties the list) and zeroes the cell's block in every
  field and nested mask below the node, serially in the calling thread.
"""
from __future__ import annotations

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradSyntaxError, SpiradTypeError
from kernel_ir.nodes import Block, walk
from kernel_ir.ops import ATOMICS, Op

from ..data import sparse_layout as S
from . import sparse_api as api
from .values import VecVal


def _div(b):
    return lambda x, k: x if k == 1 else b.binary(Op.FLOORDIV, x, b.const(k, x.dtype))


def _mod(b):
    return lambda x, k: b.binary(Op.MOD, x, b.const(k, x.dtype))


def _i32(v, x):
    n = v.to_node(v.rvalue(x), T.i32)
    return v.ctx.b.cast(n, T.i32) if n.dtype != T.i32 else n


def _mask_index(cell):
    return tuple(cell)


def activate_on_write(v, field, indices) -> None:
    """A kernel write to `field` at physical `indices`: activate every level above it."""
    levels = S.levels_of(field)
    if not levels:
        return
    b = v.ctx.b
    idx = tuple(_i32(v, x) for x in indices[:len(field.shape)])
    _activate_levels(v, levels, S.extents_of(field), idx)


def _activate_levels(v, levels, extents, idx):
    b = v.ctx.b
    for lv in levels:
        if lv.kind == "dynamic":
            p = S.cell(lv, extents, idx, _div(b), lv.depth - 1)
            j = S.list_slot(lv, extents, idx, _div(b), _mod(b))
            b.atomic(Op.ATOMIC_MAX, lv.mask.ref(), p, b.binary(Op.ADD, j, b.const(1, T.i32)))
        else:
            b.global_store(lv.mask.ref(), S.cell(lv, extents, idx, _div(b)), b.const(1, T.i32))


def _level_active(v, lv, extents, idx, at_launch=False):
    b = v.ctx.b
    ref = (lv.at_launch if at_launch else lv.mask).ref()
    if lv.kind == "dynamic":
        p = S.cell(lv, extents, idx, _div(b), lv.depth - 1)
        j = S.list_slot(lv, extents, idx, _div(b), _mod(b))
        return b.binary(Op.CMP_LT, j, b.global_load(ref, p))
    c = S.cell(lv, extents, idx, _div(b))
    return b.binary(Op.CMP_NE, b.global_load(ref, c), b.const(0, T.i32))


def active_condition(v, levels, extents, idx, at_launch=()):
    """A u1 node: every level in `levels` is active at `idx` (of the space of `extents`); the
    levels in `at_launch` are read from their launch-time copies."""
    b = v.ctx.b
    idx = tuple(_i32(v, x) for x in idx)
    cond = None
    for lv in levels:
        c = _level_active(v, lv, extents, idx, lv in at_launch)
        cond = c if cond is None else b.binary(Op.AND, cond, c)
    return cond


def loop_guard(obj):
    """For a struct-for over `obj` (a field, a struct field or an SNode): (levels, extents,
    offset) when it is sparse, else None."""
    from ..data.field import Field, SNode
    if isinstance(obj, SNode):
        return (obj.sparse, obj.extents, (0,) * len(obj.shape)) if obj.sparse else None
    if getattr(obj, "_quant", False):  # a bit-packed field: the sparse levels of its words
        levels = S.levels_of(obj.word)
        return (levels, obj.extents, (0,) * len(obj.shape)) if levels else None
    if not isinstance(obj, Field):
        members = getattr(obj, "members", None)
        if not getattr(obj, "_struct_members", False) or not members:
            return None
        obj = obj.leaves()[0]
    levels = S.levels_of(obj)
    return (levels, S.extents_of(obj), obj.offset) if levels else None


def guarded_body(v, guard, idx, build, site):
    """Run `build()` under the struct-for's activity condition at user indices `idx`: the
    cells active when the loop starts (module docstring). `site`: (builder position before
    the loop, whether the loop runs inside a parallel loop, the `for` node for errors)."""
    levels, extents, offset = guard
    b = v.ctx.b
    phys = tuple(_i32(v, x) if o == 0 else
                 b.binary(Op.SUB, _i32(v, x), b.const(o, T.i32)) for x, o in zip(idx, offset))
    with b.region() as out:  # the body first: whether it writes the masks decides the test
        build()
    body = out[0]
    written = _masks_written(body, levels)
    if written:
        _copy_before_loop(v, written, site)
    cond = active_condition(v, levels, extents, phys, written)
    b.emit(Op.IF, None, (cond,), None, (body, Block(())))


def _masks_written(body, levels) -> tuple:
    """The levels whose mask (list length) `body` stores into or updates atomically."""
    keys = {lv.mask.id: lv for lv in levels}
    hit = {keys[n.arg.key] for n in walk(body)
           if (n.op == Op.GLOBAL_STORE or n.op in ATOMICS) and n.arg.kind == "field"
           and n.arg.key in keys}
    return tuple(lv for lv in levels if lv in hit)


def _copy_before_loop(v, levels, site):
    """At `site` (before the struct-for), copy each level's mask into its `at_launch` field:
    one parallel loop per level before a parallel struct-for, a serial loop in serial code."""
    position, in_parallel, parallel, node = site
    if in_parallel:
        raise v.ctx.error(SpiradSyntaxError, "a struct-for nested in a parallel loop writes the "
                          "activity of the node it iterates (activates, deactivates or appends "
                          "to its cells): there is no launch before it to list the active cells "
                          "at, so what it visits would depend on the other threads; Taichi "
                          "refuses nested struct-fors: move it to the kernel's outermost scope, "
                          "or write the new cells in a separate loop", node)
    b = v.ctx.b
    with b.region() as out:
        for lv in levels:
            mask, copy = lv.mask.ref(), lv.at_launch.ref()
            total = 1
            for s in mask.shape:
                total *= s
            with b.range_for(b.const(0, T.i32), b.const(total, T.i32), parallel=parallel) as k:
                idx, rest = [], k
                for axis in range(len(mask.shape) - 1, -1, -1):
                    if axis:
                        ext = b.const(mask.shape[axis], T.i32)
                        idx.append(b.binary(Op.MOD, rest, ext))
                        rest = b.binary(Op.FLOORDIV, rest, ext)
                    else:
                        idx.append(rest)
                idx = idx[::-1]
                b.global_store(copy, idx, b.global_load(mask, idx))
    b.insert(position, out[0])


# -- the calls -------------------------------------------------------------------------------
def _node(v, x, node, what):
    from ..data.field import Field, SNode
    x = v.rvalue(x)
    if isinstance(x, Field):  # Taichi accepts a field for its cells' node
        x = x.snode
    if not isinstance(x, SNode):
        raise v.ctx.error(SpiradTypeError, f"{what} needs an SNode (e.g. x.parent()), got "
                                           f"{type(x).__name__}", node)
    return x


def _index_list(v, x):
    x = v.rvalue(x)
    if x is None:
        return []
    if isinstance(x, (tuple, list)):
        out = []
        for c in x:
            c = v.rvalue(c)
            out.extend(c.comps if hasattr(c, "comps") else (c,))
        return out
    return list(x.comps) if hasattr(x, "comps") else [x]


def _space_index(v, node, space, x, what, call):
    idx = [_i32(v, c) for c in _index_list(v, x)]
    if len(idx) != len(space):
        raise v.ctx.error(SpiradTypeError, f"{what}: the node's index space has {len(space)} "
                                           f"axes, got {len(idx)} indices", call)
    return tuple(idx)


def _own_levels(node):
    """The levels that decide whether a cell of `node` is active: its own where it is sparse
    (deactivating an ancestor clears the nested masks), else those above it."""
    return (node.level,) if node.level is not None else node.sparse


def h_is_active(v, args, kw, call):
    node = _node(v, args[0], call, "is_active")
    idx = _space_index(v, node, node.shape, args[1], "is_active", call)
    levels = _own_levels(node)
    b = v.ctx.b
    if not levels:
        return b.const(1, T.i32)
    if node.level is not None and node.level.kind == "dynamic":
        pass  # a dynamic node's space holds the list slot: j < length
    return b.cast(active_condition(v, levels, node.extents, idx), T.i32)


def h_activate(v, args, kw, call):
    node = _node(v, args[0], call, "activate")
    idx = _space_index(v, node, node.shape, args[1], "activate", call)
    _activate_levels(v, node.sparse, node.extents, idx)


def _block_zero(v, f, extents, node_depth, cell_nodes):
    """Zero the block of field `f` (index space `extents`) under a cell of the node at
    `node_depth` (cell coordinates `cell_nodes`, one per axis of the node's space)."""
    b = v.ctx.b
    node_axes = S.axes_of(extents[:node_depth])
    cell = dict(zip(node_axes, cell_nodes))
    ranges = []
    for a, n in zip(S.axes_of(extents), f.shape):
        if a in cell:
            k = S.factor(extents, node_depth, a)
            lo = b.binary(Op.MUL, cell[a], b.const(k, T.i32))
            ranges.append((lo, b.binary(Op.ADD, lo, b.const(k, T.i32))))
        else:
            ranges.append((b.const(0, T.i32), b.const(n, T.i32)))
    comps = [()]
    for s in f.comp_shape:
        comps = [c + (k,) for c in comps for k in range(s)]

    def nest(rs, idx):
        if not rs:
            for c in comps:
                b.global_store(f.ref(), tuple(idx) + tuple(b.const(k, T.i32) for k in c),
                               b.const(0, f.dtype))
            return
        with b.range_for(*rs[0]) as i:
            nest(rs[1:], idx + [i])
    nest(ranges, [])


def h_deactivate(v, args, kw, call):
    node = _node(v, args[0], call, "deactivate")
    lv = node.level
    if lv is None:
        raise v.ctx.error(SpiradTypeError, "deactivate needs a sparse node (pointer, bitmasked "
                                           "or dynamic)", call)
    b = v.ctx.b
    if lv.kind == "dynamic":  # the list at the parent's cell empties
        space = node._parent.extents
        idx = _space_index(v, node, node._parent.shape, args[1] if len(args) > 1 else [],
                           "deactivate", call)
        b.global_store(lv.mask.ref(), idx, b.const(0, T.i32))
        depth = lv.depth - 1
    else:
        space = node.extents
        idx = _space_index(v, node, node.shape, args[1], "deactivate", call)
        b.global_store(lv.mask.ref(), idx, b.const(0, T.i32))
        depth = lv.depth
    for f in lv.fields:
        ext = S.extents_of(f) if getattr(f, "_snode", None) is not None else _mask_space(f)
        for g in (f, getattr(f, "_grad", None)):
            if g is not None:
                _block_zero(v, g, ext, depth, idx)
    del space


def _mask_space(mask):
    """The index space of an internal mask / length field (its level's node or parent)."""
    for lv in S.registry():
        if lv.mask is mask:
            return lv.node.extents if lv.kind != "dynamic" else lv.node._parent.extents
    raise RuntimeError(f"internal: no sparse level owns {mask.name}")


def _dynamic(v, x, call, what):
    node = _node(v, x, call, what)
    if node.level is None or node.level.kind != "dynamic":
        raise v.ctx.error(SpiradTypeError, f"{what} needs a dynamic node, e.g. "
                                           f"x.parent() of a field placed under dynamic()", call)
    return node


def h_length(v, args, kw, call):
    node = _dynamic(v, args[0], call, "length")
    idx = _space_index(v, node, node._parent.shape, args[1] if len(args) > 1 else [],
                       "length", call)
    b = v.ctx.b
    return b.binary(Op.MIN, b.global_load(node.level.mask.ref(), idx),
                    b.const(node.level.capacity, T.i32))


def _placed_on(node):
    from ..runtime import state as _state
    return [f for f in _state.current().fields if getattr(f, "_snode", None) is node]


def h_append(v, args, kw, call):
    node = _dynamic(v, args[0], call, "append")
    fields = _placed_on(node)
    if len(fields) != 1:
        raise v.ctx.error(SpiradTypeError, f"append needs exactly one field placed on the "
                                           f"dynamic node, found {len(fields)}; use "
                                           f"x[I].append(v) to name the field", call)
    if len(args) != 3:
        raise v.ctx.error(SpiradTypeError, "append takes (node, indices, value)", call)
    return append_to(v, node, fields[0], args[1], args[2], call)


def append_to(v, node, f, indices, value, call):
    """`sd.append(node, indices, value)` / `x[indices].append(value)` into field `f`."""
    from .values import GlobalElem
    lv = node.level
    idx = _space_index(v, node, node._parent.shape, indices, "append", call)
    b = v.ctx.b
    old = b.atomic(Op.ATOMIC_ADD, lv.mask.ref(), idx, b.const(1, T.i32))
    cap = b.const(lv.capacity, T.i32)
    with b.if_(b.binary(Op.CMP_LT, old, cap)) as (then, orelse):
        with then:
            pidx = dict(zip(S.axes_of(node._parent.extents), idx))
            full = []
            for a in S.axes_of(node.extents):
                if a == lv.axis:
                    base = pidx.get(a)
                    full.append(old if base is None else
                                b.binary(Op.ADD, b.binary(Op.MUL, base, cap), old))
                else:
                    full.append(pidx[a])
            if getattr(f, "_struct_members", False):  # a struct list: member-wise
                from ..data.struct import StructElem
                v.store_struct(StructElem(f, tuple(full)), value, call)
            else:
                v.store_into(GlobalElem(f.ref(), tuple(full), f.comp_shape, f), value)
        with orelse:  # full: give the slot back (the length stays at the capacity)
            b.atomic(Op.ATOMIC_ADD, lv.mask.ref(), idx, b.const(-1, T.i32))
    return old


class DynamicRow:
    """`x[I]` of a field placed on a dynamic node, with one index fewer than x has: the list
    at I, with Taichi's methods `append(v)`, `length()`, `deactivate()`."""

    def __init__(self, field, indices, node):
        self.field, self.indices, self.node = field, list(indices), node

    def method(self, name):
        node = self.node

        def call(v, row, args, n):
            if name == "append":
                if len(args) != 1:
                    raise v.ctx.error(SpiradTypeError, "append takes one value", n)
                return append_to(v, node, row.field, row.indices, args[0], n)
            if args:
                raise v.ctx.error(SpiradTypeError, f"{name}() takes no arguments", n)
            h = h_length if name == "length" else h_deactivate
            return h(v, [node, row.indices], {}, n)
        return call


def dynamic_row(field, indices):
    """The DynamicRow of `field[indices]`, or None where that is not a list of a dynamic node
    (`indices` one fewer than the field's axes, the field placed on the dynamic node)."""
    base = field.leaves()[0] if getattr(field, "_struct_members", False) \
        else field  # a struct field's members share their node
    node = getattr(base._primal or base, "_snode", None)
    if node is None or node.level is None or node.level.kind != "dynamic":
        return None
    if len(indices) != len(node._parent.shape) or len(field.shape) != len(node.shape):
        return None
    return DynamicRow(field, indices, node)


def h_no_activate(v, args, kw, call):
    """`sd.no_activate(node)`: Taichi's promise that this kernel's writes land in active
    cells. Writes here activate anyway (idempotent on active cells), so it changes nothing."""
    return None


def h_rescale_index(v, args, kw, call):
    """`sd.rescale_index(a, b, I)` in a kernel: sparse_api.rescale_index's rule on i32 values,
    a vector (Taichi's result type)."""
    b = v.ctx.b
    a, c = v.rvalue(args[0]), v.rvalue(args[1])
    idx = _index_list(v, args[2])
    if not idx:
        raise v.ctx.error(SpiradTypeError, "rescale_index needs an index (a list or a vector)",
                          call)
    try:
        ratios = api.rescale_ratios(a, c, len(idx))
    except TypeError as e:
        raise v.ctx.error(SpiradTypeError, str(e), call) from None
    out = []
    for x, r in zip(idx, ratios):
        x = _i32(v, x)
        if r is not None and r[1] != 1:
            x = b.binary(Op.FLOORDIV if r[0] == "div" else Op.MUL, x, b.const(r[1], T.i32))
        out.append(x)
    return VecVal(tuple(out), (len(out),))


def handlers() -> dict:
    return {api.is_active: h_is_active, api.activate: h_activate, api.deactivate: h_deactivate,
            api.append: h_append, api.length: h_length, api.rescale_index: h_rescale_index,
            api.no_activate: h_no_activate}
