"""Which region of a block to version for the default bounds checks (`bounds_versioning._tail`).

Loop versioning checks, once before a loop, indices fixed while the loop runs. Genesis' narrow
phase indexes with values it has just read from memory (`i_g = geoms_info.link_idx[i_l]`, then
`x[i_g, i_b]`, `y[i_c, i_b][0..6]` ...): no guard before a loop can know them, but a guard placed
*after* their definition can. A region `B[p:q]` of a block is versioned like a loop (`guard; if
guard: B[p:q]' else: B[p:q]`, the copy's covered accesses unchecked); this module chooses it.

Instrumented counts (docs/performance.md): box, ndarrays, `n_envs` 256, `kernel_detection`
ran ~52,600 default checks a call, most at straight-line accesses of one block whose indices
were read a few nodes earlier; a vector element access (`x[i_c, i_b] = v`, 7 components) is 7
checks of the same row.

`split_point(nodes, *skip)` -> `(p, q)`, or None. For each access directly in `nodes` (not
nested in an IF or a loop: a guard for those would fail where a test before them guards a
sentinel index, `if i_g >= 0: x[i_g]`; their own blocks are versioned in their turn), the
earliest split `s` at which every index is an invariant expression of the region
(`_earliest`, the rules of `bounds_versioning._Loop.of`: a node defined before `p`, a local
that nothing in the block from `s` on stores, plus / minus constants). An access at position
`j` is covered by any `p` in [s, j]. `p` is the first access position at which at least
`MIN_COVERED` accesses are covered: the guard then sits right before the first covered
access, after any test between the definition and it (`if i_g < 0: continue`), so a sentinel
that the code skips does not fail the guard. `q` is one past the last covered access, moved
on until nothing after the region names a node of it (`_closed`). Accesses whose indices are
defined later are covered by a split inside the copy or after the region (the caller goes
on). The choice affects only speed: what is proven, and hence unchecked, is decided by
`bounds_versioning._versioned` for the chosen region, whatever this module estimates.
"""
from __future__ import annotations

import bisect

from kernel_ir.nodes import Block, LoopArg, walk
from kernel_ir.ops import GLOBAL_ACCESS, Op

MIN_COVERED = 3
"""A tail is versioned only where its guard covers this many direct accesses (a guard that
replaces one or two checks saves little and adds a copy of the tail)."""

_NEVER = 1 << 60


def _is_i32(n) -> bool:
    return n.dtype is not None and n.dtype.kind == "i" and n.dtype.bits == 32


def _index(n) -> tuple:
    return n.srcs if n.op == Op.GLOBAL_LOAD else n.srcs[:-1]


def split_point(nodes: tuple, *skip):
    """`(p, q)`: version `nodes[p:q]`, or None (module docstring). `skip`: sets of the
    accesses already unchecked (proven or in range)."""
    pos = {n: i for i, n in enumerate(nodes)}
    top = {}  # every node of the block, nested ones included -> its top-level position
    last = {}  # slot -> the last position that allocates or stores it (nested included)
    for i, n in enumerate(nodes):
        for m in walk(Block((n,))):
            top[m] = i
            if m.op == Op.STORE:
                last[m.srcs[0]] = i
            elif m.op == Op.ALLOCA:
                last[m] = i
    memo = {}
    spans = []  # (earliest split, position) of each coverable access
    for j, n in enumerate(nodes):
        if n.op not in GLOBAL_ACCESS or any(n in k for k in skip) or not _index(n):
            continue
        s = max(_earliest(x, pos, last, memo) for x in _index(n))
        if s <= j:
            spans.append((s, j))
    if len(spans) < MIN_COVERED:
        return None
    starts = sorted(s for s, _ in spans)
    ends = sorted(j for _, j in spans)
    for p in ends:  # candidate p = an access's position, first first
        covered = bisect.bisect_right(starts, p) - bisect.bisect_left(ends, p)
        if covered >= MIN_COVERED:
            q = max(j for s, j in spans if s <= p <= j) + 1
            return p, _closed(nodes, top, p, q)
    return None


def _closed(nodes, top, p, q) -> int:
    """The smallest end >= `q` such that no node from it on uses a node of `nodes[p:end]`
    (the region can then move into the two branches of an IF: nothing after it names its
    values, slots or loop indices)."""
    reach = {}  # top-level position -> the last top-level position that uses its nodes
    for k in range(p, len(nodes)):
        for m in walk(Block((nodes[k],))):
            for r in _uses(m):
                i = top.get(r)
                if i is not None and p <= i < k:
                    reach[i] = k
    end = q
    while True:
        far = max((reach.get(i, -1) for i in range(p, end)), default=-1)
        if far < end:
            return end
        end = far + 1


def _uses(m):
    """The nodes `m` names: its sources and its loop payload's index, carried slots, trips."""
    yield from m.srcs
    arg = m.arg
    if isinstance(arg, LoopArg):
        yield from arg.carried
        if arg.index is not None:
            yield arg.index
        if arg.trips is not None:
            yield arg.trips


def _earliest(x, pos, last, memo) -> int:
    """The smallest split `p` for which index `x` is an invariant expression of `nodes[p:]`."""
    if x in memo:
        return memo[x]
    if not _is_i32(x):
        r = _NEVER
    elif x.op == Op.CONST:
        r = 0
    elif x not in pos:  # defined in an enclosing block: fixed while this block runs
        r = 0
    else:
        r = pos[x] + 1  # the node itself, once computed
        if x.op == Op.LOAD:  # a local stored nowhere in the tail: loaded again before it
            r = min(r, last.get(x.srcs[0], -1) + 1)
        elif x.op == Op.CAST and _is_i32(x.srcs[0]):
            r = min(r, _earliest(x.srcs[0], pos, last, memo))
        elif x.op in (Op.ADD, Op.SUB):
            a, b = x.srcs
            if b.op == Op.CONST or (x.op == Op.ADD and a.op == Op.CONST):
                r = min(r, max(_earliest(a, pos, last, memo), _earliest(b, pos, last, memo)))
    memo[x] = r
    return r
