"""Build the adjoint of one task: forward replay onto adstacks, then the body walked backwards.

A local goes on an adstack only when the reverse walk needs its primal values (`stack_slots`):
when a load of it feeds — directly or through pure ops — a non-linear op, an IF condition, a loop
bound or trip count, or the index of a global with a gradient. Those slots replay onto stacks
(ALLOCA pushes a zero, STORE pushes the value, LOAD reads the top). Every other local stays a
plain local in the replay and, if it is a float, gets one adjoint local in the reverse walk
(a loop that only reads it accumulates every iteration's adjoint there; a STORE consumes it).
The replay drops global writes (the forward kernel already made
them; `kernel.grad` does not modify primal fields, as in Taichi). The reverse walk visits the
statements in reverse order:

* STORE s = v:       a = top adjoint of s; pop s; propagate a into v's expression
* ALLOCA s:          pop s (its initial zero)
* x[i] = v:          a = x.grad[i]; x.grad[i] = 0 (a store overwrites: the old value's adjoint
                     path ends here, as in Taichi); propagate a
* x[i] += v:         a = x.grad[i] (an accumulation: x.grad[i] stays); propagate a
* IF c:              the reversed branch chosen by c's stacked value
* RANGE_FOR / WHILE: a loop over the executed trip count, indices in reverse order

"Propagate a into v" recomputes the primal values v's expression needs at that point (loads
read stack tops, which hold exactly the values the forward pass saw there) and applies
`VJP_RULES` per op; a load of a local accumulates into its stack top's adjoint, a load of a global
that has a gradient atomically adds into it.
"""
from __future__ import annotations

from kernel_ir.errors import SpiradAutodiffError
from kernel_ir.source import user_error
from kernel_ir.builder import Emit, IRBuilder
from kernel_ir.dtypes import i32
from kernel_ir.nodes import AdStackArg, Block, Node, walk
from kernel_ir.ops import ATOMICS, GLOBAL_ACCESS, LEAVES, LOOPS, PURE, Op
from kernel_ir.rewrite import Splice, keep, rebuild
from ..derivatives import DERIVATIVES, LINEAR, VJP_RULES, constant_zero
from .normalize import _is_exit_check
from .loop_checkpoint import Checkpointed, copy_node

# atomics whose new value is one of its operands: the adjoint goes to the operand that won
_ARG_ATOMICS = (Op.ATOMIC_MIN, Op.ATOMIC_MAX, Op.ATOMIC_XCHG)


def stack_slots(body: Block, has_grad) -> tuple[set, set]:
    """(slots, needed): the slots whose primal values the reverse walk reads (see the module
    docstring), and every node whose primal value it needs (for `global_reads`)."""
    needed = set()
    work = []
    varying = Varying()

    def need(x):
        if x not in needed:
            needed.add(x)
            work.append(x)

    for n in walk(body):
        op = n.op
        if op == Op.IF and not _is_exit_check(n):
            need(n.srcs[0])
        elif op == Op.RANGE_FOR:
            for x in n.srcs:
                need(x)
        elif op in GLOBAL_ACCESS:
            if has_grad(n.arg):
                k = len(n.srcs) - (0 if op == Op.GLOBAL_LOAD else 1)
                for x in n.srcs[:k]:
                    need(x)
                if op in _ARG_ATOMICS and n.arg.dtype.is_float:
                    need(n.srcs[-1])  # compared with the final value in the reverse walk
        elif op == Op.SELECT:
            need(n.srcs[0])
        elif op in PURE and op not in LEAVES and op not in LINEAR and n.dtype is not None \
                and n.dtype.is_float:
            for k, x in enumerate(n.srcs):
                if _needs_src(op, k, n.srcs, varying):
                    need(x)
    while work:
        x = work.pop()
        if x.op in PURE and x.op not in LEAVES:
            for y in x.srcs:
                need(y)
        elif x.op == Op.GLOBAL_LOAD:
            for y in x.srcs:
                need(y)
    loops_of, stored_in = _loop_nesting(body)
    slots = {x.srcs[0] for x in needed
             if x.op == Op.LOAD and any(x.srcs[0] in stored_in[lp] for lp in loops_of[x])}
    for n in walk(body):
        if n.op in LOOPS and n.arg.trips is not None and loops_of[n.arg.trips]:
            slots.add(n.arg.trips)  # a nested loop's trip count: one per outer iteration
    return slots, needed


