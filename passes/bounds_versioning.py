"""Loop versioning for the default bounds checks: check a loop's index ranges once, before it.

The default checks (architecture §8: an out-of-range access never crashes) test every global
access that `kernel_ir.index_range` cannot prove in range at compile time; an ndarray's extents
are known only at run time, so `for i_b in range(_B): x[i_d, i_b]` with `_B` another array's
shape stays checked in every iteration. This pass turns such a loop `L` into

    guard = every index range of the accesses below provably inside its axis
    if guard: L'   (a fresh copy of L whose proven accesses are listed in `Task.proven`)
    else:     L    (the loop as it was, every access checked)

and the code generators drop the checks of `Task.proven` (`index_range.in_range_accesses`).
The IF's arg is `kernel_ir.nodes.VERSIONED`: the CPU code generator compiles `L` as a cold
function of its own, optimised for size (llvm_codegen/cold_copy), since it runs only where a
guard failed.
Inside `L'` the nested loops are versioned again for the accesses still checked (their own
bounds, and values computed in `L`, are then loop-invariant). A loop without such an access is
left as it is: the generated code changes only where checks are proven away.

On the CPU (`task_bodies`; not on GPUs, see `version_loops`), a range task's body (a parallel
loop's, e.g. an environment loop that passes/independent_loops made parallel) is per-iteration
code indexed by the task index, so it is versioned the same way as a whole, before its loops: `guard; if guard: B' else: B` at the top of the body `B`, the
guard run once per iteration, with the task index an invariant term (`_task_body`). Only where
the guard proves accesses at `MIN_TASK_PROVEN` distinct (array, index) pairs (a guard per
iteration that replaces one check saves nothing), and only a body that holds a loop: a flat
body runs in SIMD lanes on the CPU, where the guard's branch puts the whole body under a
varying mask (`c[i] = a[i] * 2 + b[i]` over 65,536 ndarray elements: 11.2 against 6.0 us a
launch, fastest of 200, load 5), while a body with a loop has the work to amortise it.

On the CPU (`tails`), in serial tasks, a block's *tail* is versioned too: `B[:p] + [guard;
if guard: B[p:]' else: B[p:]]`, the guard placed after the definition of the indices it
tests, where `passes/bounds_tails` finds a split covering several accesses (Genesis' narrow
phase: `i_g = geoms_info.link_idx[i_l]`, then `x[i_g, i_b]`, vector components `y[i_c, i_b][k]`
...; no guard before a loop can know such an index). Its soundness argument is `_tail`'s.

What an index may be, per axis (everything else keeps its check): an i32 expression of one
*invariant* term plus constants (`ADD` / `SUB` of constants, no-op casts), where a term is a
node computed before `L` (an argument, a shape, an enclosing loop's index, a value loaded before
the loop), a `LOAD` of a local that nothing inside `L` stores (loaded again before the loop: the
same value), or the index of `L` or of a loop nested in it whose bounds are such expressions.
The guard states, for every such axis, lowest value >= 0 and highest value < the extent (a
field's static shape, an ndarray's `NDARRAY_SHAPE`, 1 for a temporary), all in i32 without
overflow (constants are kept within +-2**30, a run-time extent is tested >= 0 before it is
subtracted from; `t + c <= E` with c < 0 is tested as the stronger `t <= E`).

Why it is sound: the guard is evaluated once, right before `L`, from values that cannot change
while `L` runs (nodes are SSA values defined before `L`; a hoisted local has no store in `L`),
and a `RANGE_FOR` index is an SSA leaf that runs through [begin, end) of its loop's bounds
evaluated at loop entry: nothing can assign it. `break`, `continue`, `while` loops and early
returns (lowered to flags and breaks) only run fewer iterations, each with an index inside
the range the guard checked; for a range task's body, the task index is an SSA leaf that the
task sets before the body runs and nothing in it can assign, so the guard at the body's top
holds for the whole iteration, and a `continue`, `break` or early return in `B'` ends that
iteration exactly as in `B` (the guard's branch only wraps it; the iteration's control is
that of `B`, the copy a node-for-node rebuild of it); an index that a loop reassigns
(`i = i + 1` in Python) is a local with a store in `L`, so it is not hoisted and its accesses
keep their checks. The i32 index
arithmetic wraps (no `nsw`), and wrapping add / subtract agrees with exact arithmetic modulo
2**32, so an exact value the guard puts in [0, extent) with extent < 2**31 is also the value
computed. When the guard fails (or a loop is empty), the original loop runs with every check;
a failed guard of a range task's body runs that iteration's original body, the other
iterations are unaffected. Overwritten stores are untouched: the copy stores what the
original stores, in its order; only the checks of proven accesses are dropped. Gradient
kernels are versioned as any program: what the pass sees is the task list a backend compiles,
adjoint loops included, and the argument needs nothing of the forward program.

Code size: the copies of loops may add at most `GROWTH` times a task's nodes and at most
`GROWTH_CAP` nodes in all (tails: `TAIL_GROWTH`, `TAIL_CAP`, a budget of their own; LLVM's
time grows faster than a function's size: a huge task, Genesis' collision detection, doubled
spent most of a cold scene build in LLVM; docs/performance.md); loops are
versioned outermost first (an outer loop's copy proves the
accesses its guard covers, and the loops nested in it are versioned inside the copy while the
budget lasts), a loop past the budget is skipped and the loops nested in it tried instead.

Loops holding adstack operations are left alone (copying a stack would change the program's
adstack layout and sizing). Runs last on what a backend compiles (`driver._program`, only when
the default checks are on), so no later pass can move a proven access out of its guarded copy;
a backend that rebuilds a task makes new nodes, which are checked again.
"""
from __future__ import annotations

