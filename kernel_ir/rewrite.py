"""Rebuilding blocks: the one traversal every IR -> IR pass uses.

`rebuild(block, visit)` walks nodes in order, remaps sources through `env` (old node -> new node)
and calls `visit(node, srcs, blocks, arg, env)` with the already-rebuilt sources, nested blocks
and payload. `visit` returns a node (kept, recorded as the replacement), `None` (dropped) or a
`Splice(nodes, value)` (several nodes inserted; `value` replaces the old node for later users).
Nodes whose sources, blocks and payload did not change are reused, not copied.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .nodes import Block, LoopArg, Node


@dataclass
class Splice:
    nodes: list
    value: object = None


def remap_arg(arg, env):
    if isinstance(arg, LoopArg):
        carried = tuple(env.get(c, c) for c in arg.carried)
        idx = env.get(arg.index, arg.index) if arg.index is not None else None
        trips = env.get(arg.trips, arg.trips) if arg.trips is not None else None
        if carried != arg.carried or idx is not arg.index or trips is not arg.trips:
            return replace(arg, carried=carried, index=idx, trips=trips)
    return arg


def keep(n: Node, srcs, blocks, arg, env):
    """Default visit: reuse `n` if nothing changed, else a copy with the new parts.

    (`==` on these tuples is `is` per element: `Node` compares by identity, and a rebuilt block
    is either the block itself or one with another node in it; a tuple compare is one C call
    where a generator per node cost ~2 s of a cold Genesis ndarray build's passes.)"""
    if srcs == n.srcs and arg is n.arg and blocks == n.blocks:
        return n
    return Node(n.op, n.dtype, srcs, arg, blocks, n.loc)


def rebuild(block: Block, visit=keep, env=None) -> Block:
    env = {} if env is None else env
    out = []
    get = env.get
    for n in block.nodes:
        srcs = tuple(map(get, n.srcs, n.srcs))  # env.get(s, s) for each source
        blocks = tuple([rebuild(b, visit, env) for b in n.blocks]) if n.blocks else ()
        arg = remap_arg(n.arg, env)
        r = visit(n, srcs, blocks, arg, env)
        if r is None:
            continue
        if isinstance(r, Splice):
            out.extend(r.nodes)
            if r.value is not None:
                env[n] = r.value
            continue
        if r is not n:
            env[n] = r
        out.append(r)
    out = tuple(out)
    if out == block.nodes:  # the same nodes (identity: see `keep`)
        return block
    return Block(out)


def clone_expr(n: Node, memo=None) -> Node:
    """A fresh copy of a pure expression tree (used to re-materialise task bounds)."""
    memo = {} if memo is None else memo
    if n in memo:
        return memo[n]
    c = Node(n.op, n.dtype, tuple(clone_expr(s, memo) for s in n.srcs), n.arg, (), n.loc)
    memo[n] = c
    return c


def expr_nodes(n: Node, out=None) -> list:
    """The nodes of an expression tree in post-order (each once)."""
    out = [] if out is None else out
    seen = set(map(id, out))
    def go(x):
        if id(x) in seen:
            return
        for s in x.srcs:
            go(s)
        seen.add(id(x))
        out.append(x)
    go(n)
    return out
