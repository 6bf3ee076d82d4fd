"""Indexing vector / matrix locals by run-time values and by slices (Quadrants' `v[i]`,
`m[i, j]`, `m[i, :]`, `m[:, j]`, `v[a:b]`, read and written).

Locals are unrolled: one ALLOCA per component. A component picked at run time is read as a
`select` chain over the components it may be (`i == 0 ? v0 : i == 1 ? v1 : ...`) and written by
storing `select(i == p, value, v_p)` into each of them. "May be" is the positions the in-range
indices reach (`Dyn.cands`): `m[i, 2]` of a 4x3 matrix is one of m[0, 2] .. m[3, 2], so it
compares against 4 positions, not 12, and a row write `m[i, :] = v` costs one compare, select
and store per component of the matrix instead of one per component times the row's length (the
size of Genesis' collision kernels, performance.md). An index past its axis reads the last
candidate (`m[i, 2]`: m[3, 2]) and writes nothing; under init(debug=True) it is an
AssertionError. Both are plain SSA ops, so reverse mode differentiates them like any other code
(the adjoint goes to the component that was read or written; a component outside the candidates
is never read or written, so its adjoint is untouched, as it was). Slices and static indices cost
nothing: they only pick positions. `SlotView` (values.py) carries the picked positions so that
the same view can be read, assigned, updated in place (`m[i, :] += v`) or indexed again.
"""
from __future__ import annotations

import numbers
from typing import NamedTuple

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradTypeError
from kernel_ir.nodes import Node
from kernel_ir.ops import Op
from .values import Slot, SlotView, VecVal


class Dyn(NamedTuple):
    """A position known at run time: the i32 node computing it and the positions it takes when
    every index is in range (ascending; the only components an access through it touches)."""
    node: Node
    cands: tuple


def _static_int(k):
    return isinstance(k, numbers.Integral) and not isinstance(k, bool)


def _axis_positions(v, k, size, node):
    """Positions along one axis selected by index `k`: (positions, keeps_axis)."""
    if isinstance(k, slice):
        for part in (k.start, k.stop, k.step):
            if part is not None and not _static_int(part):
                raise v.ctx.error(SpiradTypeError, "Taichi does not support variables in "
                                                   "slice now: slice bounds of a vector / matrix "
                                                   "must be compile-time integers", node)
        return list(range(size))[k], True
    if _static_int(k):
        if not -size <= k < size:
            raise v.ctx.error(SpiradTypeError, f"index {k} out of range for size {size}", node)
        return [k % size], False
    n = v.to_node(k)
    if not (n.dtype.is_int or n.dtype == T.u1):
        raise v.ctx.error(SpiradTypeError, f"indices must be integers, got {n.dtype}", node)
    i = v.ctx.b.cast(n, T.i32)
    if v.ctx.state.debug:
        _check_in_range(v, i, size, node)
    return [Dyn(i, tuple(range(size)))], False


def _check_in_range(v, i, size, node):
    """Under init(debug=True), a run-time index outside [0, size) fails like a kernel `assert`
    (an AssertionError at the next sync naming the line), as Taichi's check_out_of_bound does;
    without debug it reads the last component, as documented above."""
    from ..runtime.asserts import state_of
    from ..data.field import internal_field
    b = v.ctx.b
    checks = state_of(v.ctx.state, internal_field)
    site = checks.site(f"Out of bound access: a run-time index of a vector / matrix axis of "
                       f"size {size} is outside [0, {size})", v.ctx.loc(node))
    bad = b.binary(Op.OR, b.binary(Op.CMP_LT, i, b.const(0, T.i32)),
                   b.binary(Op.CMP_GE, i, b.const(size, T.i32)))
    checks.record(b, bad, site, first=True)