def adjoint_slots(body: Block) -> set:
    """The slots an adjoint can reach: loaded (anywhere) by an expression whose adjoint flows to
    the load, from the value of a global store or atomic (the kernel's outputs) or of a store
    into such a slot. Flow-insensitive, so a superset of what `Adjoint.propagate` reaches; the
    one edge it drops is `propagate`'s own: a factor of a product with the constant 0
    (`derivatives.constant_zero`). The other slots' adjoints are zero: their stores pass
    nothing on (no atomic adds of zeros into gradients; DiffTaichi's `wave` reads five
    neighbours into slots for a stencil it multiplies by 0)."""
    stores: dict = {}
    work = []
    for n in walk(body):
        if n.op == Op.STORE:
            stores.setdefault(n.srcs[0], []).append(n.srcs[1])
        elif n.op == Op.GLOBAL_STORE or n.op in ATOMICS:
            work.append(n.srcs[-1])
    active, seen = set(), set()
    while work:
        x = work.pop()
        if x in seen:
            continue
        seen.add(x)
        if x.op == Op.LOAD:
            if x.srcs[0] not in active:
                active.add(x.srcs[0])
                work.extend(stores.get(x.srcs[0], ()))
        elif x.op in PURE and x.op not in LEAVES:
            for k, y in enumerate(x.srcs):
                if x.op == Op.MUL and constant_zero(x.srcs[1 - k]):
                    continue
                work.append(y)
    return active


def _loop_nesting(body: Block) -> tuple[dict, dict]:
    """(loops_of, stored_in): per node its enclosing dynamic loops; per loop the slots an ALLOCA
    or STORE inside it (at any depth) writes."""
    loops_of, stored_in = {}, {}

    def visit(block, loops):
        for n in block.nodes:
            loops_of[n] = loops
            if n.op in (Op.ALLOCA, Op.STORE):
                slot = n if n.op == Op.ALLOCA else n.srcs[0]
                for lp in loops:
                    stored_in[lp].add(slot)
            inner = loops
            if n.op in LOOPS:
                stored_in[n] = set()
                inner = loops + (n,)
            for b in n.blocks:
                visit(b, inner)

    visit(body, ())
    return loops_of, stored_in


class _Typed:
    """Stands in for a primal a derivative rule does not read (only its dtype is known)."""

    def __init__(self, dtype):
        self.dtype = dtype


class Varying:
    """`varying(n)`: can an adjoint flow out of `n`? (It reads a local or a global through pure
    ops.) Memoised per instance: one per body being differentiated."""

    def __init__(self):
        self.memo = {}

    def __call__(self, n: Node) -> bool:
        r = self.memo.get(n)
        if r is None:
            if n.op in (Op.LOAD, Op.GLOBAL_LOAD):
                r = True
            elif n.op in PURE and n.op not in LEAVES:
                r = any(self(x) for x in n.srcs)
            else:
                r = False
            self.memo[n] = r
        return r


def _needs_src(op, k, srcs, varying: Varying) -> bool:
    """Does the derivative rule of `op` read the primal of source `k`? (its record says;
    an op without one is reported as not differentiable where it is met)"""
    d = DERIVATIVES.get(op)
    return True if d is None else d.reads(k, srcs, varying)


