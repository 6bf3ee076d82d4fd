"""Keep each adstack's top entry in locals: the heap is touched only to push and to pop.

The adjoint builder reads stack tops (`ADSTACK_LOAD_TOP`) at every use of a stacked local and
accumulates adjoints into the top entry (`ADSTACK_ACC_ADJ`) at every use in the reverse walk. On
the heap each of those is a load or a load-and-store at a per-thread address (`row * stride + …`),
which a GPU, or lavapipe's SIMD lanes, serve as scattered accesses. This pass caches the top in two
locals per stack, which backends promote to registers:

* `top` (every stack): mirrors the primal of the top entry. PUSH v also sets top := v; POP also
  reloads top := LOAD_TOP (the one heap read a pop needs); LOAD_TOP becomes a load of `top`.
  Exact by construction: only ALLOCA, PUSH and POP change the top entry.
* `top.adj` (float stacks, when it is exact): holds the adjoint of the top entry, and the stack
  keeps no adjoints in memory at all (`AdStackArg.adjoint_in_heap = False`, so the layout gives it
  no adjoint half and PUSH writes no zero). ACC_ADJ becomes `top.adj += v`, LOAD_TOP_ADJ a load
  of it, PUSH and POP reset it to 0. This is exact when every entry below the top has a zero
  adjoint, which holds when no ACC_ADJ can execute before a PUSH of the same stack: then
  adjoints only accumulate while the stack shrinks. The adjoint builder guarantees it (all pushes
  are in the forward replay, all accumulation in the reverse walk after it); the pass checks it
  per stack — an ACC_ADJ placed before a PUSH, or sharing a loop with one, keeps that stack's
  adjoints on the heap, unchanged.

On overflow (a PUSH at capacity writes nothing) `top` still takes the pushed value; the launch is
reported as failed anyway (see `kernel_ir.abi`), and every backend runs the same rewritten IR.
"""
from __future__ import annotations

from dataclasses import replace

from kernel_ir.nodes import Block, Node
from kernel_ir.ops import Op
from kernel_ir.rewrite import Splice, keep, rebuild


def _register_adjoint_stacks(body: Block) -> set:
    """Float stacks whose ACC_ADJs never execute before one of their PUSHes (see the module
    docstring): no ACC_ADJ precedes a PUSH in program order or shares an enclosing loop with it."""
    pushes, accs = {}, {}
    pos = [0]

    def visit(block, loops):
        for n in block.nodes:
            pos[0] += 1
            if n.op == Op.ADSTACK_PUSH:
                pushes.setdefault(n.srcs[0], []).append((pos[0], loops))
            elif n.op == Op.ADSTACK_ACC_ADJ:
                accs.setdefault(n.srcs[0], []).append((pos[0], loops))
            inner = loops | {n} if n.op in (Op.RANGE_FOR, Op.WHILE) else loops
            for b in n.blocks:
                visit(b, inner)

    visit(body, frozenset())
    out = set()
    for n in body.nodes:
        if n.op != Op.ADSTACK_ALLOCA or not n.dtype.is_float:
            continue
        if all(pa > pp and not (la & lp)
               for pa, la in accs.get(n, ()) for pp, lp in pushes.get(n, ())):
            out.add(n)
    return out


def promote_stack_tops(body: Block) -> Block:
    """Rewrite one adjoint task body (see the module docstring)."""
    if not any(n.op == Op.ADSTACK_ALLOCA for n in body.nodes):
        return body
    in_reg = _register_adjoint_stacks(body)
    top, top_adj = {}, {}  # new ADSTACK_ALLOCA -> its local(s)

    def local(dtype, name, loc):
        return Node(Op.ALLOCA, dtype, (), name, (), loc)

    def store(slot, v, loc):
        return Node(Op.STORE, None, (slot, v), None, (), loc)

    def zero(dtype, loc):
        return Node(Op.CONST, dtype, (), 0, (), loc)

    def as_dtype(v, dtype, loc):
        return v if v.dtype == dtype else Node(Op.CAST, dtype, (v,), None, (), loc)

    def visit(n, srcs, blocks, arg, env):
        op, loc = n.op, n.loc
        if op == Op.ADSTACK_ALLOCA:
            s = n
            if n in in_reg:
                s = Node(n.op, n.dtype, (), replace(n.arg, adjoint_in_heap=False), (), loc)
            out = [s]
            z = zero(n.dtype, loc)
            t = top[s] = local(n.dtype, f"{n.arg.name}.top", loc)
            out += [z, t, store(t, z, loc)]
            if n in in_reg:
                a = top_adj[s] = local(n.dtype, f"{n.arg.name}.top.adj", loc)
                out += [a, store(a, z, loc)]
            return Splice(out, s)
        if op not in (Op.ADSTACK_PUSH, Op.ADSTACK_POP, Op.ADSTACK_LOAD_TOP,
                      Op.ADSTACK_LOAD_TOP_ADJ, Op.ADSTACK_ACC_ADJ):
            return keep(n, srcs, blocks, arg, env)
        s = srcs[0]
        dt = s.dtype
        adj = top_adj.get(s)
        if op == Op.ADSTACK_PUSH:
            v = as_dtype(srcs[1], dt, loc)
            out = [keep(n, srcs, blocks, arg, env)] + ([v] if v is not srcs[1] else [])
            out.append(store(top[s], v, loc))
            if adj is not None:
                z = zero(dt, loc)
                out += [z, store(adj, z, loc)]
            return Splice(out)
        if op == Op.ADSTACK_POP:
            reload = Node(Op.ADSTACK_LOAD_TOP, dt, (s,), None, (), loc)
            out = [keep(n, srcs, blocks, arg, env), reload, store(top[s], reload, loc)]
            if adj is not None:
                z = zero(dt, loc)
                out += [z, store(adj, z, loc)]
            return Splice(out)
        if op == Op.ADSTACK_LOAD_TOP:
            v = Node(Op.LOAD, dt, (top[s],), None, (), loc)
            c = as_dtype(v, n.dtype or dt, loc)
            return Splice([v] + ([c] if c is not v else []), c)
        if adj is None:  # LOAD_TOP_ADJ / ACC_ADJ of a stack that keeps heap adjoints
            return keep(n, srcs, blocks, arg, env)
        if op == Op.ADSTACK_LOAD_TOP_ADJ:
            v = Node(Op.LOAD, dt, (adj,), None, (), loc)
            c = as_dtype(v, n.dtype or dt, loc)
            return Splice([v] + ([c] if c is not v else []), c)
        # ACC_ADJ
        old = Node(Op.LOAD, dt, (adj,), None, (), loc)
        v = as_dtype(srcs[1], dt, loc)
        new = Node(Op.ADD, dt, (old, v), None, (), loc)
        return Splice([old] + ([v] if v is not srcs[1] else []) + [new, store(adj, new, loc)])

    return rebuild(body, visit)
