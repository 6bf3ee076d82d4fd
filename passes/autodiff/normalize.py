"""Shape a task body for reverse mode (IR -> IR, forward semantics unchanged).

1. `lower_jumps`: `break` / `continue` become flags. Each loop with a jump gets a `skip` slot
   (zeroed at the start of every iteration) and, for `break`, a `brk` slot declared before the loop;
   the statements after a possible jump are wrapped in `if not skip`. The loop then has only *head
   exit checks* (`if c: break` before anything with an effect), including `if brk: break`. Loops
   that can exit early (WHILE, or a head exit check) count their iterations in a `trips` slot
   (`LoopArg.trips`), which the reverse pass replays. A `continue` at a task's top level
   (ending the parallel iteration) gets a skip flag too. The head keeps only what its exit
   checks read (`_sink_head`): nothing before an exit check may push onto an adstack.
2. `materialize`: every IF condition (except head exit checks and conditions computed from
   constants, arguments and loop indices alone, such as a bounds guard `0 <= j - 1`) and every
   loop bound that is not host-evaluable is stored into a fresh slot first, so the reverse pass
   reads the value it had *then* (from its stack), not a recomputation after later stores.
3. `snapshot_loads`: a LOAD whose value is used after an intervening store to the same slot (or
   in a nested block), directly or through pure ops, is copied into a fresh slot right away;
   uses read the copy.

Soundness under the shapes reverse mode meets (architecture §4; tests/autodiff/test_reverse_soundness):
`break` / `continue` become flags and `if not skip` blocks, so every later pass sees only
structured control flow plus head exit checks; `while` is a loop whose head is its condition's
exit check; nested loops get their own flags and trip counts (stacked when the loop is inside a
dynamic loop); an overwritten store is a later STORE, which `snapshot_loads` orders every load
before; early returns do not exist at this level (a `@sd.func` returns once, at its end).
`check_heads` states the one invariant the trip count replay needs.
"""
from __future__ import annotations

import bisect
from dataclasses import replace

from kernel_ir.dtypes import i32, u1
from kernel_ir.nodes import Block, Node, walk
from kernel_ir.ops import LEAVES, LOOPS, PURE, Op
from kernel_ir.rewrite import keep, rebuild, Splice, remap_arg

_HOST = {Op.CONST, Op.ARG, Op.NDARRAY_SHAPE}


def _n(op, dtype=None, srcs=(), arg=None, blocks=(), loc=None):
    return Node(op, dtype, tuple(srcs), arg, tuple(blocks), loc)


def _const(v, dt, loc=None):
    return _n(Op.CONST, dt, (), v, (), loc)


def _is_exit_check(n: Node) -> bool:
    return (n.op == Op.IF and len(n.blocks[0]) == 1 and n.blocks[0].nodes[0].op == Op.BREAK
            and not n.blocks[1].nodes)


def _split_head(nodes):
    """Leading pure nodes and exit checks of a loop body (kept as real BREAKs)."""
    k = 0
    last_check = -1
    while k < len(nodes):
        n = nodes[k]
        if _is_exit_check(n):
            last_check = k
        elif not (n.op in PURE or n.op in (Op.LOAD, Op.GLOBAL_LOAD)):
            break
        k += 1
    return list(nodes[:last_check + 1]), list(nodes[last_check + 1:])