from dataclasses import replace

from kernel_ir import dtypes as T
from kernel_ir.index_range import in_range_accesses
from kernel_ir.nodes import VERSIONED, Block, LoopArg, Node, TaskList, walk
from kernel_ir.ops import GLOBAL_ACCESS, LOOPS, Op
from kernel_ir.rewrite import rebuild

_C = 1 << 30  # constants kept in [-_C, _C]: no i32 overflow in the guard's arithmetic
_I32_MAX = (1 << 31) - 1
_ADSTACK = frozenset(op for op in Op if op.name.startswith("ADSTACK_"))


GROWTH = 1.0  # the copies may add at most this times a task's nodes (compile time)
GROWTH_CAP = 20_000  # ... and at most this many nodes, however large the task
TAIL_GROWTH, TAIL_CAP = 1.0, 10_000  # tails' copies (`_tail`): a budget of their own
TAILS = False
"""Regions (`_tail`) versioned where `version_loops(tails=True)` asks: off for now. Measured
(docs/performance.md, "The default checks counted"): a quarter to half of the executed checks
gone, Genesis' box ndarray step kernels level with main within the noise of a loaded machine,
and 38 % more IR nodes to compile (box ndarray's programs). Tests turn it on."""


def version_loops(tl: TaskList, task_bodies: bool = False, tails: bool = False) -> TaskList:
    """`tl` with the loops whose accesses a guard before them proves in range versioned, and
    with `task_bodies` (the CPU backend's programs) its range task bodies too; with `tails`
    (the CPU's too) and `TAILS` regions of blocks in serial tasks (`_tail`).

    Task bodies only on the CPU: there a parallel environment loop is a range task whose body
    holds the per-environment loops (`passes/independent_loops`). Elsewhere a range task is a
    GPU grid, and LLVM's GPU pipeline merges the two copies' identical atomics into one,
    dropping what it cannot merge of their metadata: AMDGPU's `!amdgpu.no.fine.grained.memory`
    went, and gfx90a's float atomic add became a compare-and-swap loop
    (tests/gpu_llvm/test_target.py)."""
    tasks = []
    for t in tl.tasks:
        size = sum(1 for _ in walk(t.body))
        # proven without a guard (index_range): their copies are, too
        cx = _Ctx(set(t.proven), in_range_accesses(t), min(int(GROWTH * size), GROWTH_CAP),
                  min(int(TAIL_GROWTH * size), TAIL_CAP) if tails and TAILS and t.kind == "serial"
                  else 0)
        body = (_task_body(t, cx) if task_bodies and t.kind == "range" and t.index is not None
                else None)
        if body is None:
            body = _block(t.body, cx)
        tasks.append(t if body is t.body else replace(t, body=body, proven=frozenset(cx.proven)))
    return replace(tl, tasks=tuple(tasks))