def index_view(v, obj, idx, node):
    """`obj[idx]` for a local (Slot / SlotView) or a vector value (VecVal) where some index is a
    run-time value or a slice. Returns a SlotView (locals), a VecVal or a scalar node (values)."""
    shape = obj.shape
    if len(idx) > len(shape):
        raise v.ctx.error(SpiradTypeError, f"{len(idx)} indices for shape {shape}", node)
    idx = tuple(idx) + (slice(None),) * (len(shape) - len(idx))
    axes = [_axis_positions(v, k, s, node) for k, s in zip(idx, shape)]
    out_shape = tuple(len(p) for p, keep in axes if keep)
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    if isinstance(obj, SlotView):
        base = obj.flat
    else:
        base = tuple(range(len(obj.allocas if isinstance(obj, Slot) else obj.comps)))
    flats = [0]
    for (pos, _), st in zip(axes, strides):
        flats = [_add(v, f, _mul(v, p, st)) for f in flats for p in pos]
    flats = [_pick(v, base, f) for f in flats]
    if isinstance(obj, VecVal):
        comps = tuple(_read(v, obj.comps, f) for f in flats)
        return comps[0] if not out_shape else VecVal(comps, out_shape)
    slot = obj.slot if isinstance(obj, SlotView) else obj
    if not out_shape and _static_int(flats[0]):
        return Slot((slot.allocas[flats[0]],), (), slot.dtype)
    return SlotView(slot, tuple(flats), out_shape)


def _mul(v, p, k):
    if _static_int(p):
        return p * k
    if k == 1:
        return p
    return Dyn(v.ctx.b.binary(Op.MUL, p.node, v.ctx.b.const(k, T.i32)),
               tuple(c * k for c in p.cands))


def _add(v, a, b):
    if _static_int(a) and _static_int(b):
        return a + b
    b_ = v.ctx.b
    if _static_int(a) and a == 0:
        return b
    if _static_int(b) and b == 0:
        return a
    na = a.node if isinstance(a, Dyn) else b_.const(a, T.i32)
    nb = b.node if isinstance(b, Dyn) else b_.const(b, T.i32)
    ca = a.cands if isinstance(a, Dyn) else (a,)
    cb = b.cands if isinstance(b, Dyn) else (b,)
    return Dyn(b_.binary(Op.ADD, na, nb), tuple(sorted({x + y for x in ca for y in cb})))


def _pick(v, base, f):
    """base[f]: an int when both are known, else a select chain over the base positions f may
    name (their candidates: the union of those positions' own)."""
    if _static_int(f):
        return base[f]
    if all(_static_int(p) and p == k for k, p in enumerate(base)):
        return f
    b = v.ctx.b
    picked = [base[c] for c in f.cands if c < len(base)]
    if not picked:
        raise RuntimeError(f"local_index: no candidate of {f.cands} inside {len(base)} positions")
    node = _read(v, [p.node if isinstance(p, Dyn) else b.const(p, T.i32) for p in picked],
                 f, [c for c in f.cands if c < len(base)])
    cands = sorted({c for p in picked for c in (p.cands if isinstance(p, Dyn) else (p,))})
    return Dyn(node, tuple(cands))


def _read(v, comps, f, at=None):
    """comps[f] for a static f; for a run-time f (a Dyn), the select chain over `comps` taken
    at positions `at` (default: f's candidates, `comps` indexed by position)."""
    if _static_int(f):
        return comps[f]
    b = v.ctx.b
    if at is None:
        at = [c for c in f.cands if c < len(comps)]
        comps = [comps[c] for c in at]
    acc = comps[-1]
    for k in range(len(comps) - 2, -1, -1):
        acc = b.select(b.binary(Op.CMP_EQ, f.node, b.const(at[k], T.i32)), comps[k], acc)
    return acc


def read_view(v, view: SlotView):
    b = v.ctx.b
    loads = [None] * len(view.slot.allocas)

    def load(p):
        if loads[p] is None:
            loads[p] = b.load(view.slot.allocas[p])
        return loads[p]

    def one(f):
        if _static_int(f):
            return load(f)
        at = [c for c in f.cands if c < len(loads)]
        acc = load(at[-1])
        for p in reversed(at[:-1]):
            acc = b.select(b.binary(Op.CMP_EQ, f.node, b.const(p, T.i32)), load(p), acc)
        return acc
    comps = tuple(one(f) for f in view.flat)
    return comps[0] if not view.shape else VecVal(comps, view.shape)


def store_view(v, view: SlotView, value):
    """Assign `value` (broadcast if scalar) to the view's components, in order."""
    b = v.ctx.b
    dt = view.slot.dtype
    if view.shape:
        comps = v._comps_for(value, view.shape)
    else:
        comps = [value]
    for f, c in zip(view.flat, comps):
        c = v.to_node(c, dt)
        if _static_int(f):
            b.store(view.slot.allocas[f], c)
            continue
        for p in f.cands:
            if p < len(view.slot.allocas):
                a = view.slot.allocas[p]
                hit = b.binary(Op.CMP_EQ, f.node, b.const(p, T.i32))
                b.store(a, b.select(hit, c, b.load(a)))
