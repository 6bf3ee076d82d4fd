"""A local's load replaced by the value just stored into it, where nothing can have changed it.

    j_arg = j - 1              # STORE %j_arg, (j - 1): a func argument, copied into its local
    ... p[t, i, j_arg] ...     # LOAD %j_arg  ->  (j - 1)

Why: every argument of an inlined `@sd.func` (and many user locals) is a slot stored once and
read right after. Inside a dynamic loop, reverse mode keeps a slot read by an index or a
condition on an autodiff stack (architecture §4), so DiffTaichi's `wave` (`get_p(t, i, j)` called five
times per cell of a `for j in range(n)` loop) pushed three stacks per call and its adjoint ran at
a third of Taichi's speed; with the loads forwarded the slots are dead and the index expressions
are recomputed in the reverse pass, as in Taichi (whose IR is SSA by then).

A load is replaced only by a value made of pure ops over leaves (constants, arguments, loop
indices) and loads of locals: such a value is recomputed exactly where the reverse pass needs it
(`autodiff/normalize.snapshot_loads` keeps a load's value where its slot is stored later). A
value with a transcendental op (sin, exp, pow, atan2, ...: `COSTLY`) stays in its slot:
recomputing it costs more than the stack entry it saves (kernel b of
`benchmarks/bench_autodiff.py`, `a = a + 0.1 * sin(b) * c` in a loop: forwarded, its adjoint
evaluated four more sin / cos per trip and pushed two snapshots for one stack entry; its reverse
kernel took 1.25x the time on the CPU, 1.8x on lavapipe). Values that read globals stay in
their slots (the global may be overwritten later in the kernel; the slot's stack keeps what was
read), except reads of fields the kernel never writes (`smoke_taichi`'s `advect` reads the
velocity field `v` and writes another: the departure point and the wrapped cell indices computed
from it are recomputed, as Taichi does, instead of ten stacks per trip). A stored value is known
from its STORE to the end of the block, and inside nested blocks if it reads no local (reverse
mode snapshots a load whose slot is stored again only where the load is used in its own block)
and the nested block does not store the slot (loops: anywhere in their body); a nested statement
that stores the slot anywhere ends what is known after it. Runs on the kernel after inlining,
before `simplify` and `dce` (which removes the dead slots).

Why reverse mode stays right (architecture §4; tests/autodiff/test_reverse_soundness.py, the random
programs with `break` / `continue`). Forward semantics hold by construction: a value is used only
where its slot still holds it. A forwarded value *with loads of locals* is the one hazard: it is
used where the slots it read may have been stored since (`w = v; v = v + 1; z = sin(w)` reads
`v` from before the store), and the reverse walk propagates an adjoint through a value's whole
expression at the use. `autodiff/normalize` restores the invariant the walk needs for every such
use: `snapshot_loads` copies a load used after a later store to its slot, or used in a nested
block, directly or through pure ops (`lower_jumps` wraps the statements after a `continue` /
`break` in `if not skip`, so a value forwarded past a jump becomes a nested use: issue #35's
second program); `lower_jumps._sink_head` keeps a loop head's values to its exit checks, so no
copy is pushed before an exit check (`w = v` forwarded past `if j >= 10: break`: issue #35's first
program, which pushed once more than the reverse walk pops). Values without loads (pure ops over
constants, arguments, loop indices, reads of never-written fields) are the same wherever they are
recomputed. `while`: its condition is a head exit check (above). Nested loops: a loop that stores
a slot anywhere ends what is known of it, inside and after. Early returns: a `@sd.func` returns
once, at its end (the frontend refuses the rest), so inlining leaves straight-line code.
Overwritten stores: the later STORE ends the earlier value (`known` is replaced).
"""
from __future__ import annotations

from kernel_ir.nodes import Block, KernelIR, Node, readonly_fields, walk
from kernel_ir.ops import FLOAT_UNARY, LEAVES, LOOPS, PURE, Op
from kernel_ir.rewrite import keep, remap_arg