class _Ctx:
    """One task's pass state: accesses proven by guards (`Task.proven`), accesses index_range
    proves (and their copies), and how many nodes the copies of loops (`budget`) and of tails
    (`tails`, 0: no tails versioned) may still add."""

    def __init__(self, proven: set, static: frozenset, budget: int, tails: int = 0):
        self.proven, self.static, self.budget = proven, static, budget
        self.tails = tails


def _block(block: Block, cx: _Ctx) -> Block:
    """`block` with its loops versioned (outermost first) and nested blocks visited."""
    out, changed = [], False
    for n in block.nodes:
        if n.op == Op.RANGE_FOR:
            v = _version(n, cx)
            if v is not None:
                out.extend(v)
                changed = True
                continue
        if n.blocks:
            blocks = tuple(_block(b, cx) for b in n.blocks)
            if any(a is not b for a, b in zip(blocks, n.blocks)):
                n = Node(n.op, n.dtype, n.srcs, n.arg, blocks, n.loc)
                changed = True
        out.append(n)
    if cx.tails:
        t = _tail(tuple(out), cx)
        if t is not None:
            return t
    return Block(tuple(out)) if changed else block


def _is_i32(n: Node) -> bool:
    return n.dtype is not None and n.dtype.kind == "i" and n.dtype.bits == 32


class _Loop:
    """What one candidate region knows — a loop `L`'s body with `L`'s index, or a range task's
    body (its index then a term: fixed for the iteration): its nodes, nested loops, stored
    slots, and the interval of an index expression (`of`)."""

    def __init__(self, region: Block, L: Node | None = None):
        self.inside = set()
        self.loops = {} if L is None else {L.arg.index: L}
        self.stored = set()
        self.stacks = False
        for m in walk(region):
            self.inside.add(m)
            if m.op == Op.RANGE_FOR and m.arg is not None and m.arg.index is not None:
                self.loops[m.arg.index] = m
            elif m.op == Op.STORE:
                self.stored.add(m.srcs[0])
            elif m.op in _ADSTACK:
                self.stacks = True
        self.hoisted = {}  # slot -> its LOAD before L
        self.memo = {}

    def term(self, n: Node):
        """`n` as an invariant term of the guard, or None."""
        if n.op == Op.LOAD and n in self.inside:
            slot = n.srcs[0]
            if slot in self.inside or slot in self.stored:
                return None
            if slot not in self.hoisted:
                self.hoisted[slot] = Node(Op.LOAD, n.dtype, (slot,), None, (), n.loc)
            return self.hoisted[slot]
        if n in self.inside or n.op == Op.LOOP_INDEX and n in self.loops:
            return None
        return n

    def of(self, n: Node):
        """((lo term, lo const), (hi term, hi const)): n in [lo, hi) whenever it is computed
        inside L (term None: a constant), or None."""
        if n in self.memo:
            return self.memo[n]
        r = self._of(n) if _is_i32(n) else None
        if r is not None and not all(-_C <= c <= _C for _, c in r):
            r = None
        self.memo[n] = r
        return r

    def _of(self, n: Node):
        op = n.op
        if op == Op.CONST:
            return None if isinstance(n.arg, bool) else ((None, int(n.arg)), (None, int(n.arg) + 1))
        if op == Op.LOOP_INDEX and n in self.loops:
            M = self.loops[n]
            b, e = self.of(M.srcs[0]), self.of(M.srcs[1])
            if b is None or e is None:
                return None
            return b[0], (e[1][0], e[1][1] - 1)
        t = self.term(n)
        if t is not None:
            return (t, 0), (t, 1)
        if op == Op.CAST and _is_i32(n.srcs[0]):
            return self.of(n.srcs[0])
        if op not in (Op.ADD, Op.SUB):
            return None
        a, b = self.of(n.srcs[0]), self.of(n.srcs[1])
        if a is None or b is None:
            return None
        if op == Op.ADD and a[0][0] is None and a[1][0] is None:
            a, b = b, a
        if b[0][0] is not None or b[1][0] is not None:  # right operand: a constant range
            return None
        (lt, lc), (ht, hc) = a
        blo, bhi = b[0][1], b[1][1] - 1  # b's values: [blo, bhi]
        if op == Op.ADD:
            return (lt, lc + blo), (ht, hc + bhi)
        return (lt, lc - bhi), (ht, hc - blo)


