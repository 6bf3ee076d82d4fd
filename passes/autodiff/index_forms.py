"""Index expressions of global accesses, compared structurally: the shared vocabulary of the two
global-access diagnostics (`diagnostics.check_cross_iteration_raw`, `global_reads`).

Both ask "can these two index tuples name the same element?". They compare expressions such as
`i`, `i - 1`, `t + 1` or a constant. A local that holds one value, like a `@func` parameter
(`def body(out, i): out[i] = ...` stores the caller's `i` into a local slot once), is looked
through: a load of a slot that the task body stores exactly once stands for the stored value.
That is exact because the frontend stores every local when it is declared, so its one store
comes before every load of it in the same iteration of every enclosing loop. Loads of other
slots compare only by identity (two loads of a slot that changes may differ).
"""
from __future__ import annotations

from kernel_ir.nodes import Block, Node, walk
from kernel_ir.ops import LEAVES, PURE, Op

_HOST = (Op.CONST, Op.ARG, Op.NDARRAY_SHAPE)


class IndexForms:
    def __init__(self, body: Block):
        stores: dict = {}
        for n in walk(body):
            if n.op == Op.STORE:
                stores.setdefault(n.srcs[0], []).append(n.srcs[1])
        self._value = {slot: vs[0] for slot, vs in stores.items() if len(vs) == 1}

    def resolve(self, n: Node) -> Node:
        """`n`, seen through loads of single-store locals."""
        seen = 0
        while n.op == Op.LOAD and n.srcs[0] in self._value and seen < 64:
            n = self._value[n.srcs[0]]
            seen += 1
        return n

    def same(self, a: Node, b: Node, depth: int = 0) -> bool:
        """Structurally the same value (loop indices and unresolved loads by identity)."""
        a, b = self.resolve(a), self.resolve(b)
        if a is b:
            return True
        if depth > 64 or a.op != b.op or a.dtype != b.dtype or len(a.srcs) != len(b.srcs):
            return False
        if a.op in (Op.LOOP_INDEX, Op.LOAD):
            return False
        if a.op in LEAVES:
            return a.arg == b.arg
        if a.op == Op.GLOBAL_LOAD and a.arg != b.arg:
            return False
        if a.op not in PURE and a.op != Op.GLOBAL_LOAD:
            return False
        return all(self.same(x, y, depth + 1) for x, y in zip(a.srcs, b.srcs))

    def offset(self, n: Node, index) -> int | None:
        """k when `n` is `index + k` / `index - k` / `index` (an injective function of the loop
        index `index`), else None."""
        if index is None:
            return None
        n = self.resolve(n)
        if n is index:
            return 0
        if n.op in (Op.ADD, Op.SUB) and len(n.srcs) == 2:
            a, c = self.resolve(n.srcs[0]), self.resolve(n.srcs[1])
            if a is index and c.op == Op.CONST:
                return int(c.arg) if n.op == Op.ADD else -int(c.arg)
            if n.op == Op.ADD and a.op == Op.CONST and c is index:
                return int(a.arg)
        return None

    def const_offset(self, a: Node, b: Node) -> int | None:
        """c when `b` is `a + c` / `a - c` structurally (c a constant), else None."""
        b = self.resolve(b)
        if b.op in (Op.ADD, Op.SUB) and len(b.srcs) == 2:
            c = self.resolve(b.srcs[1])
            if c.op == Op.CONST and self.same(b.srcs[0], a):
                return int(c.arg) if b.op == Op.ADD else -int(c.arg)
        return None

    def invariant(self, n: Node, fixed=(), depth: int = 0) -> bool:
        """`n` has one value wherever it is evaluated: built by pure ops from constants, scalar
        arguments, ndarray shapes and the nodes in `fixed` (a thread's parallel index)."""
        n = self.resolve(n)
        if n.op in _HOST or any(n is f for f in fixed):
            return True
        if depth > 64 or n.op in LEAVES or n.op not in PURE:
            return False
        return all(self.invariant(s, fixed, depth + 1) for s in n.srcs)

    def never_same(self, a: Node, b: Node, fixed=()) -> bool:
        """`a` and `b` never take the same value: two different constants, or `x` and `x + c`
        (c != 0) with `x` invariant (`invariant(x, fixed)`)."""
        a, b = self.resolve(a), self.resolve(b)
        if a.op == Op.CONST and b.op == Op.CONST:
            return a.arg != b.arg
        for x, y in ((a, b), (b, a)):
            c = self.const_offset(x, y)
            if c and self.invariant(x, fixed):
                return True
        return False