def forward_stores(k: KernelIR) -> KernelIR:
    stored = {}  # control node -> slots stored anywhere inside it
    if not _stores_inside(k.body, stored):
        return k  # no local is stored: no load to forward
    env, pure = {}, _Memo(readonly_fields(k.body))
    body = _block(k.body, {}, env, stored, pure, 0)
    return k if body is k.body else KernelIR(k.name, k.args, body, k.loc)


def _stores_inside(block: Block, stored: dict) -> set:
    """The slots stored anywhere in `block`; records in `stored` each control node's set (one
    walk, bottom up: a walk per control node was quadratic in the nesting depth)."""
    slots = set()
    for n in block.nodes:
        if n.op == Op.STORE:
            slots.add(n.srcs[0])
        if n.blocks:
            inner = set()
            for b in n.blocks:
                inner |= _stores_inside(b, stored)
            stored[n] = inner
            slots |= inner
    return slots


def _block(block: Block, known: dict, env: dict, stored: dict, pure: dict, depth: int) -> Block:
    """`depth`: the loops around `block` (the kernel's parallel loop counts: 2 and more is
    inside a serial loop)."""
    out = []
    for n in block.nodes:
        srcs = tuple(env.get(s, s) for s in n.srcs)
        if n.op == Op.LOAD:
            v = known.get(srcs[0])
            if v is not None and v.dtype == n.dtype:
                env[n] = v
                continue
        inner = stored.get(n)
        ends = ()
        if inner is not None:  # nested blocks: values without loads, their slots unchanged
            inherit = {s: v for s, v in known.items()
                       if pure[v] is not LOADS and (n.op not in LOOPS or s not in inner)}
            ends = tuple(dict(inherit) for _ in n.blocks)  # each block's knowns at its end
            inner_depth = depth + (n.op in LOOPS)
            blocks = tuple(_block(b, e, env, stored, pure, inner_depth)
                           for b, e in zip(n.blocks, ends))
            for s in inner:
                known.pop(s, None)
        else:
            blocks = n.blocks
        new = keep(n, srcs, blocks, remap_arg(n.arg, env), env)
        if new is not n:
            env[n] = new
        out.append(new)
        if n.op == Op.GLOBAL_LOAD and depth >= 2 and n.arg.buffer in pure.readonly:
            pure.loop_reads.add(new)  # recomputable (`_Memo`)
        if n.op == Op.IF and inner:
            _selects(new, inner, ends, known, out, pure)
        if n.op == Op.STORE:
            if _recomputable(srcs[1], pure):
                known[srcs[0]] = srcs[1]
            else:
                known.pop(srcs[0], None)
    if len(out) == len(block.nodes) and all(a is b for a, b in zip(out, block.nodes)):
        return block
    return Block(tuple(out))


def _selects(n: Node, inner: set, ends: tuple, known: dict, out: list, pure: dict) -> None:
    """After `IF c` that stores int / bool slots with known values in both branches: each such
    slot's value is `SELECT c, then-value, else-value`, appended to `out` and known from here.

    Why: DiffTaichi's `smoke_taichi` wraps its neighbour indices in funcs (`new_index = index -
    1; if new_index < 0: new_index = n_grid - 1`) inside a serial loop; the slot read after the
    branch went on an adstack (four pushes and pops per trip in three adjoint kernels, heap
    memory on the GPU), where the select is recomputed from the loop index in the reverse pass.
    Only int / bool slots (no derivative flows through them: float adjoints keep their branch
    structure), only branches without loops, break or continue, and a branch's value is used
    after the IF only if it was known before it or is a constant or a non-trapping pure op of
    such values (copied out of the branch: the copy runs whichever side is taken, so no integer
    division, whose zero divisor the branch may guard against). Reverse mode: the select carries
    no adjoint (an integer); where the reverse walk recomputes it (an index), its condition is
    the IF's, whose loads `snapshot_loads` copies when the branch stores their slots (a use after
    a later store); branches with jumps or loops are left alone."""
    if any(m.op in LOOPS or m.op in (Op.BREAK, Op.CONTINUE) for b in n.blocks for m in walk(b)):
        return
    inside = [m for b in n.blocks for m in walk(b)]
    slots = dict.fromkeys(m.srcs[0] for m in inside if m.op == Op.STORE)  # in program order
    inside = set(inside)
    for s in slots:
        if s.dtype is None or s.dtype.is_float:
            continue
        vals = [e.get(s) for e in ends]
        if None in vals or any(pure[v] is LOADS for v in vals):
            continue
        copies = {}
        vals = [_outside(v, inside, copies, out) for v in vals]
        if None in vals:
            continue
        sel = Node(Op.SELECT, s.dtype, (n.srcs[0], *vals), loc=n.loc)
        out.append(sel)
        if _recomputable(sel, pure):
            known[s] = sel


