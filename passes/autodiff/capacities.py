"""Adstack capacities as size expressions (sizer grammar), one per stack of an adjoint task.

A stack receives one push per execution of its slot's ALLOCA or STORE in the forward replay, and
pops only in the reverse walk, so its capacity is the number of those executions in one parallel
iteration, maximised over the iterations:

    count(block)      = sum of 1 per ALLOCA/STORE of the slot
    count(IF)         = Max(count(then), count(else))
    count(RANGE_FOR)  = trips * count(body)              (body independent of the index)
                      = trips * MaxOverRange(i, begin, end, count(body))   (otherwise)
    task capacity     = MaxOverRange(task index, begin, end, count(body))  (if it depends on it)

with trips = Sub(end, begin) (clamped at 0). Loop bounds translate into the grammar: constants,
scalar arguments, ndarray shapes, field and ndarray reads, enclosing loop indices, + - * max.
A stack whose count has a bound outside it (a WHILE loop, `range(int(sqrt(n)))`, a multi-
dimensional loop of unknown extent) gets no expression: it is *measured* at each launch by the
counting pass (`counting.py`), unless `default` (init(default_ad_stack_size=N)) gives such stacks
a fixed capacity N instead (overflow is then possible, and detected).
"""
from __future__ import annotations

import itertools

import sizer as sz

from kernel_ir.errors import SpiradAutodiffError
from kernel_ir.source import user_error
from kernel_ir.nodes import Block, Node, Task, walk
from kernel_ir.ops import Op

_BIN = {Op.ADD: sz.Add, Op.SUB: sz.Sub, Op.MUL: sz.Mul, Op.MAX: sz.Max}


class _Unbounded(Exception):
    def __init__(self, loc, why):
        self.loc, self.why = loc, why


