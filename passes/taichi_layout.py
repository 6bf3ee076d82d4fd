"""Accesses to fields with Taichi's hierarchical layout: the address as Taichi computes it.

A field whose SNode levels are not C order (`spirad.data.snode_layout`: an axis split over
levels, axes out of order) keeps its `GlobalRef` (shape, dtype, buffer), and each access's
indices are replaced by the C-order indices of Taichi's address: element = Taichi's cell *
components + component, or component * cells + cell for `layout=SOA` (C division and
remainder, as Taichi's `scalar_pointer_lowerer`), then
unravelled over the ref's shape (`flat // stride`, `% extent`). The codegens then linearize
them back to the same element (every arch, unchanged; fields in C order compile as before).

Bounds: the unravelled indices are in range exactly when Taichi's address is inside the
field's cells, so the default check (no `debug`) masks only accesses that would leave the
buffer (they are skipped and reported, never a write outside it), and an index outside the
shape whose address is inside the cells goes where Taichi's goes (DiffTaichi's
`rigid_body_toi`). Under `debug=True` an index outside the shape keeps its own indices, so the
bounds check names it as for any field. Runs on what the backend compiles (`driver._program`),
after autodiff: a gradient field has its primal's layout.

A `Layout.per_axis` field (Quadrants' `sd.tensor(layout=perm)`: its storage only permutes the
axes) is accessed through the storage's shape with its indices permuted (`_permuted`): the
same element, no division or remainder, each index checked against its own axis' extent (the
loops' proofs and versioning see plain loop indices); under `debug=True` it takes the general
path, whose checks name the index on its own axis.
"""
from __future__ import annotations

import math
from dataclasses import replace

from kernel_ir import dtypes as T
from kernel_ir.nodes import Node, TaskList, walk
from kernel_ir.ops import GLOBAL_ACCESS, Op
from kernel_ir.rewrite import Splice, keep, rebuild


def taichi_addresses(tl: TaskList, layout_of, debug: bool) -> TaskList:
    """`tl` with the accesses to fields whose `layout_of(field id)` is a Layout rewritten."""
    layouts = {}
    for t in tl.tasks:
        for n in walk(t.body):
            if n.op in GLOBAL_ACCESS and n.arg.kind == "field" and n.arg.key not in layouts:
                layouts[n.arg.key] = layout_of(n.arg.key)
    layouts = {k: v for k, v in layouts.items() if v is not None}
    if not layouts:
        return tl
    tasks = []
    for t in tl.tasks:
        if any(n.op in GLOBAL_ACCESS and n.arg.kind == "field" and n.arg.key in layouts
               for n in walk(t.body)):
            t = replace(t, body=rebuild(t.body, _visitor(layouts, debug)))
        tasks.append(t)
    if all(a is b for a, b in zip(tasks, tl.tasks)):
        return tl
    return TaskList(tl.name, tl.args, tuple(tasks), tl.temps)


def _visitor(layouts, debug):
    def visit(n, srcs, blocks, arg, env):
        n2 = keep(n, srcs, blocks, arg, env)
        ref = n2.arg
        if n2.op not in GLOBAL_ACCESS or ref.kind != "field" or ref.key not in layouts:
            return n2
        layout = layouts[ref.key]
        if layout.per_axis and not debug:
            return _permuted(n2, layout)
        ndim = ref.ndim
        b = _Builder(n2.loc, T.i64 if math.prod(ref.shape) >= 2**31 else T.i32)
        idx = [b.cast(s) for s in n2.srcs[:ndim]]
        new = b.address(layouts[ref.key], idx, tuple(ref.shape))
        if debug:  # an index outside the shape keeps its own: the bounds check names it
            ok = None
            for i, e in zip(idx, ref.shape):
                inside = b.op(Op.AND, T.u1, b.op(Op.CMP_GE, T.u1, i, b.const(0)),
                              b.op(Op.CMP_LT, T.u1, i, b.const(int(e))))
                ok = inside if ok is None else b.op(Op.AND, T.u1, ok, inside)
            new = [b.op(Op.SELECT, b.dt, ok, u, i) for u, i in zip(new, idx)]
        out = Node(n2.op, n2.dtype, tuple(new) + n2.srcs[ndim:], n2.arg, n2.blocks, n2.loc)
        return Splice(b.nodes + [out], out)
    return visit