def _sink_head(head: list, rest: list) -> tuple[list, list, list]:
    """(head, sunk, clones): the head keeps its exit checks and the nodes their conditions read;
    the other head nodes sink below the checks (`sunk`, in order: pure ops and loads, and the
    head holds no store, so they read the same values there); a value of the checks that later
    code also reads through a load of a local gets a copy of its expression below the checks
    (`clones`: old node -> copy, fresh loads of the same slots).

    Why: on the trip that exits at a check, nothing before the check may push onto an adstack
    (the reverse walk replays only the counted trips, so a push there has no pop, and every
    later pop reads one entry off). A load in the head whose value is used past the checks
    would need a copy (`snapshot_loads`) when a later statement stores its slot; with the
    head's values used by the checks alone, no copy is made there. `w = v` at the top of a
    loop with `if j >= 10: break` after it (`forward_stores` turns the read of `w` past the
    break into the head's load of `v`) pushed `v` once too often: issue #35's first program."""
    checks = [n for n in head if _is_exit_check(n)]
    needed = set()
    work = [c.srcs[0] for c in checks]
    inside = set(head)
    while work:
        x = work.pop()
        if x in inside and x not in needed:
            needed.add(x)
            work.extend(x.srcs)
    kept = [n for n in head if n in needed or _is_exit_check(n)]
    sunk = [n for n in head if n not in needed and not _is_exit_check(n)]
    reads_local = {}

    def local(x):
        r = reads_local.get(x)
        if r is None:
            r = reads_local[x] = x in needed and (x.op == Op.LOAD or any(local(y) for y in x.srcs))
        return r

    used_later = {s for n in sunk + rest for m in [n] + _inner(n) for s in m.srcs if local(s)}
    clones = {}

    def clone(x):
        if not local(x):
            return x
        c = clones.get(x)
        if c is None:
            c = clones[x] = Node(x.op, x.dtype, tuple(clone(y) for y in x.srcs), x.arg, (), x.loc)
        return c

    for x in kept:  # in program order: a copy's sources are copied before it
        if x in used_later:
            clone(x)
    return kept, sunk, clones


def _has_jump(block: Block) -> bool:
    """True if `block` holds a BREAK/CONTINUE that targets the *enclosing* loop."""
    for n in block.nodes:
        if n.op in (Op.BREAK, Op.CONTINUE):
            return True
        if n.op == Op.IF and (_has_jump(n.blocks[0]) or _has_jump(n.blocks[1])):
            return True
    return False


class _Jumps:
    def __init__(self):
        self.env = {}

    def block(self, nodes, flags):
        """Rebuild `nodes`; `flags` = (skip, brk) slots of the innermost loop (or None)."""
        out = []
        nodes = list(nodes)
        for k, n in enumerate(nodes):
            jumped = self.node(n, flags, out)
            if jumped and k + 1 < len(nodes):
                rest = self.block(nodes[k + 1:], flags)
                skip = flags[0]
                ld = _n(Op.LOAD, u1, (skip,), loc=n.loc)
                c = _n(Op.NOT, u1, (ld,), loc=n.loc)
                out += [ld, c, _n(Op.IF, None, (c,), None, (Block(tuple(rest)), Block(())), n.loc)]
                break
        return out

    def node(self, n, flags, out) -> bool:
        env = self.env
        srcs = tuple(env.get(s, s) for s in n.srcs)
        if n.op in (Op.BREAK, Op.CONTINUE):
            if flags is None:
                raise RuntimeError("lower_jumps: jump without flags")
            skip, brk = flags
            t = _const(True, u1, n.loc)
            out.append(t)
            if n.op == Op.BREAK:
                out.append(_n(Op.STORE, None, (brk, t), loc=n.loc))
            out.append(_n(Op.STORE, None, (skip, t), loc=n.loc))
            return True
        if n.op == Op.IF:
            then = Block(tuple(self.block(n.blocks[0].nodes, flags)))
            other = Block(tuple(self.block(n.blocks[1].nodes, flags)))
            new = _n(Op.IF, None, srcs, None, (then, other), n.loc)
            env[n] = new
            out.append(new)
            return _has_jump(n.blocks[0]) or _has_jump(n.blocks[1])
        if n.op in (Op.RANGE_FOR, Op.WHILE):
            self.loop(n, srcs, out)
            return False
        new = keep(n, srcs, (), remap_arg(n.arg, env), env)
        if new is not n:
            env[n] = new
        out.append(new)
        return False

    def loop(self, n, srcs, out):
        env = self.env
        body = list(n.blocks[0].nodes)
        head, rest = _split_head(body)
        needs_flags = _has_jump(Block(tuple(rest)))
        has_break = any(x.op == Op.BREAK for x in _direct_jumps(Block(tuple(rest))))
        brk = skip = None
        if has_break:
            brk = _n(Op.ALLOCA, u1, (), "brk", loc=n.loc)
            out.append(brk)
        early_exit = n.op == Op.WHILE or bool(head) or has_break
        trips = None
        if early_exit:
            trips = _n(Op.ALLOCA, i32, (), "trips", loc=n.loc)
            out.append(trips)
        new_body = []
        if has_break:
            ld = _n(Op.LOAD, u1, (brk,), loc=n.loc)
            new_body += [ld, _n(Op.IF, None, (ld,), None, (Block((_n(Op.BREAK, loc=n.loc),)), Block(())), n.loc)]
        head, sunk, clones = _sink_head(head, rest)
        new_body += list(rebuild(Block(tuple(head)), keep, env).nodes)  # real exit checks stay
        if trips is not None:
            ld = _n(Op.LOAD, i32, (trips,), loc=n.loc)
            one = _const(1, i32, n.loc)
            add = _n(Op.ADD, i32, (ld, one), loc=n.loc)
            new_body += [ld, one, add, _n(Op.STORE, None, (trips, add), loc=n.loc)]
        copies = [rebuild(Block((c,)), keep, env).nodes[0] for c in clones.values()]
        new_body += copies
        env.update(zip(clones, copies))
        rest = sunk + rest
        if needs_flags:
            skip = _n(Op.ALLOCA, u1, (), "skip", loc=n.loc)
            new_body.append(skip)
        new_body += self.block(rest, (skip, brk) if needs_flags else None)
        arg = remap_arg(n.arg, env)
        arg = replace(arg, trips=trips)
        new = _n(n.op, None, srcs, arg, (Block(tuple(new_body)),), n.loc)
        env[n] = new
        out.append(new)


