"""Serialised top-level loops whose iterations are provably independent run in parallel.

Genesis serialises every loop on the CPU (`qd.loop_config(serialize=para_level < ALL)`), so at
`n_envs` = 256 each of its kernels is one serial task looping over the environments, on one
core. Most such loops touch only their own environment's elements: this pass finds those and
marks them parallel (`LoopArg.parallel`), so that offloading makes each a range task the CPU
backend runs over its threads and SIMD lanes (`backends/work_estimate.Adaptive` decides from the
measured time whether a launch is worth splitting). Every refusal is silent: the loop stays
serial and runs as written.

What is considered (`parallelise`): a serial `RANGE_FOR` at the kernel's top level (after
inlining), or a *perfect nest* of them (each loop's body is exactly the next loop: a serialised
`ndrange(n_links, _B)`). For a nest, one loop of the chain, the *env loop* `E`, is moved
outermost and made parallel; the others keep their relative order inside it. The chain's loops
are tried outermost first; the first that qualifies is taken.

The rule, for the env loop's index `e` (a `LOOP_INDEX` leaf) and the loop's whole body `B`:

1. *Bounds*: every bound of the chain's loops (for a single loop: its own) is a pure expression
   over constants, scalar arguments, ndarray shapes and top-level locals stored once with such a
   value (offload's forwarding, `offload.forwarding`): evaluated once, the same for every
   iteration, and independent of the other loops' indices (so moving `E` out keeps every
   iteration's bounds).
2. *Control*: no `BREAK` that leaves a chain loop (a `break` of a loop nested inside `B` is
   fine; `continue` ends the current iteration either way, so it is allowed), no adstack
   operation, no `PRINT` (lowered earlier to global writes, which rule 5 refuses anyway).
3. *Locals*: `B` stores no local allocated outside it (no value carried from one iteration to
   the next: sums, counters, the random generator's state, an early return's flag). Loads of
   outer locals are free (nothing in the loop writes them).
4. *Values*: every SSA value `B` uses that is defined outside it is such a closed expression
   (rule 1): no value loaded from memory before the loop.
5. *Memory*: group the arrays `B` accesses into alias classes: a field (and each of its gradient
   / dual fields: fields never share memory) is a class of its own; ndarray arguments, their
   gradients and duals form one class per (element type, ndim): two arguments may be one array
   passed twice, or one may be another's `.grad` passed beside it, which have the same element
   type and number of axes. A program compiled for a launch's partition of its ndarray
   buffers (`aliases`: the groups of buffers, gradients and duals included, whose storages
   overlap, decided at launch by `spirad.data.storage_spans` and part of the program's key,
   `Kernel._alias_partition`) makes each group a class, and each buffer outside them a class
   of its own, as fields are; the launch path runs that program only for launches whose
   storages overlap exactly so, so the classes are the memory's own there.
   For every class that `B` writes (store
   or any atomic), every access to it in `B` — reads included — has `e` itself (the index leaf,
   unmodified) at one and the same axis `k`. Classes `B` only reads are free. An access to a
   bit-field (`GlobalRef.mask`, quantized storage) is refused.

Why it is sound: by (5), two iterations with different `e` access disjoint elements of every
written class (they differ at axis `k`), and a class they share only by reading holds the same
values for both: no iteration reads a value another writes, nor writes one another writes, so
the iterations commute and any interleaving (threads, SIMD lanes) gives the serial result,
each iteration's own float arithmetic in its own order (bit for bit). Atomics on an
iteration's own elements are then not contended by other iterations. (3) and (4) make the
iterations share no local state: the only values flowing into an iteration are loop-invariant.
(1) makes the iteration space the same rectangle in any loop order, and (2) keeps each
iteration's control confined to itself (a `break` would make later iterations depend on
earlier ones). For a nest, the iterations with one value of `e` run in their original relative
order inside the parallel loop, and iterations with different `e` commute: the result is the
serial nest's. Elements are distinct when their indices differ at one axis because a field's
layout and an ndarray's C order map distinct indices to distinct addresses (bit-fields, which
share a word, are refused); ndarray arguments viewing overlapping memory at different offsets
(two numpy views of one buffer) are outside what a kernel may assume of its arguments in the
generic program, as for any parallel loop (a program with `aliases` groups them: their
storages overlap). The classes, like the rest of the rule, concern the forward program only:
the pass never sees a gradient or forward-mode program, so `break`, `continue`, `while`, early
returns, nested loops and overwritten stores of reverse mode meet the serial task list,
whichever partition (or none) the forward program was compiled for.

The pass runs on the forward program only, and only for the CPU backend: with
SPIRAD_INDEPENDENT_LOOPS=1 and a second worker (`compile.driver.independent_loops`; off by
default: Genesis ran slower with it so far, docs/performance.md) on loops whose estimated work
can pay for a parallel launch (`work_estimate.worth_splitting`); otherwise, with
SPIRAD_ENV_LANES (on by default, `driver.env_lanes`), on the loops whose body is heavy and whose
constant trip count fills the SIMD lanes (`work_estimate.worth_lanes`: Genesis' narrow phase),
marked `LoopArg.lanes` so that the code generator runs their iterations in lanes though their
bodies hold loops. Lanes are one more interleaving of the iterations, which the argument above
covers: each lane runs its own iteration's operations in program order (inner loops, `while`,
`break` and `continue` of loops inside `B` masked per lane), so its float arithmetic is its own
and in its own order; transcendental math in lanes comes from spirad's vector bodies where scalar
code may call libm (docs/vecmath.md: within their ulp bounds, not always the same bits). In
both modes autodiff, forward mode and `Tape(validation=True)` see the serial task list (their adjoints
and adstack sizing are unchanged), and GPU backends keep the loops serial.
"""
from __future__ import annotations

