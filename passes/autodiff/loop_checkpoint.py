"""Checkpointed loops: bounded adstack memory inside a kernel (architecture §4 "Bounded memory").

An adjoint stores, per thread, every trip's values of the stacked locals: a loop of T trips with
P pushes per trip needs T * P entries. When a launch's heap would pass the budget
(`init(ad_stack_memory=...)`), the launch switches to the *checkpointed* adjoint of the program,
built with a segment length S (`reverse_mode(..., checkpoint=S)`): every top-level dynamic loop
L of a task that stores a stacked local is split into segments of S trips.

* Forward sweep (in the replay, where L stood): L runs with its stacked locals as plain locals
  (`shadow`s seeded from the stack tops); at the head of every S-th trip the loop *state* — every
  local allocated outside L and stored inside it, the trip counter included — is pushed onto a
  checkpoint stack per local (`ckpt`), and `nck` counts the checkpoints. After L, the final state
  is pushed onto the real stacks, so the code after L sees the tops it would have seen.
* Reverse (where the reverse walk meets L): the final entries are popped, their adjoints kept in
  `carry` locals; then, for each checkpoint from the last: the state is popped from the
  checkpoint stacks and pushed onto the real stacks (plain locals: stored; a plain local L only
  reads gets back the value it had at L, which later code may have changed), the segment's trips
  are replayed with pushes (a range over trips [k*S, min(k*S + S, T)), the loop's exit checks
  dropped: every replayed trip ran in the forward pass), the carried adjoints are added to the
  tops (the state at the segment's end), the segment's trips are walked backwards exactly as
  `rev_loop` walks them, and the adjoints of the restored entries become the new `carry`. After
  the first segment `carry` is added to the tops from before L.

Why it is sound under the control flow reverse mode meets: it runs on a normalized body
(`normalize.py`), where `break` / `continue` are flags and `if not skip` blocks and `while` /
early exits are head exit checks with a counted trip number: a segment replays trips the forward
pass ran, every one of them past its exit checks (nothing before an exit check writes a local:
`normalize.check_heads`), with the flags, conditions and snapshots the forward trip stored;
nested loops are replayed whole inside a trip; the state pushed at a segment's head is every
local allocated outside L and stored in it, so a later overwrite of a local (after L, or by a
later loop) cannot reach a replayed segment. tests/autodiff/test_reverse_soundness.py runs its
shapes checkpointed.

The arithmetic of every trip is the same as in the fully stored adjoint, so the gradients are the
same; memory per thread goes from T * P entries to about T / S state entries + S * P, at the cost
of replaying L's trips once more. Every stack of a checkpointed task is measured by the counting
pass, which mirrors this schedule (`counting.py`: pushes inside L counted per segment).
"""
from __future__ import annotations

from dataclasses import replace

from kernel_ir.builder import IRBuilder
from kernel_ir.dtypes import i32
from kernel_ir.nodes import AdStackArg, Block, Node, carried_slots, walk
from kernel_ir.ops import LOOPS, Op
from kernel_ir.rewrite import rebuild, remap_arg

from .normalize import _is_exit_check


def checkpoint_loops(body: Block, on_stack) -> list:
    """The top-level dynamic loops of a normalized task body that store a stacked local (their
    pushes are what checkpointing bounds)."""
    out = []
    for n in body.nodes:
        if n.op in LOOPS and any(m.op in (Op.ALLOCA, Op.STORE) and
                                 (m if m.op == Op.ALLOCA else m.srcs[0]) in on_stack
                                 for m in walk(n.blocks[0])):
            out.append(n)
    return out


def state_slots(loop: Node) -> tuple:
    """Locals allocated outside `loop` and stored inside it (its trip counter included)."""
    return carried_slots(loop.blocks[0])


def fresh_indices(block: Block, env: dict) -> None:
    """Map every RANGE_FOR index inside `block` to a new LOOP_INDEX (a replayed copy of a loop
    must not share its index node with the original)."""
    for m in walk(block):
        if m.op == Op.RANGE_FOR:
            i = m.arg.index
            env[i] = Node(Op.LOOP_INDEX, i.dtype, (), object(), (), i.loc)


def copy_node(n, srcs, blocks, arg, env):
    """A rebuild visit that always makes a new node (a region emitted twice must not share
    nodes)."""
    return Node(n.op, n.dtype, srcs, arg, blocks, n.loc)


