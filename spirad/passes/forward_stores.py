"""A local's load replaced by the value just stored into it, where nothing can have changed it.

    j_arg = j - 1              # STORE %j_arg, (j - 1): a func argument, copied into its local
    ... p[t, i, j_arg] ...     # LOAD %j_arg  ->  (j - 1)

Why: every argument of an inlined `@sd.func` (and many user locals) is a slot stored once and
read right after. Inside a dynamic loop, reverse mode keeps a slot read by an index or a
condition on an autodiff stack (DESIGN §4), so DiffTaichi's `wave` (`get_p(t, i, j)` called five
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
read). A stored value is known from its STORE to the end of the block, and inside nested blocks
if it reads no local (reverse mode snapshots a load whose slot is stored again only where the
load is used in its own block) and the nested block does not store the slot (loops: anywhere in
their body); a nested statement that stores the slot anywhere ends what is known after it. Runs
on the kernel after inlining, before `simplify` and `dce` (which removes the dead slots).
"""
from __future__ import annotations

from kernel_ir.nodes import Block, KernelIR, Node, walk
from kernel_ir.ops import FLOAT_UNARY, LOOPS, PURE, Op
from kernel_ir.rewrite import keep, remap_arg


def forward_stores(k: KernelIR) -> KernelIR:
    stored = {}  # control node -> slots stored anywhere inside it
    for n in walk(k.body):
        if n.blocks:
            stored[n] = {m.srcs[0] for b in n.blocks for m in walk(b) if m.op == Op.STORE}
    env, pure = {}, {}
    body = _block(k.body, {}, env, stored, pure)
    return k if body is k.body else KernelIR(k.name, k.args, body, k.loc)


def _block(block: Block, known: dict, env: dict, stored: dict, pure: dict) -> Block:
    out = []
    for n in block.nodes:
        srcs = tuple(env.get(s, s) for s in n.srcs)
        if n.op == Op.LOAD:
            v = known.get(srcs[0])
            if v is not None and v.dtype == n.dtype:
                env[n] = v
                continue
        inner = stored.get(n)
        if inner is not None:  # nested blocks: values without loads, their slots unchanged
            inherit = {s: v for s, v in known.items()
                       if pure[v] is not LOADS and (n.op not in LOOPS or s not in inner)}
            blocks = tuple(_block(b, dict(inherit), env, stored, pure) for b in n.blocks)
            for s in inner:
                known.pop(s, None)
        else:
            blocks = n.blocks
        new = keep(n, srcs, blocks, remap_arg(n.arg, env), env)
        if new is not n:
            env[n] = new
        out.append(new)
        if n.op == Op.STORE:
            if _recomputable(srcs[1], pure):
                known[srcs[0]] = srcs[1]
            else:
                known.pop(srcs[0], None)
    if len(out) == len(block.nodes) and all(a is b for a, b in zip(out, block.nodes)):
        return block
    return Block(tuple(out))


# kept in their slots, never recomputed: the math functions but the one-instruction ones
COSTLY = (FLOAT_UNARY - {Op.FLOOR, Op.SQRT, Op.RSQRT}) | {Op.POW, Op.ATAN2}
LOADS = "loads"  # _recomputable's memo: True, False, or LOADS (recomputable, reads locals)


def _recomputable(v: Node, memo: dict) -> bool:
    """Pure ops over leaves and loads of locals (no global reads, no atomics); `memo` keeps
    True, False or LOADS (with loads of locals). Iterative: a generated expression can be
    thousands of levels deep."""
    stack = [v]
    while stack:
        n = stack[-1]
        if n in memo:
            stack.pop()
            continue
        if n.op == Op.LOAD or n.op not in PURE or n.op in COSTLY:  # a local's load: as it is
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
