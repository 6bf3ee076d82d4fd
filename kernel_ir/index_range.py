"""Which global accesses of a task are provably in range (the default bounds checks skip them).

Without `sd.init(debug=True)` every global access is still checked (an out-of-range index is
skipped and flagged: `kernel_ir.abi.STATUS_OUT_OF_BOUNDS`), except the accesses this module
proves in range at compile time: each index is an integer expression of constants, the task's
parallel index and `range` loop indices with known bounds (`for i in x`, struct-for over a
field's own shape `for i, j in x` — lowered to `idx // n`, `idx % n` —, `range(8)`,
`range(a.shape[0])` over ndarray `a`) whose value interval lies inside the axis extent.

An interval is (lo, hi) with lo an int and hi the exclusive upper bound: an int, or
`("shape", arg, axis)` — the extent of ndarray argument `arg` along `axis` (so `i` of
`range(a.shape[0])` indexes axis 0 of `a` safely). Anything else (arguments, loads, locals,
WHILE loops, unknown ops) has no interval: its accesses stay checked. Accesses a pass proved
in range with a run-time guard (`Task.proven`, passes/bounds_versioning) are in range too.
"""
from __future__ import annotations

from .nodes import walk
from .ops import GLOBAL_ACCESS, Op

_I32 = (-(1 << 31), 1 << 31)


def _fits(lo, hi) -> bool:
    return _I32[0] <= lo and (not isinstance(hi, int) or hi <= _I32[1])


class _Ranges:
    def __init__(self):
        self.env = {}  # id(LOOP_INDEX node) -> interval

    def of(self, n):
        """The interval of integer expression `n`, or None."""
        op = n.op
        if n.dtype is None or n.dtype.kind not in ("i", "u") or n.dtype.is_bool:
            return None
        if op == Op.CONST:
            v = n.arg
            return (int(v), int(v) + 1) if isinstance(v, int) and not isinstance(v, bool) else None
        if op == Op.LOOP_INDEX:
            return self.env.get(id(n))
        if op == Op.NDARRAY_SHAPE:
            arg, axis = n.arg
            return None if n.srcs else ("=shape", arg, axis)  # used only as a range's end
        if op == Op.CAST:
            src = n.srcs[0]
            if src.dtype is None or src.dtype.kind not in ("i", "u"):
                return None
            r = self.of(src)
            return r if r is not None and n.dtype.bits >= 32 and isinstance(r[1], int) else None
        if op not in (Op.ADD, Op.SUB, Op.MUL, Op.FLOORDIV, Op.MOD):
            return None
        a, b = self.of(n.srcs[0]), self.of(n.srcs[1])
        if a is None or b is None or a[0] == "=shape" or b[0] == "=shape":
            return None
        if not (isinstance(b[1], int) and b[1] == b[0] + 1):  # right operand: a constant
            if op == Op.ADD and isinstance(a[1], int) and a[1] == a[0] + 1 and isinstance(b[1], int):
                a, b = b, a
            else:
                return None
        c = b[0]
        lo, hi = a
        if op == Op.ADD:
            r = (lo + c, hi + c) if isinstance(hi, int) else ((lo + c, hi) if c <= 0 else None)
        elif op == Op.SUB:
            r = (lo - c, hi - c) if isinstance(hi, int) else ((lo - c, hi) if c >= 0 else None)
        elif not isinstance(hi, int):
            r = (lo // c, hi) if op == Op.FLOORDIV and c >= 1 and lo >= 0 else None
        elif op == Op.MUL:
            if hi <= lo:
                return None
            ends = (lo * c, (hi - 1) * c)
            r = (min(ends), max(ends) + 1)
        elif op == Op.FLOORDIV:
            r = (lo // c, (hi - 1) // c + 1) if c >= 1 and lo >= 0 else None
        else:  # MOD
            r = (0, min(c, hi)) if c >= 1 and lo >= 0 else None
        return r if r is not None and _fits(*r) else None

    def bound(self, index, begin, end) -> None:
        b = self.of(begin)
        e = end and self.of(end)
        if b is None or e is None or not (isinstance(b[1], int) and b[1] == b[0] + 1):
            return
        if e[0] == "=shape":
            hi = ("shape", e[1], e[2])
        elif isinstance(e[1], int) and e[1] == e[0] + 1:
            hi = e[0]
        else:
            return
        if not isinstance(hi, int) or hi > b[0]:
            self.env[id(index)] = (b[0], hi)


def _inside(r, ref, axis) -> bool:
    if r is None or r[0] < 0:
        return False
    hi = r[1]
    if isinstance(hi, int):
        if ref.shape is not None:
            return hi <= int(ref.shape[axis])
        return ref.kind == "temp" and hi <= 1
    return ref.kind == "ndarray" and hi == ("shape", ref.key, axis)


def in_range_accesses(task) -> frozenset:
    """The GLOBAL_ACCESS nodes of `task` whose every index is provably inside its axis."""
    rs = _Ranges()
    if task.kind == "range" and task.index is not None:
        rs.bound(task.index, task.begin, task.end)
    out = set()

    def visit(block):
        for n in block.nodes:
            if n.op == Op.RANGE_FOR and n.arg is not None and n.arg.index is not None:
                rs.bound(n.arg.index, n.srcs[0], n.srcs[1])
            if n.op in GLOBAL_ACCESS:
                idx = n.srcs if n.op == Op.GLOBAL_LOAD else n.srcs[:-1]
                if all(_inside(rs.of(s), n.arg, a) for a, s in enumerate(idx)):
                    out.add(n)
            for b in n.blocks:
                visit(b)
    visit(task.body)
    return frozenset(out) | task.proven


def checked_accesses(task) -> list:
    """The task's global accesses the default checks keep, in `walk` order."""
    safe = in_range_accesses(task)
    return [n for n in walk(task.body) if n.op in GLOBAL_ACCESS and n not in safe]