class _Guard:
    """The guard's conditions (deduplicated) and the nodes that compute them."""

    def __init__(self, loc):
        self.nodes, self.conds, self.seen, self.loc = [], [], {}, loc

    def node(self, op, dtype, srcs=(), arg=None) -> Node:
        key = (op, srcs, arg if op != Op.CONST else (arg, dtype))
        if key not in self.seen:
            n = Node(op, dtype, srcs, arg, (), self.loc)
            self.nodes.append(n)
            self.seen[key] = n
        return self.seen[key]

    def const(self, v: int) -> Node:
        return self.node(Op.CONST, T.i32, (), v)

    def cond(self, op, a, b) -> None:
        c = self.node(op, T.u1, (a, b))
        if c not in self.conds:
            self.conds.append(c)

    def axis(self, r, ref, axis) -> bool:
        """Add the conditions for values in [lo, hi) on `axis` of `ref`; False: unprovable."""
        (lt, lc), (ht, hc) = r
        if lt is not None and lt is ht and lc == 0 and hc == 1:
            return self._exact(lt, ref, axis)
        if lt is None:
            if lc < 0:
                return False
        else:
            self.cond(Op.CMP_GE, lt, self.const(-lc))
        if ref.shape is not None or ref.kind == "temp":
            extent = int(ref.shape[axis]) if ref.shape is not None else 1
            if ht is None:
                return hc <= extent
            bound = extent - hc
            if bound < -(1 << 31):
                return False
            if bound < _I32_MAX:
                self.cond(Op.CMP_LE, ht, self.const(bound))
            return True
        if ref.kind != "ndarray":
            return False
        E = self.node(Op.NDARRAY_SHAPE, T.i32, (), (ref.key, axis))
        self.cond(Op.CMP_GE, E, self.const(0))
        if ht is None:
            self.cond(Op.CMP_GE, E, self.const(hc))
        elif hc > 0:
            self.cond(Op.CMP_LE, ht, self.node(Op.SUB, T.i32, (E, self.const(hc))))
        else:  # t + hc <= E follows from t <= E (hc < 0: the stronger test, no overflow)
            self.cond(Op.CMP_LE, ht, E)
        return True

    def _exact(self, t, ref, axis) -> bool:
        """An index that is exactly the term `t` (Genesis' `x[i_g, i_b]`): 0 <= t < extent as
        one unsigned compare, as the per-access check does (a negative `t` is 2**31 or more as
        a u32, past any extent < 2**31), where `t >= 0` and `t <= extent - 1` took three
        compares and a subtraction that LLVM cannot fold (the subtraction may wrap)."""
        u = self.node(Op.CAST, T.u32, (t,))
        if ref.shape is not None or ref.kind == "temp":
            extent = int(ref.shape[axis]) if ref.shape is not None else 1
            if extent > _I32_MAX:
                return False
            self.cond(Op.CMP_LT, u, self.node(Op.CONST, T.u32, (), extent))
            return True
        if ref.kind != "ndarray":
            return False
        E = self.node(Op.NDARRAY_SHAPE, T.i32, (), (ref.key, axis))
        self.cond(Op.CMP_GE, E, self.const(0))
        self.cond(Op.CMP_LT, u, self.node(Op.CAST, T.u32, (E,)))
        return True

    def value(self) -> Node:
        c = self.conds[0]
        for d in self.conds[1:]:
            c = self.node(Op.AND, T.u1, (c, d))
        return c


