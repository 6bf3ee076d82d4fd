"""A versioned region's checked original compiled as a cold function of its own.

passes/bounds_versioning turns a loop `L` (or a range task's body) into `if guard: L' else: L`
(an IF whose arg is `kernel_ir.nodes.VERSIONED`): `L'` with the accesses the guard proves
unchecked, `L` the region as it was, every access checked, which runs only where the guard
failed (an index range that may leave its array: never in Genesis' steps, as far as measured).
Inline, LLVM optimised and compiled `L` at -O3 like the hot code, and the copies with their
checks were about 40 % of a cold Genesis ndarray build (docs/performance.md, "Building a
Genesis scene"). Here the code generator emits `L` as an internal function `<task>.checked.<k>`
with `COLD_ATTRS` and calls it from the IF's else branch (weighted unlikely), never inlined
back; `L'` and everything else is compiled as before. The CPU pipeline
(`cpu_runtime.optimized_module`, `machine_code.checked_copies`) keeps LLVM's optimisation
pipeline off the copy (`optnone` while it runs), then gives it light passes of its own (its
locals promoted to SSA values, one instcombine, one CFG simplification) and `minsize optsize`
for its machine code.

**The same program.** The function body is `L` lowered by the same rules (`FnContext` over the
new function, the same ABI, checks and switches), with:

* the values `L` uses that are computed before it (SSA nodes: arguments, shapes, enclosing loop
  indices, the task index, loaded values) passed as parameters (constants are shared as they
  are): an SSA value cannot change, so the callee sees what the inline code saw;
* the locals (`ALLOCA` slots) defined before `L` that it reads or writes passed by value into
  slots of the callee, and the ones it stores returned (a struct) and stored back into the
  caller's slots after the call: `L` is the only code that runs between the call's entry and
  its return, so each slot holds at the return what it would have held after the inline `L`,
  and the caller's slots never escape (mem2reg still promotes them in the hot code);
* buffers, launch arguments and the status words reached through the same `bufs` / `args`
  pointers and worker slot, so loads, stores, atomics and the check failures' records are
  the same memory operations in the same order.

Control: a region from which a `break` or `continue` leaves (one not inside a loop of the
region: a `continue` that ends a range task's iteration, a tail region's jumps) is not
outlined; inside the region `break`, `continue`, `while` loops and early returns (flags and
breaks) target the region's own loops, whose blocks are all in the callee. Only scalar CPU
code (`applies`): an SPMD task lowers its IFs under lane masks (`spmd_control`), a GPU kernel
entry keeps its code in one function; adstack regions are never versioned.

The checked copy's speed matters where a guard fails in every launch: Genesis'
`kernel_substep_post` (box, ndarray) runs a checked copy in its normal steps (the loop of
`func_copy_next_to_curr` over `max(n_dofs, n_qs)`, whose accesses sit under `if i < n_dofs`).
`optnone` (no optimisation at all) compiled the box ndarray build's modules in 18.5 + 17.2 s of CPU
(optimisation + machine code) against 25.3 + 20.5 s for `minsize optsize`, but that kernel then
launched in 102-107 us against main's 92-99 (`n_envs` 256, fastest of 100, five runs each), and
91-101 us with `minsize optsize` (docs/performance.md, "Checked copies in cold functions").
Optimised with the `minsize optsize` pipeline, the copies were still about a third of the
build's optimisation and machine code (standalone on the dumped modules: 19.8 + 15.2 s of CPU
with them, 13.0 + 10.6 s with them as declarations). The light passes instead of that pipeline
(gbuild6): `kernel_substep_post` compiles in 3.7 against 4.3 s of CPU and launches in 97.8-99.7
against 96.8-98.4 us (`benchmarks/kernel_replay.py`, the same captured launch, fastest of 300,
alternating; the same buffers after); `optnone` at machine code too (the fast instruction
selector and register allocator) compiled in 3.2 s but launched in 102-104 against 98-100 us.
All compute what the inline copy computes (no fast-math flags anywhere; attributes and passes
choose code, not semantics).
"""
from __future__ import annotations

from llvmlite import ir

from kernel_ir.nodes import Block, walk
from kernel_ir.ops import LOOPS, Op

from . import lltypes
from .lltypes import I32, PTR, VOID
from .machine_code import SUFFIX

COLD_ATTRS = ("noinline", "cold", "nounwind")
"""The checked copy's function attributes in the code generator's IR; the CPU pipeline adds
`optnone` once `machine_code.prepare_checked_copies` has run its light passes (module
docstring)."""


_ADSTACK = frozenset(op for op in Op if op.name.startswith("ADSTACK_"))