class Checkpointed:
    """One checkpointed loop of an adjoint: its segment length, counter and locals. A plain
    class: a dataclass costs ~1 ms to build at import, in the first gradient compile of every
    process (issue #27)."""
    __slots__ = ("loop", "every", "counter", "state", "ckpt", "shadow", "carry", "inputs", "tc",
                 "nck")

    def __init__(self, loop: Node, every: int, counter: int):
        self.loop = loop
        self.every = every        # S: trips per segment
        self.counter = counter    # the counting pass's counter of its checkpoint stacks
        self.state: tuple = ()    # locals saved at each checkpoint
        self.ckpt: dict = {}      # state local -> its checkpoint ADSTACK_ALLOCA
        self.shadow: dict = {}    # stacked state local -> plain local (sweep)
        self.carry: dict = {}     # float stacked state local -> adjoint local
        self.inputs: dict = {}    # plain local read, not stored, in the loop -> its value then
                                  # (a later store must not reach a segment's replay)
        self.tc: Node = None      # trips started in the sweep (i32 local)
        self.nck: Node = None     # checkpoints pushed (i32 local)

    def declare(self, ab) -> None:
        """The stacks and locals, at the top of the adjoint body (`ab`: the AdjointBuilder)."""
        b = ab.b
        self.state = state_slots(self.loop)
        for y in self.state:
            a = Node(Op.ADSTACK_ALLOCA, y.dtype, (), AdStackArg(
                (y.arg or "v") + ".ckpt", None, None, measured=self.counter), (), self.loop.loc)
            self.ckpt[y] = b.append(a)
            if y in ab.stacks:
                self.shadow[y] = b.alloca(y.dtype, (y.arg or "v") + ".sweep")
                if y.dtype.is_float:
                    self.carry[y] = b.alloca(y.dtype, (y.arg or "v") + ".carry")
        inner = {m for m in walk(self.loop.blocks[0]) if m.op == Op.ALLOCA}
        for m in walk(self.loop.blocks[0]):
            y = m.srcs[0] if m.op == Op.LOAD else None
            if y is not None and y not in inner and y not in ab.stacks and \
                    y not in self.state and y not in self.inputs:
                self.inputs[y] = b.alloca(y.dtype, (y.arg or "v") + ".input")
        self.tc = b.alloca(i32, "ckpt_trips")
        self.nck = b.alloca(i32, "ckpt_count")
        b.store(self.tc, b.const(0, i32))
        b.store(self.nck, b.const(0, i32))

    # -- forward sweep -------------------------------------------------------------------------
    def sweep(self, ab) -> None:
        b, L = ab.b, self.loop
        stacked = [y for y in self.state if y in ab.stacks]
        for y in stacked:
            b.store(self.shadow[y], b.emit(Op.ADSTACK_LOAD_TOP, y.dtype, (ab.stacks[y],)))
        for y, keep_ in self.inputs.items():
            b.store(keep_, b.load(ab.renv.get(y, y)))
        env = dict(ab.renv)
        env.update(self.shadow)
        if L.arg.index is not None:
            env[L.arg.index] = Node(Op.LOOP_INDEX, L.arg.index.dtype, (), object(), (), L.loc)
        fresh_indices(L.blocks[0], env)
        hb = IRBuilder()
        t = hb.load(self.tc)
        due = hb.binary(Op.CMP_EQ, hb.binary(Op.MOD, t, hb.const(self.every, i32)), hb.const(0, i32))
        with hb.if_(due) as (then, other):
            with then:
                for y in self.state:
                    src = self.shadow.get(y) or ab.renv.get(y, y)
                    hb.emit(Op.ADSTACK_PUSH, None, (self.ckpt[y], hb.load(src)))
                hb.store(self.nck, hb.binary(Op.ADD, hb.load(self.nck), hb.const(1, i32)))
            with other:
                pass
        hb.store(self.tc, hb.binary(Op.ADD, t, hb.const(1, i32)))
        body = rebuild(L.blocks[0], ab._sweep_visit, env)
        block = Block(tuple(hb.finish().nodes) + tuple(body.nodes))
        arg = replace(remap_arg(L.arg, env), carried=carried_slots(block))
        srcs = tuple(ab.renv.get(s, s) for s in L.srcs)
        b.append(Node(L.op, None, srcs, arg, (block,), L.loc))
        if L in ab.hold:  # its trip count, for the reverse walk (top level: SSA)
            ab.held[L] = b.load(arg.trips)
        for y in stacked:
            b.emit(Op.ADSTACK_PUSH, None, (ab.stacks[y], b.load(self.shadow[y])))

    # -- reverse -------------------------------------------------------------------------------
    def reverse(self, ab, memo) -> None:
        b, L, st = ab.b, self.loop, ab.stacks
        stacked = [y for y in self.state if y in st]
        one, zero = b.const(1, i32), b.const(0, i32)
        begin = None
        if L.op == Op.RANGE_FOR:
            begin, end = ab.rc(L.srcs[0], memo), ab.rc(L.srcs[1], memo)
        if L.arg.trips in st:  # the final trip count, on top of its stack (before the pops)
            total = b.emit(Op.ADSTACK_LOAD_TOP, i32, (st[L.arg.trips],))
        elif L.arg.trips is not None:
            total = b.cast(ab.held_value(L), i32)
        else:
            total = b.cast(b.binary(Op.MAX, b.binary(Op.SUB, end, begin),
                                    b.const(0, end.dtype)), i32)
        for y in stacked:  # the final entries pushed after the sweep
            if y in self.carry:
                b.store(self.carry[y], b.emit(Op.ADSTACK_LOAD_TOP_ADJ, y.dtype, (st[y],)))
            b.emit(Op.ADSTACK_POP, None, (st[y],))
        n = b.load(self.nck)
        with b.range_for(zero, n, carried=()) as kk:
            k = b.binary(Op.SUB, b.binary(Op.SUB, n, one), kk)
            for y in self.state:
                v = b.emit(Op.ADSTACK_LOAD_TOP, y.dtype, (self.ckpt[y],))
                b.emit(Op.ADSTACK_POP, None, (self.ckpt[y],))
                if y in st:
                    b.emit(Op.ADSTACK_PUSH, None, (st[y], v))
                else:
                    b.store(ab.renv.get(y, y), v)
            for y, keep_ in self.inputs.items():
                b.store(ab.renv.get(y, y), b.load(keep_))
            lo = b.binary(Op.MUL, k, b.const(self.every, i32))
            hi = b.binary(Op.MIN, b.binary(Op.ADD, lo, b.const(self.every, i32)), total)
            cnt = b.binary(Op.MAX, b.binary(Op.SUB, hi, lo), zero)
            if begin is not None:
                rlo = b.binary(Op.ADD, begin, b.cast(lo, begin.dtype))
                rhi = b.binary(Op.ADD, rlo, b.cast(cnt, begin.dtype))
            else:
                rlo, rhi = lo, b.binary(Op.ADD, lo, cnt)
            with b.range_for(rlo, rhi) as j:  # the segment's trips, replayed with pushes
                env = dict(ab.renv)
                if L.arg.index is not None:
                    env[L.arg.index] = j
                fresh_indices(L.blocks[0], env)
                body = [m for m in L.blocks[0].nodes if not _is_exit_check(m)]
                for m in rebuild(Block(tuple(body)), ab._segment_visit, env).nodes:
                    b.append(m)
            for y, c in self.carry.items():
                b.emit(Op.ADSTACK_ACC_ADJ, None, (st[y], b.load(c)))
            with b.range_for(b.const(0, cnt.dtype), cnt, carried=()) as j:
                if begin is not None:
                    last = b.binary(Op.SUB, b.binary(Op.ADD, rlo, b.cast(cnt, begin.dtype)),
                                    b.const(1, begin.dtype))
                    ab.idx_env[L.arg.index] = b.binary(Op.SUB, last, b.cast(j, begin.dtype))
                ab.rev_block(L.blocks[0].nodes)
            for y in stacked:
                if y in self.carry:
                    b.store(self.carry[y], b.emit(Op.ADSTACK_LOAD_TOP_ADJ, y.dtype, (st[y],)))
                b.emit(Op.ADSTACK_POP, None, (st[y],))
        for y, c in self.carry.items():  # into the entries from before the loop
            b.emit(Op.ADSTACK_ACC_ADJ, None, (st[y], b.load(c)))