import os
from dataclasses import replace

from kernel_ir.nodes import Block, KernelIR, Node, walk
from kernel_ir.ops import ATOMICS, GLOBAL_ACCESS, LOOPS, Op

from .offload import forwarding

_ADSTACK = frozenset(op for op in Op if op.name.startswith("ADSTACK_"))


def parallelise(k: KernelIR, worth=None, lanes: bool = False, aliases=None) -> KernelIR:
    """`k` with its provably independent serialised top-level loops parallel (the same `k`
    where none qualifies). `worth(loop)`: whether the parallel form of a loop has work enough
    to pay for its launch (None: every one has); a loop without stays serial. `lanes`: the
    loops are made parallel for their SIMD lanes (`LoopArg.lanes`: the CPU code generator
    runs them in lanes though their bodies hold loops). `aliases`: the groups of ndarray
    buffers that may share memory at the launches that run the program (rule 5; None: any
    two of one element type and rank may)."""
    out, changed = [], False
    for n, (p, _) in zip(k.body.nodes, _decide(k, worth, aliases)):
        if p is not None and lanes:
            p = Node(p.op, p.dtype, p.srcs, replace(p.arg, lanes=True), p.blocks, p.loc)
        out.append(n if p is None else p)
        changed = changed or p is not None
    return replace(k, body=Block(tuple(out))) if changed else k


def explain(k: KernelIR, worth=None, aliases=None) -> list:
    """(source location, None where the loop becomes parallel, else why it stays serial) of
    each serialised top-level loop of `k` (after the kernel passes: `driver.KERNEL_STAGES`);
    for reports (benchmarks/genesis_independent_loops.py)."""
    return [(n.loc, why) for n, (_, why) in zip(k.body.nodes, _decide(k, worth, aliases))
            if n.op == Op.RANGE_FOR and not n.arg.parallel]


def _decide(k: KernelIR, worth, aliases=None) -> list:
    """Per top-level node of `k`: (its parallel replacement or None, why not or None)."""
    fw = None
    cmap = None if aliases is None else {b: g[0] for g in aliases for b in g}
    out = []
    for n in k.body.nodes:
        if n.op == Op.RANGE_FOR and not n.arg.parallel:
            if fw is None:
                fw = forwarding(k.body)
            p, why = _parallel_form(n, fw, cmap)
            if p is not None and worth is not None and not worth(p):
                p, why = None, "too little work to pay for a parallel launch (estimated)"
            out.append((p, why))
        else:
            out.append((None, None))
    return out


def _chain(loop: Node) -> list:
    """The perfect nest of serial loops starting at `loop`, outermost first."""
    chain = [loop]
    while True:
        body = chain[-1].blocks[0].nodes
        if len(body) == 1 and body[0].op == Op.RANGE_FOR and not body[0].arg.parallel:
            chain.append(body[0])
        else:
            return chain