def applies(ctx) -> bool:
    """Can `ctx` call an outlined region: scalar code of a CPU task function."""
    from .context import FnContext
    return (type(ctx) is FnContext and ctx.width == 1 and not ctx.lib.target.is_gpu_entry
            and ctx.adstack is None)


def interface(region: Block):
    """(values, slots, stored) of `region`: the nodes it uses that are defined before it
    (`values`; locals apart), the caller's slots it loads or stores (`slots`), and those it
    stores — or None where it cannot be outlined (a jump leaves it, an adstack, a slot used
    other than by LOAD / STORE)."""
    defined = set()
    for n in walk(region):
        defined.add(n)
        if n.op == Op.RANGE_FOR and n.arg is not None and n.arg.index is not None:
            defined.add(n.arg.index)
    if _escapes(region, 0):
        return None
    values, slots, stored, seen = [], [], set(), set()
    for n in walk(region):
        if n.op in _ADSTACK:
            return None
        for k, s in enumerate(n.srcs):
            if s in defined:
                continue
            if s.op == Op.ALLOCA:
                if k != 0 or n.op not in (Op.LOAD, Op.STORE):
                    return None
                if n.op == Op.STORE:
                    stored.add(s)
            if s not in seen:
                seen.add(s)
                (slots if s.op == Op.ALLOCA else values).append(s)
    return values, slots, stored


def _escapes(block: Block, depth: int) -> bool:
    """Does a BREAK / CONTINUE in `block` (inside `depth` loops of the region) leave it?"""
    for n in block.nodes:
        if n.op in (Op.BREAK, Op.CONTINUE) and depth == 0:
            return True
        inner = depth + (n.op in LOOPS)
        if any(_escapes(b, inner) for b in n.blocks):
            return True
    return False


def lower_call(ctx, region: Block) -> bool:
    """Lower `region` (the checked original of a versioned IF) as a call to a cold function of
    its own, at `ctx.b`; False where it does not apply (the caller lowers it inline)."""
    if not applies(ctx):
        return False
    face = interface(region)
    if face is None:
        return False
    values, slots, stored = face
    from .context import FnContext
    params = [s for s in values if not isinstance(ctx.value(s), ir.Constant)]
    slot_ts = [lltypes.reg_type(s.dtype) for s in slots]
    outs = [k for k, s in enumerate(slots) if s in stored]
    ret_t = ir.LiteralStructType([slot_ts[k] for k in outs]) if outs else VOID
    fnty = ir.FunctionType(ret_t, [PTR, PTR, I32] + [ctx.value(s).type for s in params] + slot_ts)
    ctx.lib.checked_copies += 1
    fn = ir.Function(ctx.lib.module, fnty, f"{ctx.fn.name}{SUFFIX}{ctx.lib.checked_copies}")
    fn.linkage = "internal"
    for a in COLD_ATTRS:
        fn.attributes.add(a)
    sub = FnContext(ctx.lib, fn, ctx.abi, ctx.arg_specs, ctx.table, ctx.options)
    sub.settings_of(ctx)
    sub.worker = fn.args[2]
    for s in values:
        v = ctx.value(s)
        if isinstance(v, ir.Constant):
            sub.env[s] = v
    for s, a in zip(params, fn.args[3:]):
        sub.env[s] = a
    start = sub.block("start")
    sub.b = ir.IRBuilder(start)
    for s, t, a in zip(slots, slot_ts, fn.args[3 + len(params):]):
        sub.env[s] = sub.hoisted_alloca(t, name=str(s.arg or "local"))
        sub.b.store(a, sub.env[s])
    ret = sub.block("ret")
    sub.top_continue = None  # (no jump leaves the region: `interface`)
    sub.lower_block(region)
    sub.close_into(ret)
    sub.b.position_at_end(ret)
    if outs:
        r = ir.Constant(ret_t, ir.Undefined)
        for i, k in enumerate(outs):
            r = sub.b.insert_value(r, sub.b.load(sub.env[slots[k]], typ=slot_ts[k]), i)
        sub.b.ret(r)
    else:
        sub.b.ret_void()
    sub.entry_b.branch(start)
    b = ctx.b
    worker = ctx.worker if ctx.worker is not None else ir.Constant(I32, 0)
    args = [ctx.bufs_arg, ctx.args_arg, worker] + [ctx.value(s) for s in params] + \
        [b.load(ctx.value(s), typ=t) for s, t in zip(slots, slot_ts)]
    r = b.call(fn, args)
    for i, k in enumerate(outs):
        b.store(b.extract_value(r, i), ctx.value(slots[k]))
    return True
