"""IRBuilder: appends nodes to the current block; nested regions through context managers.

    b = IRBuilder()
    x = b.const(1.0, f32)
    with b.range_for(b.const(0, i32), n) as i:   # yields the loop index node
        ...
    body = b.finish()

Used by the frontend, by passes that rebuild blocks, and by tests that write IR by hand.
`Emit(b)` adds the typed arithmetic helpers derivative rules and math expansions are written in.
"""
from __future__ import annotations

import numbers
from contextlib import contextmanager

from .dtypes import DType, i32, i64, u1
from .nodes import Block, LoopArg, Node, SrcLoc, carried_slots
from .ops import COMPARE, Op


class IRBuilder:
    def __init__(self):
        self._stack: list[list[Node]] = [[]]
        self.loc: SrcLoc | None = None

    # -- raw emission ------------------------------------------------------------------------
    def emit(self, op: Op, dtype: DType | None = None, srcs=(), arg=None, blocks=()) -> Node:
        n = Node(op, dtype, tuple(srcs), arg, tuple(blocks), self.loc)
        self._stack[-1].append(n)
        return n

    def append(self, n: Node) -> Node:
        self._stack[-1].append(n)
        return n

    def finish(self) -> Block:
        if len(self._stack) != 1:
            raise RuntimeError("IRBuilder.finish with unclosed regions")
        return Block(tuple(self._stack[0]))

    @contextmanager
    def region(self):
        """Collect the nodes emitted inside the `with` into a Block, returned via the list."""
        self._stack.append([])
        out: list = []
        try:
            yield out
        finally:
            out.append(Block(tuple(self._stack.pop())))

    def position(self) -> tuple:
        """Where the next node of the current block goes: for `insert` to put nodes there once
        later code decided they are needed (a sparse struct-for's snapshot, built before its
        loop only when its body turns out to write the node's masks)."""
        return (self._stack[-1], len(self._stack[-1]))

    def insert(self, position: tuple, block: Block) -> None:
        """Put `block`'s nodes at `position` (from `position()`; the block's nodes may use
        only nodes emitted before that point)."""
        nodes, at = position
        nodes[at:at] = block.nodes

    # -- values ------------------------------------------------------------------------------
    def const(self, v, dtype: DType) -> Node:
        if type(v) not in (int, float, bool) and isinstance(v, numbers.Real) \
                and not isinstance(v, bool):  # an IntEnum member, a numpy scalar: the plain value
            v = int(v) if isinstance(v, numbers.Integral) else float(v)
        return self.emit(Op.CONST, dtype, (), v)

    def arg(self, index: int, dtype: DType) -> Node:
        return self.emit(Op.ARG, dtype, (), index)

    def unary(self, op: Op, a: Node) -> Node:
        return self.emit(op, a.dtype, (a,))

    def binary(self, op: Op, a: Node, b: Node) -> Node:
        if a.dtype != b.dtype:
            raise RuntimeError(f"binary {op.name} on {a.dtype} and {b.dtype}")
        return self.emit(op, u1 if op in COMPARE else a.dtype, (a, b))

    def cast(self, a: Node, dtype: DType) -> Node:
        return a if a.dtype == dtype else self.emit(Op.CAST, dtype, (a,))

    def select(self, c: Node, a: Node, b: Node) -> Node:
        return self.emit(Op.SELECT, a.dtype, (c, a, b))

    # -- locals and globals ------------------------------------------------------------------
    def alloca(self, dtype: DType, name: str = "") -> Node:
        return self.emit(Op.ALLOCA, dtype, (), name)

    def load(self, slot: Node) -> Node:
        return self.emit(Op.LOAD, slot.dtype, (slot,))

    def store(self, slot: Node, v: Node) -> Node:
        return self.emit(Op.STORE, None, (slot, v))

    def global_load(self, ref, indices) -> Node:
        return self.emit(Op.GLOBAL_LOAD, ref.dtype, tuple(indices), ref)

    def global_store(self, ref, indices, v: Node) -> Node:
        return self.emit(Op.GLOBAL_STORE, None, (*indices, v), ref)

    def atomic_add(self, ref, indices, v: Node) -> Node:
        return self.emit(Op.ATOMIC_ADD, ref.dtype, (*indices, v), ref)

    def atomic(self, op: Op, ref, indices, v: Node) -> Node:
        """Any atomic read-modify-write (`ops.ATOMICS`); returns the old value."""
        return self.emit(op, ref.dtype, (*indices, v), ref)

    # -- control flow ------------------------------------------------------------------------
    @contextmanager
    def if_(self, cond: Node):
        """`with b.if_(c) as (then, orelse):` — use `with then:` / `with orelse:` inside."""
        then_r, else_r = _Region(self), _Region(self)
        yield then_r, else_r
        self.emit(Op.IF, None, (cond,), None, (then_r.block, else_r.block))

    @contextmanager
    def range_for(self, begin: Node, end: Node, carried=None, index_dtype: DType = None,
                  parallel: bool = False):
        if index_dtype is None:  # i64 bounds give an i64 index (never narrowed), else i32
            index_dtype = i64 if 64 in (begin.dtype.bits, end.dtype.bits) else i32
        idx = Node(Op.LOOP_INDEX, index_dtype, (), object(), (), self.loc)
        with self.region() as out:
            yield idx
        if carried is None:
            carried = carried_slots(out[0])
        static = None
        if begin.op == Op.CONST and end.op == Op.CONST:
            static = max(int(end.arg) - int(begin.arg), 0)
        arg = LoopArg(idx, tuple(carried), static_trips=static, parallel=parallel)
        self.emit(Op.RANGE_FOR, None, (begin, end), arg, (out[0],))

    @contextmanager
    def while_(self, carried=None):
        with self.region() as out:
            yield
        if carried is None:
            carried = carried_slots(out[0])
        self.emit(Op.WHILE, None, (), LoopArg(None, tuple(carried)), (out[0],))

    def break_(self) -> Node:
        return self.emit(Op.BREAK)

    def continue_(self) -> Node:
        return self.emit(Op.CONTINUE)


class Emit:
    """Typed helpers over an IRBuilder for writing derivative rules and math expansions
    (`kernel_ir.mathfns`, `passes.derivatives`): `e.add(x, y)`, `e.op(Op.EXP, x)`, ..."""

    def __init__(self, b: IRBuilder):
        self.b = b

    def const(self, v, dt):
        return self.b.const(v, dt)

    def op(self, op, *srcs):
        if len(srcs) == 1:
            return self.b.unary(op, srcs[0])
        return self.b.binary(op, *srcs)

    def add(self, x, y):
        return self.b.binary(Op.ADD, x, y)

    def sub(self, x, y):
        return self.b.binary(Op.SUB, x, y)

    def mul(self, x, y):
        return self.b.binary(Op.MUL, x, y)

    def div(self, x, y):
        return self.b.binary(Op.DIV, x, y)

    def neg(self, x):
        return self.b.unary(Op.NEG, x)

    def cmp(self, op, x, y):
        return self.b.binary(op, x, y)

    def select(self, c, x, y):
        return self.b.select(c, x, y)

    def cast(self, x, dt):
        return self.b.cast(x, dt)


class _Region:
    """One arm of an IF: a context manager that collects nodes; empty unless entered."""

    def __init__(self, b: IRBuilder):
        self.b = b
        self.block = Block(())

    def __enter__(self):
        self.b._stack.append([])
        return self

    def __exit__(self, *exc):
        self.block = Block(tuple(self.b._stack.pop()))
        return False