def _parallel_form(loop: Node, fw, cmap) -> tuple:
    """(the parallel replacement of serial loop (nest) `loop`, None) or (None, why not)."""
    chain = _chain(loop)
    facts = _Facts(loop.blocks[0], chain, fw, cmap)
    if facts.refused:
        return None, facts.refused
    why = "no loop of the nest has bounds the same for every iteration"
    for j, env in enumerate(chain):
        bounded = chain if j else chain[:1]
        if not all(fw.closed(b) for L in bounded for b in L.srcs):
            continue
        why = facts.dependent(env.arg.index)
        if why:
            continue
        inner = chain[-1].blocks[0]
        for L in reversed([L for i, L in enumerate(chain) if i != j]):
            inner = Block((Node(Op.RANGE_FOR, L.dtype, L.srcs, L.arg, (inner,), L.loc),))
        return Node(Op.RANGE_FOR, env.dtype, env.srcs,
                    replace(env.arg, parallel=True, serialised=True),
                    (inner,), env.loc), None
    return None, why


class _Facts:
    """What rules 2-5 need of the outermost loop's body, gathered in one walk; `refused`: why
    rules 2-4 keep it serial (None: they hold)."""

    def __init__(self, body: Block, chain: list, fw, cmap):
        self.cmap = cmap  # buffer -> its class where launches decided the classes, or None
        self.accesses = []       # (class, access node, index nodes) of every global access
        self.written = set()     # classes stored to or updated atomically
        self.refused = self._scan(body, chain, fw)

    def _scan(self, body: Block, chain: list, fw):
        inner = {L.arg.index for L in chain}
        defined = set()
        for n in walk(body):
            defined.add(n)
            if n.op in LOOPS and n.arg is not None and n.arg.index is not None:
                inner.add(n.arg.index)
        defined |= inner
        if not self._no_break(chain[-1].blocks[0]):
            return "a break leaves the loop"
        for n in walk(body):
            if n.op in _ADSTACK:
                return "an adstack"
            if n.op == Op.PRINT:
                return "a print"
            if n.op == Op.STORE and n.srcs[0] not in defined:
                return f"it assigns '{n.srcs[0].arg or 'a local'}', declared before the loop"
            if n.op in GLOBAL_ACCESS:
                ref = n.arg
                if ref.mask or ref.kind == "temp":
                    return f"a bit-field access to {ref!r}"
                cls = _alias_class(ref, self.cmap)
                idx = n.srcs if n.op == Op.GLOBAL_LOAD else n.srcs[:-1]
                self.accesses.append((cls, n, idx))
                if n.op != Op.GLOBAL_LOAD:
                    self.written.add(cls)
            for s in n.srcs:  # rule 4: values from before the loop are loop-invariant
                if s not in defined and s.op != Op.ALLOCA and not fw.closed(s):
                    return "it uses a value computed before it from memory"
        return None

    @staticmethod
    def _no_break(block) -> bool:
        """No BREAK in `block` that leaves it (rule 2): one inside a nested loop ends that
        loop only."""
        for n in block.nodes:
            if n.op == Op.BREAK:
                return False
            if n.op not in LOOPS and not all(_Facts._no_break(b) for b in n.blocks):
                return False
        return True

    def dependent(self, e: Node):
        """Why rule 5 fails for env index `e`, or None where it holds."""
        axes: dict = {}
        for cls, n, idx in self.accesses:
            if cls not in self.written:
                continue
            here = {a for a, s in enumerate(idx) if s is e}
            axes[cls] = here if cls not in axes else axes[cls] & here
            if not axes[cls]:
                generic = cls[0] == "ndarray" and self.cmap is None
                what = f"ndarrays {cls[1]} with {cls[2]} axes" if generic else repr(n.arg)
                at = f" ({os.path.basename(n.loc.filename)}:{n.loc.lineno}: " \
                    f"`{n.loc.line_text.strip()}`)" if n.loc else ""
                return f"it writes {what}, not indexed by the loop's index at one axis " \
                       f"everywhere{at}"
        return None


def _alias_class(ref, cmap) -> tuple:
    """Which arrays may share memory with `ref` (rule 5); `cmap`: buffer -> class of the
    buffers that share memory at the program's launches (None: not decided)."""
    if ref.kind != "ndarray":
        return ref.buffer
    if cmap is None:
        return ("ndarray", ref.dtype, ref.ndim)
    return cmap.get(ref.buffer, ref.buffer)