def _direct_jumps(block: Block):
    for n in block.nodes:
        if n.op in (Op.BREAK, Op.CONTINUE):
            yield n
        elif n.op == Op.IF:
            yield from _direct_jumps(n.blocks[0])
            yield from _direct_jumps(n.blocks[1])


def lower_jumps(body: Block) -> Block:
    j = _Jumps()
    nodes = list(body.nodes)
    if _has_jump(body):  # CONTINUE at task top level
        skip = _n(Op.ALLOCA, u1, (), "skip")
        return Block((skip,) + tuple(j.block(nodes, (skip, None))))
    return Block(tuple(j.block(nodes, None)))


def _host_pure(n: Node) -> bool:
    if n.op in _HOST:
        return True
    if n.op in PURE and n.op not in LEAVES:
        return all(_host_pure(s) for s in n.srcs)
    return False


def _index_pure(n: Node, memo: dict, readonly=frozenset()) -> bool:
    """Pure ops over constants, arguments, shapes, loop indices and reads of the fields in
    `readonly` (which the kernel never writes): the reverse walk recomputes exactly the forward
    value (loop indices are rebuilt there), so nothing is stored."""
    r = memo.get(n)
    if r is None:
        r = memo[n] = n.op in _HOST or n.op == Op.LOOP_INDEX or (
            (n.op in PURE and n.op not in LEAVES
             or n.op == Op.GLOBAL_LOAD and n.arg.buffer in readonly)
            and all(_index_pure(s, memo, readonly) for s in n.srcs))
    return r


def materialize(body: Block, readonly=frozenset()) -> Block:
    pure = {}

    def visit(n, srcs, blocks, arg, env):
        if n.op == Op.IF and not _is_exit_check(n) and not _index_pure(srcs[0], pure, readonly):
            c = srcs[0]
            t = _n(Op.ALLOCA, u1, (), "cond", loc=n.loc)
            ld = _n(Op.LOAD, u1, (t,), loc=n.loc)
            new = _n(Op.IF, None, (ld,), None, blocks, n.loc)
            return Splice([t, _n(Op.STORE, None, (t, c), loc=n.loc), ld, new], new)
        if n.op == Op.RANGE_FOR:
            pre, new_srcs = [], []
            for which, b in zip(("begin", "end"), srcs):
                if _host_pure(b):
                    new_srcs.append(b)
                    continue
                t = _n(Op.ALLOCA, b.dtype, (), which, loc=n.loc)
                ld = _n(Op.LOAD, b.dtype, (t,), loc=n.loc)
                pre += [t, _n(Op.STORE, None, (t, b), loc=n.loc), ld]
                new_srcs.append(ld)
            if pre:
                new = _n(Op.RANGE_FOR, None, new_srcs, arg, blocks, n.loc)
                return Splice(pre + [new], new)
        return keep(n, srcs, blocks, arg, env)

    return rebuild(body, visit)


def _inner(n: Node) -> list:
    return [x for b in n.blocks for x in walk(b)]