def _permuted(n, layout):
    """Access `n` of a field whose storage permutes its axes (`Layout.per_axis`): the same
    element through the storage's shape, its indices in storage order (no arithmetic; each
    index checked against its own axis' extent, as for any field)."""
    order = layout.axis_order()
    ndim = len(order)
    ref = n.arg
    shape = tuple(ref.shape[a] for a in order) + tuple(ref.shape[ndim:])
    idx = tuple(n.srcs[a] for a in order) + n.srcs[ndim:]
    return Node(n.op, n.dtype, idx, replace(ref, shape=shape), n.blocks, n.loc)


class _Builder:
    """Integer IR of one access's address, in `dt` (i32, or i64 for fields of 2**31 elements)."""

    def __init__(self, loc, dt):
        self.loc, self.dt, self.nodes = loc, dt, []

    def _add(self, n):
        self.nodes.append(n)
        return n

    def const(self, v):
        return self._add(Node(Op.CONST, self.dt, (), int(v), (), self.loc))

    def cast(self, s):
        return s if s.dtype == self.dt else self._add(Node(Op.CAST, self.dt, (s,), None, (),
                                                             self.loc))

    def op(self, op, dt, *srcs):
        return self._add(Node(op, dt, tuple(srcs), None, (), self.loc))

    def bin(self, op, a, n):
        return self.op(op, self.dt, a, n if isinstance(n, Node) else self.const(n))

    def address(self, layout, idx, full_shape) -> list:
        """C-order indices over `full_shape` of Taichi's element for indices `idx`."""
        ndim = len(layout.shape)
        div = lambda a, n: self.bin(Op.DIV, a, n)  # integer DIV truncates (C), as Taichi's
        rem = lambda a, n: self.bin(Op.SUB, a, self.bin(Op.MUL, div(a, n), n))
        wrapped = [_Val(self, i) for i in idx[:ndim]]
        cell = layout.cell(wrapped, lambda a, n: _Val(self, div(a.node, n)),
                           lambda a, n: _Val(self, rem(a.node, n)))
        flat = cell.node if isinstance(cell, _Val) else self.const(cell)
        comp = idx[ndim:]
        if comp:
            lin = comp[0]
            for c, e in zip(comp[1:], layout.comp_shape[1:]):
                lin = self.bin(Op.ADD, self.bin(Op.MUL, lin, e), c)
            if layout.soa:  # component-major
                flat = self.bin(Op.ADD, self.bin(Op.MUL, lin, layout.cells), flat)
            else:
                ncomp = math.prod(layout.comp_shape)
                flat = self.bin(Op.ADD, self.bin(Op.MUL, flat, ncomp), lin)
        out, stride = [], math.prod(full_shape)
        for k, e in enumerate(full_shape):
            stride //= e
            q = self.bin(Op.FLOORDIV, flat, stride) if stride != 1 else flat
            out.append(q if k == 0 else self.bin(Op.MOD, q, e))
        return out


class _Val:
    """An IR value with `+` and `*` (by IR values or ints), for `Layout.cell`."""

    def __init__(self, b, node):
        self.b, self.node = b, node

    def _other(self, o):
        return o.node if isinstance(o, _Val) else o

    def __add__(self, o):
        return _Val(self.b, self.b.bin(Op.ADD, self.node, self._other(o)))

    def __mul__(self, o):
        return _Val(self.b, self.b.bin(Op.MUL, self.node, self._other(o)))