def _version(L: Node, cx: _Ctx):
    """[guard nodes..., IF(guard, L', L)] for loop `L`, or None when no access of it is
    newly proven (its nested loops are then visited by the caller)."""
    if L.arg is None or L.arg.index is None:
        return None
    v = _versioned(Block((L,)), _Loop(L.blocks[0], L), cx, 1, L.loc, _loop_body)
    return None if v is None else list(v.nodes)


MIN_TASK_PROVEN = 2
"""A range task's body is versioned only where its guard proves accesses at this many distinct
(array, index) pairs or more: it runs once per iteration, so one proven would trade its check
for the guard's."""


def _index(n: Node) -> tuple:
    """The index nodes of global access `n`."""
    return n.srcs if n.op == Op.GLOBAL_LOAD else n.srcs[:-1]


def _task_body(t, cx: _Ctx):
    """A range task's body versioned against its index — [guard nodes..., IF(guard, body',
    body)], the guard run once per iteration — or None (then its loops are versioned as in any
    block). The task index is an SSA leaf fixed for the iteration, defined before the body: an
    invariant term of the guard, as an enclosing loop's index is for a loop. Only a body
    holding a loop (see the module docstring)."""
    if not any(n.op in LOOPS for n in walk(t.body)):
        return None
    return _versioned(t.body, _Loop(t.body), cx, MIN_TASK_PROVEN, t.loc, _block)


def _versioned(region: Block, info: _Loop, cx: _Ctx, least: int, loc, nested, only=None,
               pool: str = "budget"):
    """`region` as [guard nodes..., IF(guard, copy, region)] (the copy's accesses the guard
    covers proven, `nested(copy, cx)` versioning its nested loops for the rest), or None when
    fewer than `least` accesses are newly proven or the copy is past the budget. `only`: the
    accesses that may add conditions to the guard (the others are proven only where the
    guard's conditions already cover them); `pool`: the `_Ctx` budget that pays for the copy."""
    size = sum(1 for _ in walk(region))
    if info.stacks or size > getattr(cx, pool):
        return None  # (past the budget: the loops nested in it may fit)
    proven, static = cx.proven, cx.static
    guard = _Guard(loc)
    newly = []
    for n in walk(region):
        if n.op not in GLOBAL_ACCESS or n in proven or n in static:
            continue
        idx = _index(n)
        if not idx:
            continue
        ranges = [info.of(s) for s in idx]
        if any(r is None for r in ranges):
            continue
        mark = (len(guard.nodes), len(guard.conds))
        if all(guard.axis(r, n.arg, a) for a, r in enumerate(ranges)) and \
                (only is None or n in only or len(guard.conds) == mark[1]):
            newly.append(n)
        else:  # drop what this access added (`seen` pops in reverse insertion order)
            for _ in guard.nodes[mark[0]:]:
                guard.seen.popitem()
            del guard.nodes[mark[0]:]
            del guard.conds[mark[1]:]
    if len({(n.arg, _index(n)) for n in newly}) < least:  # (a load and a store of a[i]: one)
        return None
    env = {}
    for idx in info.loops:
        env[idx] = Node(Op.LOOP_INDEX, idx.dtype, (), object(), (), idx.loc)
    fast = rebuild(region, _copy, env)
    newset = set(newly)
    copied_static = set()
    for n in walk(region):  # the copies of proven accesses (here or by an enclosing guard)
        if n in proven or n in newset:
            proven.add(env[n])
        elif n in static:
            copied_static.add(env[n])
    cx.static = static | copied_static
    setattr(cx, pool, getattr(cx, pool) - size)
    fast = nested(fast, cx)  # nested loops, for the accesses still checked
    if not guard.conds:  # every condition held at compile time: the copy alone
        return fast
    cond = guard.value()
    used = {s for g in guard.nodes for s in g.srcs}
    nodes = [h for h in info.hoisted.values() if h in used] + guard.nodes
    nodes.append(Node(Op.IF, None, (cond,), VERSIONED, (fast, region), loc))
    return Block(tuple(nodes))