def snapshot_loads(body: Block) -> Block:
    """Copy LOAD values that outlive a store to their slot (or cross into a nested block).

    The reverse walk (adjoint.py) propagates a store's adjoint through the stored value's whole
    expression and, at a LOAD, adds into its slot's adjoint (or reads its stack top) *there*: so
    between a LOAD and every use of it — direct or through pure ops — nothing may store its slot.
    A load whose value is used after a later store to its slot at the same level, or used inside
    a nested block (directly or through pure ops: `forward_stores` leaves `t = 0.613 * v` at the
    top of a loop body and `lower_jumps` then wraps the rest of the body, stores of `v` included,
    in `if not skip`), is copied into a fresh slot right after the load, and its uses read the
    copy. No load of a loop's head is copied: `lower_jumps` leaves the head's values to its exit
    checks alone (`_sink_head`), so no copy (a push) lands before an exit check."""
    unsafe = set()

    def scan(block: Block):
        nodes = block.nodes
        pos_of = {n: k for k, n in enumerate(nodes)}
        stores_at = {}  # slot -> increasing positions of the nodes that store to it
        for k, n in enumerate(nodes):
            for x in [n] + _inner(n):
                if x.op in (Op.STORE, Op.ALLOCA):
                    slot = x.srcs[0] if x.op == Op.STORE else x
                    stores_at.setdefault(slot, []).append(k)
        # last[x]: the last position of a node that reads x, directly or through pure ops;
        # nested: the nodes read inside a nested block, directly or through pure ops (one
        # backward sweep: linear, where walking each node's expression tree was quadratic in a
        # long chain of operations)
        last, nested = {}, set()
        for k in range(len(nodes) - 1, -1, -1):
            n = nodes[k]
            through = n.op in PURE and n.op not in LEAVES
            for x in n.srcs:
                if x in pos_of:
                    last[x] = max(last.get(x, -1), k, last.get(n, -1) if through else -1)
                    if through and n in nested:
                        nested.add(x)
            for y in _inner(n):
                for s in y.srcs:
                    if s in pos_of:
                        nested.add(s)
        for n in nodes:
            if n.op == Op.LOAD and (n in nested or n in last and _unsafe(n, last[n], pos_of, stores_at)):
                unsafe.add(n)
            for b in n.blocks:
                scan(b)

    def _unsafe(s, k, pos_of, stores_at):
        """`s` (a load at position p) is unsafe when its slot is stored at p < q < k."""
        p = pos_of[s]
        qs = stores_at.get(s.srcs[0], ())
        i = bisect.bisect_right(qs, p)
        return i < len(qs) and qs[i] < k

    scan(body)
    if not unsafe:
        return body
    copies = {}

    def visit(n, srcs, blocks, arg, env):
        pre = []
        new_srcs = []
        for old, s in zip(n.srcs, srcs):
            if old in copies:
                ld = _n(Op.LOAD, old.dtype, (copies[old],), loc=n.loc)
                pre.append(ld)
                new_srcs.append(ld)
            else:
                new_srcs.append(s)
        new = keep(n, tuple(new_srcs), blocks, arg, env)
        if n in unsafe:
            t = _n(Op.ALLOCA, n.dtype, (), "snap", loc=n.loc)
            copies[n] = t
            return Splice(pre + [new, t, _n(Op.STORE, None, (t, new), loc=n.loc)], new)
        if pre:
            return Splice(pre + [new], new)
        return new

    return rebuild(body, visit)


def check_heads(body: Block) -> None:
    """The invariant `_sink_head` keeps: in every loop body, nothing before the last exit check
    writes a local (a write there is an adstack push on the trip that exits, with no pop in the
    reverse walk). An internal error, not a user's: raised as RuntimeError."""
    for n in walk(body):
        if n.op not in LOOPS:
            continue
        nodes = n.blocks[0].nodes
        last = max((k for k, m in enumerate(nodes) if _is_exit_check(m)), default=-1)
        for m in nodes[:max(last, 0)]:
            if m.op in (Op.STORE, Op.ALLOCA) or (m.blocks and not _is_exit_check(m)):
                raise RuntimeError(f"normalize: {m.op.name} before a loop's exit check")


def normalize(body: Block, readonly=frozenset()) -> Block:
    """`readonly`: the buffers of the fields the kernel never writes (`kernel_ir.nodes.
    readonly_fields`): conditions over their reads are recomputed, not stored."""
    out = snapshot_loads(materialize(lower_jumps(body), readonly))
    check_heads(out)
    return out