def _outside(v: Node, inside: set, copies: dict, out: list):
    """`v` as a value available after the branch that holds `inside`: itself if defined before
    it, else a copy of its expression appended to `out` (None: a node that cannot be copied)."""
    if v not in inside:
        return v
    if v in copies:
        return copies[v]
    if v.op == Op.CONST:
        c = Node(Op.CONST, v.dtype, (), v.arg, (), v.loc)
    elif v.op in _SAFE and not v.blocks:
        srcs = [_outside(x, inside, copies, out) for x in v.srcs]
        if None in srcs:
            return None
        c = Node(v.op, v.dtype, tuple(srcs), v.arg, (), v.loc)
    else:
        return None
    out.append(c)
    copies[v] = c
    return c


# kept in their slots, never recomputed: the math functions but the one-instruction ones
COSTLY = (FLOAT_UNARY - {Op.FLOOR, Op.SQRT, Op.RSQRT}) | {Op.POW, Op.ATAN2}
# ops a copy out of a branch may evaluate unconditionally (no trap, no undefined behaviour)
_SAFE = (PURE - LEAVES - {Op.DIV, Op.FLOORDIV, Op.MOD, Op.POW}) - COSTLY


class _Memo(dict):
    """_recomputable's memo (node -> True, False or LOADS), with the buffers of the fields the
    kernel reads and never writes (`kernel_ir.nodes.readonly_fields`) and `loop_reads`, their
    reads inside serial loops: such a read gives the same value wherever it is repeated, so it
    counts as a pure op over its indices. Only inside serial loops, where the alternative is an
    adstack: at a parallel loop's top level a slot costs nothing in the reverse walk (it reads
    the replay's value), while a forwarded expression is recomputed there for every statement
    that needs it (DiffTaichi's `diffmpm_simple`: P2G's particle state, read from fields P2G
    never writes, forwarded into its 3x3 scatter doubled the adjoint's code and its time)."""

    def __init__(self, readonly: frozenset):
        super().__init__()
        self.readonly = readonly
        self.loop_reads = set()


LOADS = "loads"  # _recomputable's memo: True, False, or LOADS (recomputable, reads locals)


def _recomputable(v: Node, memo: _Memo) -> bool:
    """Pure ops over leaves, loads of locals and reads of fields the kernel never writes (no
    other global reads, no atomics); `memo` keeps True, False or LOADS (with loads of locals).
    Iterative: a generated expression can be thousands of levels deep."""
    stack = [v]
    while stack:
        n = stack[-1]
        if n in memo:
            stack.pop()
            continue
        if n.op == Op.GLOBAL_LOAD and n in memo.loop_reads:
            pass  # a field the kernel never writes: the same value wherever it is read again
        elif n.op == Op.LOAD or n.op not in PURE or n.op in COSTLY:  # a local's load: as it is
            memo[n] = LOADS if n.op == Op.LOAD else False
            stack.pop()
            continue
        todo = [s for s in n.srcs if s not in memo]
        if todo:
            stack.extend(todo)
            continue
        got = [memo[s] for s in n.srcs]
        memo[n] = False if False in got else LOADS if LOADS in got else True
        stack.pop()
    return memo[v] is not False