def _tail(nodes: tuple, cx: _Ctx):
    """The block `nodes` (its loops and nested blocks already versioned) with its regions from
    `bounds_tails.split_point` on versioned — `nodes[:p] + [guard nodes..., IF(guard,
    region', region)] + nodes[q:]`, the copy split again further on, `nodes[q:]` searched for
    the next region — or None.

    Why it is sound: the guard runs each time control reaches position `p` (in a loop body:
    every iteration), from terms whose values cannot change while the region runs: a node
    defined before `p` (an SSA value), a local that no node of the region stores (nested
    blocks included; while the region runs only its nodes run, so the hoisted LOAD before the
    guard reads what every LOAD in the region reads), or the index of a loop in the region
    with such bounds (as for a loop's guard). No node after the region names a node of it
    (`bounds_tails._closed`: values, slots, loop indices), so both copies can sit in the
    IF's branches. `break`, `continue` and early returns (flags and breaks) in the copy leave
    the same loop or iteration as in the original: the IF around the two copies is not a
    loop, and the copy is a node-for-node rebuild, so `while` loops, nested loops and
    overwritten stores run as they did, in their order. When the guard fails the original
    region runs with every check. Regions holding adstack operations are left alone
    (`_versioned`). Serial tasks on the CPU only (`version_loops`): a range task's body may
    run in SIMD lanes, where the guard's branch would mask the whole region."""
    from .bounds_tails import split_point
    out, changed = [], False
    while True:
        pq = split_point(nodes, cx.proven, cx.static)
        if pq is None:
            break
        p, q = pq
        region = Block(nodes[p:q])
        only = {n for n in region.nodes if n.op in GLOBAL_ACCESS}
        v = _versioned(region, _Loop(region), cx, 2, region.nodes[0].loc, _tail_copy, only,
                       "tails")
        if v is None:
            break
        out.extend(nodes[:p] + v.nodes)
        nodes, changed = nodes[q:], True
    return Block(tuple(out) + nodes) if changed else None


def _tail_copy(fast: Block, cx: _Ctx) -> Block:
    """A region's copy, its later accesses covered by a split further on."""
    t = _tail(fast.nodes, cx)
    return fast if t is None else t


def _loop_body(fast: Block, cx: _Ctx) -> Block:
    """A loop's copy (one node) with the loops nested in its body versioned."""
    (L,) = fast.nodes
    return Block((Node(L.op, L.dtype, L.srcs, L.arg, (_block(L.blocks[0], cx),), L.loc),))


def _copy(n, srcs, blocks, arg, env):
    """A rebuild visit that always makes a new node (the fast copy shares no node with L)."""
    if isinstance(arg, LoopArg) and arg.index is not None:
        arg = replace(arg, index=env.get(arg.index, arg.index))
    return Node(n.op, n.dtype, srcs, arg, blocks, n.loc)