class AdjointBuilder:
    """`AdjointBuilder(body, grad_of, on_stack, capacities, needed).build(index)`: the adjoint
    body.

    `on_stack`, `needed`: the slots replayed onto adstacks and the nodes whose primal the reverse
    walk reads (`stack_slots`); `capacities`: per such slot (walk order) its (capacity, automatic
    size) SizeExprs (`capacities.capacities`), stored on each ADSTACK_ALLOCA; `measured`: slot ->
    counter index of the stacks the counting pass sizes (capacity None).

    A needed load of a plain local (no store to it in any dynamic loop around the load, so it has
    one value per run of the loops around it) is *held*: at the body's top level the reverse walk
    uses the replay's own load (SSA: the replay dominates the whole reverse walk); nested in an
    `if` or a loop, the replay copies it into a local declared at the top (`held`), and the reverse
    walk reads that copy — the value the load had then, whatever the local held later. The trip
    count of a loop outside every dynamic loop is held the same way, read after the loop.
    Likewise a read of a global at the top level is not repeated in the reverse walk: the replay's
    value is used (the adjoint writes gradient buffers only, so a primal read gives the same
    value anywhere in it), so `t = a[i] * x[i]; y[i] = sin(t)` reads `a` and `x` once, as
    `y[i] = sin(a[i] * x[i])` does."""

    def __init__(self, body: Block, grad_of, on_stack: set, capacities: list, needed=frozenset(),
                 measured=None, checkpoint=None):
        self.body = body
        self.checkpoint = checkpoint or {}  # top-level loop -> (S, counter): loop_checkpoint
        self.ck = {}
        self.grad_of = grad_of
        self.on_stack = on_stack
        self.capacities = capacities
        self.measured = measured or {}
        self.hold = {x for x in needed if x.op == Op.LOAD and x.srcs[0] not in on_stack}
        self.hold |= {n for n in walk(body)
                      if n.op in LOOPS and n.arg.trips is not None and n.arg.trips not in on_stack}
        self.top = set(body.nodes)
        self.held = {}          # held load / loop -> the replay's value (top level) or a local
        written = set()         # the buffers the adjoint writes: gradients of what the body uses
        for n in walk(body):
            if n.op in GLOBAL_ACCESS:
                g = grad_of(n.arg)
                if g is not None:
                    written.add(g.buffer)
        self.top_reads = {n for n in body.nodes
                          if n.op == Op.GLOBAL_LOAD and n.arg.buffer not in written}
        self.renv = {}          # body node -> its replay node (where the replay changed it)
        self.b = IRBuilder()
        self.e = Emit(self.b)
        self.pos = {n: k for k, n in enumerate(walk(body))}
        self.varying = Varying()
        self.stacks = {}
        self.idx_env = {}
        self.adj = {}           # plain float slot -> its adjoint local
        self.silent = set()     # float slots no adjoint reaches (`adjoint_slots`)
    # -- forward replay --------------------------------------------------------------------------
    def build(self, index) -> Block:
        b = self.b
        slots = [n for n in walk(self.body) if n.op == Op.ALLOCA and n in self.on_stack]
        if len(self.capacities) != len(slots):
            raise RuntimeError("adjoint: one capacity per stacked slot expected")
        for n, (cap, req) in zip(slots, self.capacities):
            a = Node(Op.ADSTACK_ALLOCA, n.dtype, (),
                     AdStackArg(n.arg or "v", cap, req, measured=self.measured.get(n, -1)), (), n.loc)
            self.stacks[n] = b.append(a)  # carries the local's source line for diagnostics
        active = adjoint_slots(self.body)
        for n in walk(self.body):
            if n.op == Op.ALLOCA and n.dtype.is_float and n not in active:
                self.silent.add(n)  # its adjoint is zero: no local, its stores pass nothing on
            elif n.op == Op.ALLOCA and n not in self.on_stack and n.dtype.is_float:
                self.adj[n] = b.alloca(n.dtype, (n.arg or "v") + ".adj")
        for n in walk(self.body):
            if n in self.hold and n not in self.top:
                dt, name = (n.dtype, n.srcs[0].arg) if n.op == Op.LOAD else (i32, "trips")
                self.held[n] = b.alloca(dt, (name or "v") + ".held")
        for loop, (every, counter) in self.checkpoint.items():
            self.ck[loop] = Checkpointed(loop, every, counter)
            self.ck[loop].declare(self)
        for n in self.body.nodes:
            if n in self.ck:
                self.ck[n].sweep(self)
                continue
            for m in rebuild(Block((n,)), self._replay, self.renv).nodes:
                b.append(m)
        if index is not None:
            self.idx_env[index] = index
        self.rev_block(self.body.nodes)
        return b.finish()

    def _replay(self, n, srcs, blocks, arg, env, make=keep):
        st = self.stacks
        if n in self.hold:
            return self._replay_held(n, make(n, srcs, blocks, arg, env), arg)
        slot = n if n.op == Op.ALLOCA else (n.srcs[0] if n.op in (Op.LOAD, Op.STORE) else None)
        if slot is not None and slot not in st:
            return make(n, srcs, blocks, arg, env)  # a plain local
        if n.op == Op.ALLOCA:
            z = Node(Op.CONST, n.dtype, (), 0, (), n.loc)
            return Splice([z, Node(Op.ADSTACK_PUSH, None, (st[n], z), None, (), n.loc)])
        if n.op == Op.STORE:
            return Node(Op.ADSTACK_PUSH, None, (st[n.srcs[0]], srcs[1]), None, (), n.loc)
        if n.op == Op.LOAD:
            return Node(Op.ADSTACK_LOAD_TOP, n.dtype, (st[n.srcs[0]],), None, (), n.loc)
        if n.op == Op.GLOBAL_STORE:
            return None
        if n.op in ATOMICS:  # dropped; a use of its old value reads 0 (never differentiated)
            z = Node(Op.CONST, n.dtype, (), 0, (), n.loc)
            return Splice([z], z)
        return make(n, srcs, blocks, arg, env)

    def _segment_visit(self, n, srcs, blocks, arg, env):
        """A checkpointed loop's segment replayed in the reverse pass: the replay, new nodes."""
        return self._replay(n, srcs, blocks, arg, env, make=copy_node)

    def _sweep_visit(self, n, srcs, blocks, arg, env):
        """A checkpointed loop's forward sweep: its stacked locals as plain locals (`env` maps
        the state's to their shadows; those allocated inside are copied as plain locals), a
        stacked local only read there is read from its top; global writes dropped."""
        if n.op == Op.GLOBAL_STORE:
            return None
        if n.op in ATOMICS:
            z = Node(Op.CONST, n.dtype, (), 0, (), n.loc)
            return Splice([z], z)
        if n.op == Op.LOAD and srcs[0] is n.srcs[0] and n.srcs[0] in self.stacks:
            return Node(Op.ADSTACK_LOAD_TOP, n.dtype, (self.stacks[n.srcs[0]],), None, (), n.loc)
        new = copy_node(n, srcs, blocks, arg, env)
        if n in self.hold:
            return self._replay_held(n, new, arg)
        return new

    def _replay_held(self, n, new, arg):
        """Replay a held load or loop, keeping its value for the reverse walk (class docstring)."""
        out, v = [new], new
        if n.op != Op.LOAD:  # a loop: its executed trip count, read right after it
            v = Node(Op.LOAD, i32, (arg.trips,), None, (), n.loc)
            out.append(v)
        if n in self.top:
            self.held[n] = v
        else:
            out.append(Node(Op.STORE, None, (self.held[n], v), None, (), n.loc))
        return Splice(out, new)

    def held_value(self, n):
        h = self.held.get(n)
        if h is None:
            raise RuntimeError(f"adjoint: held value of {n!r} used before the replay kept it")
        return self.b.load(h) if n not in self.top else h

    # -- recomputation ---------------------------------------------------------------------------
    def rc(self, n: Node, memo: dict) -> Node:
        if n in memo:
            return memo[n]
        b = self.b
        if n in self.idx_env:
            r = self.idx_env[n]
        elif n.op == Op.LOAD:
            stack = self.stacks.get(n.srcs[0])
            if stack is not None:
                r = b.emit(Op.ADSTACK_LOAD_TOP, n.dtype, (stack,))
            elif n in self.hold:
                r = self.held_value(n)
            else:
                raise RuntimeError(f"adjoint: primal of plain local {n.srcs[0].arg!r} needed in reverse")
        elif n in self.top_reads:
            r = self.renv.get(n, n)  # the replay's read (class docstring)
        elif n.op == Op.GLOBAL_LOAD:
            r = b.global_load(n.arg, [self.rc(s, memo) for s in n.srcs])
        elif n.op in ATOMICS:
            name = n.op.name.lower().replace("xchg", "exchange")
            raise user_error(SpiradAutodiffError, f"the value returned by {name} cannot be "
                             "differentiated; use the updated field instead", n.loc)
        elif n.op in PURE:
            r = b.emit(n.op, n.dtype, tuple(self.rc(s, memo) for s in n.srcs), n.arg)
        else:
            raise RuntimeError(f"adjoint: cannot recompute {n!r}")
        memo[n] = r
        return r

    # -- adjoint propagation ---------------------------------------------------------------------
    def propagate(self, root: Node, adj: Node, memo: dict):
        if not root.dtype.is_float:
            return
        order, seen = [], set()

        def collect(x):
            if x in seen:
                return
            seen.add(x)
            if x.op in PURE and x.op not in LEAVES and x not in self.idx_env:
                for s in x.srcs:
                    collect(s)
            order.append(x)

        collect(root)
        order.sort(key=lambda x: self.pos.get(x, -1))
        adjs = {root: adj}
        b = self.b
        for x in reversed(order):
            a = adjs.get(x)
            if a is None or x.dtype is None or not x.dtype.is_float:
                continue
            if x.op == Op.LOAD:
                slot = x.srcs[0]
                if slot in self.stacks:
                    b.emit(Op.ADSTACK_ACC_ADJ, None, (self.stacks[slot], a))
                elif slot in self.adj:
                    acc = self.adj[slot]
                    b.store(acc, b.binary(Op.ADD, b.load(acc), a))
            elif x.op == Op.GLOBAL_LOAD:
                g = self.grad_of(x.arg)
                if g is not None:
                    b.atomic_add(g, [self.rc(s, memo) for s in x.srcs], a)
            elif x.op in LEAVES or x in self.idx_env:
                continue
            else:
                rule = VJP_RULES.get(x.op)
                if rule is None:
                    raise user_error(SpiradAutodiffError, f"operation {x.op.name.lower()} is not "
                                     f"differentiable (no derivative rule)", x.loc)
                xs = [self.rc(s, memo) if _needs_src(x.op, k, x.srcs, self.varying) else _Typed(s.dtype)
                      for k, s in enumerate(x.srcs)]
                uses_out = DERIVATIVES[x.op].uses_out(x.srcs, self.varying)
                out = self.rc(x, memo) if uses_out else _Typed(x.dtype)
                for s, g in zip(x.srcs, rule(self.e, a, xs, out)):
                    if g is None or s.dtype is None or not s.dtype.is_float:
                        continue
                    adjs[s] = b.binary(Op.ADD, adjs[s], g) if s in adjs else g

    # -- reverse walk ----------------------------------------------------------------------------
    def rev_block(self, nodes):
        for n in reversed(nodes):
            self.rev_node(n)

    def rev_node(self, n: Node):
        b, st, op = self.b, self.stacks, n.op
        memo: dict = {}
        if op == Op.ALLOCA:
            if n in st:
                b.emit(Op.ADSTACK_POP, None, (st[n],))
            elif n in self.adj:  # the zero it held has no inputs: its adjoint is dropped
                b.store(self.adj[n], b.const(0.0, n.dtype))
        elif op == Op.STORE:
            slot, v = n.srcs
            if slot in st:
                if not slot.dtype.is_float or slot in self.silent:  # no adjoint to pass on
                    b.emit(Op.ADSTACK_POP, None, (st[slot],))
                    return
                a = b.emit(Op.ADSTACK_LOAD_TOP_ADJ, slot.dtype, (st[slot],))
                b.emit(Op.ADSTACK_POP, None, (st[slot],))
            elif slot in self.adj:  # a store consumes the adjoint of the value it overwrites
                a = b.load(self.adj[slot])
                b.store(self.adj[slot], b.const(0.0, slot.dtype))
            else:
                return
            self.propagate(v, a, memo)
        elif op in _ARG_ATOMICS:
            self.rev_arg_atomic(n, memo)
        elif op == Op.GLOBAL_STORE or op in ATOMICS:
            v = n.srcs[-1]
            g = self.grad_of(n.arg) if v.dtype.is_float else None
            if g is None:
                return
            if op not in (Op.GLOBAL_STORE, Op.ATOMIC_ADD):
                raise user_error(SpiradAutodiffError, f"{op.name.lower()} on a float with a "
                                 f"gradient cannot be differentiated", n.loc)
            idx = [self.rc(s, memo) for s in n.srcs[:-1]]
            a = b.global_load(g, idx)
            if op == Op.GLOBAL_STORE:
                # a store overwrites: the old value's gradient path ends here (Taichi's rule), so
                # the adjoint is consumed before v's expression (which may read x[i]) adds to it
                b.global_store(g, idx, b.const(0.0, g.dtype))
            self.propagate(v, a, memo)
        elif op == Op.IF:
            if _is_exit_check(n):
                return
            c = self.rc(n.srcs[0], memo)
            with b.if_(c) as (then, other):
                with then:
                    self.rev_block(n.blocks[0].nodes)
                with other:
                    self.rev_block(n.blocks[1].nodes)
        elif op in (Op.RANGE_FOR, Op.WHILE):
            if n in self.ck:
                self.ck[n].reverse(self, memo)
            else:
                self.rev_loop(n, memo)
        elif op in (Op.BREAK, Op.CONTINUE):
            raise RuntimeError("adjoint: jumps must be lowered before reverse mode")

    def rev_arg_atomic(self, n: Node, memo):
        """x[I] = min / max(x[I], v) or exchange(x[I], v): the final x[I] is one operand's value.
        The thread whose v equals it (read from the primal, which the forward left there) takes
        x.grad[I] with an atomic exchange against 0, so exactly one winner receives it (ties:
        whichever arrives first); when no v won, x.grad[I] stays for the value x[I] held before
        (as after atomic_add)."""
        v = n.srcs[-1]
        g = self.grad_of(n.arg) if v.dtype.is_float else None
        if g is None:
            return
        b = self.b
        idx = [self.rc(s, memo) for s in n.srcs[:-1]]
        won = b.binary(Op.CMP_EQ, self.rc(v, memo), b.global_load(n.arg, idx))
        with b.if_(won) as (then, other):
            with then:
                a = b.atomic(Op.ATOMIC_XCHG, g, idx, b.const(0.0, g.dtype))
                self.propagate(v, a, dict(memo))
            with other:
                pass

    def rev_loop(self, n: Node, memo):
        b = self.b
        arg = n.arg
        if arg.trips is not None:
            if arg.trips in self.stacks:
                trips = b.emit(Op.ADSTACK_LOAD_TOP, i32, (self.stacks[arg.trips],))
            else:
                trips = self.held_value(n)
        if n.op == Op.RANGE_FOR:
            begin, end = self.rc(n.srcs[0], memo), self.rc(n.srcs[1], memo)
            if arg.trips is None:
                trips = b.binary(Op.MAX, b.binary(Op.SUB, end, begin), b.const(0, end.dtype))
        zero = b.const(0, trips.dtype)
        with b.range_for(zero, trips, carried=()) as j:
            if n.op == Op.RANGE_FOR:
                one = b.const(1, trips.dtype)
                last = b.binary(Op.SUB, b.binary(Op.ADD, begin, trips), one)
                self.idx_env[arg.index] = b.binary(Op.SUB, last, j)
            self.rev_block(n.blocks[0].nodes)