class Sizing:
    def __init__(self, body: Block, task: Task, written=frozenset()):
        self.body, self.task = body, task
        self.written = written  # (kind, key, grad) of every global the kernel writes
        self.vars = {}
        self.ids = itertools.count()
        self.single = {}
        counts = {}
        for n in walk(body):
            if n.op == Op.STORE:
                counts[n.srcs[0]] = counts.get(n.srcs[0], 0) + 1
                self.single[n.srcs[0]] = n.srcs[1]
        self.single = {s: v for s, v in self.single.items() if counts[s] == 1}
        self.components = {}  # ("mod", level) / ("outer",) -> (bound-variable id, divisor)

    # -- multi-dimensional parallel loops -----------------------------------------------------
    # The frontend splits the linear index of `for a, b in ndrange(A, B)` into components
    # b = lin % B and a = lin // B (one MOD per inner axis, a FLOORDIV chain for the outer one).
    # Each component becomes its own bound variable, maximised over its own extent.
    def _level(self, n: Node):
        """0 for the task index, d for d nested FLOORDIVs of it by extents, else None."""
        if n is self.task.index:
            return 0
        if n.op == Op.FLOORDIV:
            d = self._level(n.srcs[0])
            return None if d is None else d + 1
        return None

    def component(self, n: Node):
        """Bound-variable id of an index component (`lin % e` or the outermost quotient)."""
        if n.op == Op.MOD and self._level(n.srcs[0]) is not None:
            key = ("mod", self._level(n.srcs[0]))
            divisor = n.srcs[1]
        elif n.op == Op.FLOORDIV and self._level(n) is not None:
            if n is not self._outer_quotient():
                return None
            key = ("outer",)
            divisor = None
        else:
            return None
        if key not in self.components:
            self.components[key] = (next(self.ids), divisor)
        return self.components[key][0]

    def _outer_quotient(self):
        best = None
        for n in walk(self.body):
            lv = self._level(n) if n.op == Op.FLOORDIV else None
            if lv is not None and (best is None or lv > self._level(best)):
                best = n
        return best

    def wrap_components(self, c, loc):
        """Maximise `c` over every index component it uses, innermost axis first."""
        if not self.components:
            return c
        free = sz.free_vars(c)
        divisors = {}
        for key, (vid, div) in self.components.items():
            if key[0] == "mod":
                divisors[key[1]] = div
        for key, (vid, div) in sorted(self.components.items(), key=lambda kv: -kv[0][-1] if kv[0][0] == "mod" else 99):
            if vid not in free:
                continue
            if div is not None:
                ext = self.expr(div, loc)
            else:
                ext = self._outer_extent(divisors, loc)
            c = sz.MaxOverRange(vid, sz.Const(0), ext, c)
        return c

    def _outer_extent(self, divisors, loc):
        """Extent of the outermost axis: the first factor of the task's `end` (the product of
        the extents), or end // (product of the inner extents) when everything is constant."""
        end = self.task.end
        if end.op == Op.MUL:
            x = end
            while x.op == Op.MUL:
                x = x.srcs[0]
            return self.expr(x, loc)
        if end.op == Op.CONST and all(d.op == Op.CONST for d in divisors.values()):
            prod = 1
            for d in divisors.values():
                prod *= max(int(d.arg), 1)
            return sz.Const(int(end.arg) // prod)
        raise _Unbounded(loc, "the extent of the outer axis of this multi-dimensional loop is unknown")

    def var(self, idx: Node) -> int:
        if idx not in self.vars:
            self.vars[idx] = next(self.ids)
        return self.vars[idx]

    def expr(self, n: Node, loc, depth=0):
        """IR value -> SizeExpr, or _Unbounded."""
        if depth > 64:
            raise _Unbounded(loc, "the bound is too deeply nested")
        op = n.op
        if op == Op.CONST:
            return sz.Const(int(n.arg))
        if op == Op.ARG:
            if not n.dtype.is_int:
                raise _Unbounded(loc, "a float argument bounds the loop")
            return sz.ScalarArg(n.arg)
        if op == Op.NDARRAY_SHAPE:
            return sz.NdarrayShape(*n.arg)
        if op == Op.LOOP_INDEX:
            return sz.BoundVariable(self.var(n))
        if op == Op.CAST and n.srcs[0].dtype.is_int and n.dtype.is_int:
            return self.expr(n.srcs[0], loc, depth + 1)
        if op in _BIN:
            return _BIN[op](self.expr(n.srcs[0], loc, depth + 1), self.expr(n.srcs[1], loc, depth + 1))
        if op in (Op.MOD, Op.FLOORDIV) and self.task.index is not None:
            comp = self.component(n)
            if comp is not None:
                return sz.BoundVariable(comp)
        if op == Op.LOAD and n.srcs[0] in self.single:
            return self.expr(self.single[n.srcs[0]], loc, depth + 1)
        if op == Op.GLOBAL_LOAD and n.dtype.is_int:
            idx = tuple(self.expr(s, loc, depth + 1) for s in n.srcs)
            ref = n.arg
            if (ref.kind, ref.key, ref.grad) in self.written:
                raise user_error(SpiradAutodiffError, f"this loop's trip count reads '{ref.name}', which "
                                 f"the same kernel writes: reverse mode sizes its stacks before the launch "
                                 f"and would use stale bounds. Compute the bounds in a separate kernel", loc)
            if ref.kind == "field":
                return sz.FieldLoad(ref.key, idx)
            if ref.kind == "ndarray" and not ref.grad:
                return sz.NdarrayRead(ref.key, idx)
        raise _Unbounded(loc, f"the loop bound uses {op.name.lower()}, which the adstack sizer "
                              f"cannot bound")

    def count(self, block: Block, slot) -> object:
        total = sz.Const(0)
        for n in block.nodes:
            if (n.op == Op.ALLOCA and n is slot) or (n.op == Op.STORE and n.srcs[0] is slot):
                c = sz.Const(1)
            elif n.op == Op.IF:
                c = sz.Max(self.count(n.blocks[0], slot), self.count(n.blocks[1], slot))
            elif n.op == Op.RANGE_FOR:
                inner = self.count(n.blocks[0], slot)
                if inner == sz.Const(0):
                    continue
                b, e = self.expr(n.srcs[0], n.loc), self.expr(n.srcs[1], n.loc)
                trips = sz.Sub(e, b)
                v = self.var(n.arg.index)
                if v in sz.free_vars(inner):
                    inner = sz.MaxOverRange(v, b, e, inner)
                c = sz.Mul(trips, inner)
            elif n.op == Op.WHILE:
                inner = self.count(n.blocks[0], slot)
                if inner == sz.Const(0):
                    continue
                raise _Unbounded(n.loc, "a while loop has no trip count the adstack sizer can bound")
            else:
                continue
            total = sz.Add(total, c)
        return sz.simplify(total)

    def capacity(self, slot):
        c = self.count(self.body, slot)
        t = self.task
        c = self.wrap_components(c, slot.loc)
        if t.index is not None and t.index in self.vars and self.vars[t.index] in sz.free_vars(c):
            c = sz.MaxOverRange(self.vars[t.index], self.expr(t.begin, t.loc), self.expr(t.end, t.loc), c)
        if sz.free_vars(c):
            raise _Unbounded(slot.loc, "a loop bound depends on a value the sizer cannot see")
        return sz.simplify(c)


def capacities(body: Block, task: Task, default=None, forced=None, written=frozenset(),
               on_stack=None) -> list:
    """(capacity, automatic size or None) per ALLOCA slot of the normalized body, in walk
    order; (None, None) for a stack the counting pass measures. `written`: (kind, key, grad) of
    every global the kernel writes; a loop bound read from one of them is an error (the stacks
    are sized before the launch, from the values the kernel is about to overwrite)."""
    s = Sizing(body, task, written)
    out = []
    for n in walk(body):
        if n.op != Op.ALLOCA or (on_stack is not None and n not in on_stack):
            continue
        try:
            natural = s.capacity(n)
        except _Unbounded:
            natural = None
            if forced:
                pass
            elif default:
                out.append((sz.Const(int(default)), None))
                continue
            else:
                out.append((None, None))  # measured at launch (counting.py)
                continue
        out.append((sz.Const(int(forced)) if forced else natural, natural))
    return out
