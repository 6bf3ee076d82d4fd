"""Adstacks (reverse mode): heap-backed per-worker stacks, per the Adstack ABI of `kernel_ir.abi`.

A task with ADSTACK_ALLOCA nodes reads four extra launch buffers after the kernel's own
`n = len(abi.bindings)` buffers:

    bufs[n]     meta        u32 words [stride_float, stride_int, off_0, cap_0, off_1, cap_1, ...]
    bufs[n+1]   heap_float  rows x stride_float bytes
    bufs[n+2]   heap_int    rows x stride_int bytes (8*k: stack k's count slot, unused here)
    bufs[n+3]   status      u32 words [code, task index, stack index, 0]; first error wins

`setup_adstacks` runs once per task function: it numbers the stacks (`adstack_allocas`), and in
the entry block loads meta and computes the worker's row bases (`heap + worker*stride`, in i64)
and, per stack, the pointer to its entries, adjoints and its capacity; so no op reads meta.
In an SPMD task function of W lanes (`spmd_adstack`) a worker owns W rows, lane-interleaved:
row bases and offsets are scaled by W and entry j of lane l is element `j*W + l`.

Entry counts are private to the call, so each stack's count is an i64 `alloca` in the entry block
(zeroed there, re-zeroed by ADSTACK_ALLOCA); mem2reg turns it into SSA values, and the ops only
touch memory for the entries themselves. The heap_int counter slots of the layout stay in place
and are never written (the cap == 0 reads below use them as an always-valid 8-byte dummy).

Semantics (the ABI): ALLOCA sets the count to 0; PUSH at count >= cap records
(1 = ADSTACK_OVERFLOW, task index, stack index) through a cold helper (`lower_memory.status_helper`:
cmpxchg on status word 0, so the first error wins) and writes nothing; otherwise it stores the primal, zeroes the adjoint
(float stacks) and increments the count. POP decrements a non-zero count. LOAD_TOP /
LOAD_TOP_ADJ / ACC_ADJ address entry max(count-1, 0); with cap == 0 they read 0 (the load goes
to the stack's always-valid 8-byte heap_int counter slot and the result is replaced by 0) and
ACC_ADJ writes nothing. Float adjoint arithmetic is in the stack's dtype; int stacks have no
adjoints: LOAD_TOP_ADJ on one gives 0 (no memory access), ACC_ADJ on one is a CodegenError.
A float stack with `adjoint_in_heap=False` (layout kind 'primal': reverse mode keeps its top
adjoint in a local) has no adjoint entries: PUSH writes only the primal, and LOAD_TOP_ADJ /
ACC_ADJ on it are a CodegenError.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from kernel_ir.abi import (LLVM_HEAP_FLOAT, LLVM_HEAP_INT, LLVM_META, LLVM_STATUS,
                           STATUS_ADSTACK_OVERFLOW, StatusWord, adstack_allocas)
from kernel_ir.dtypes import DType
from kernel_ir.nodes import Task
from kernel_ir.ops import Op

from .context import CodegenError, FnContext, entry_alloca
from .lltypes import I8, I32, I64, PTR, mem_type
from .lower_memory import from_memory, status_helper, to_memory
from .lower_ops import convert

OVERFLOW_HELPER = "spirad.adstack.overflow"


@dataclass
class _Stack:
    index: int
    dtype: DType
    count: ir.Value      # ptr to the i64 count: an entry-block alloca (promoted to registers)
    dummy: ir.Value      # ptr to 8 always-valid heap bytes (the unused counter slot)
    entries: ir.Value    # ptr to entry 0 (primal)
    adjoints: ir.Value   # ptr to adjoint entry 0 (float stacks with heap adjoints) or None
    cap: ir.Value        # i64 capacity
    empty_cap: ir.Value  # i1: cap == 0
    lanes: int = 1       # SPMD: entry j of lane l is element j*lanes + l (lane-interleaved)


@dataclass
class AdstackState:
    task_index: int
    status: ir.Value
    stacks: dict  # ADSTACK_ALLOCA node -> _Stack


def _buf(eb: ir.IRBuilder, bufs: ir.Value, k: int, name: str) -> ir.Value:
    slot = eb.gep(bufs, [ir.Constant(I64, k)], inbounds=True, source_etype=PTR)
    return eb.load(slot, name=name, typ=PTR)


def _byte_gep(eb: ir.IRBuilder, base, off, name="") -> ir.Value:
    return eb.gep(base, [off], inbounds=True, source_etype=I8, name=name)


def setup_adstacks(ctx: FnContext, task: Task, task_index: int) -> int:
    """Pre-scan `task` and hoist the adstack bases into the entry block; no-op without stacks.
    Returns the number of stacks."""
    allocas = adstack_allocas(task)
    ctx.adstack = None
    if not allocas:
        return 0
    eb = ctx.entry_b
    n = len(ctx.abi.bindings)
    meta = _buf(eb, ctx.bufs_arg, n + LLVM_META, "ad.meta")
    heap_f = _buf(eb, ctx.bufs_arg, n + LLVM_HEAP_FLOAT, "ad.heapf")
    heap_i = _buf(eb, ctx.bufs_arg, n + LLVM_HEAP_INT, "ad.heapi")
    status = _buf(eb, ctx.bufs_arg, n + LLVM_STATUS, "ad.status")

    def word(i, name):
        p = eb.gep(meta, [ir.Constant(I64, i)], inbounds=True, source_etype=I32)
        return eb.zext(eb.load(p, typ=I32, name=name), I64)

    w = ctx.width

    def scaled(v):  # SPMD: a worker's row is `w` rows wide, lane-interleaved (see spmd_adstack)
        return v if w == 1 else eb.mul(v, ir.Constant(I64, w))

    worker = eb.zext(ctx.worker, I64, name="ad.worker")  # the heap row: worker slot / GPU thread
    row_f = _byte_gep(eb, heap_f, scaled(eb.mul(worker, word(0, "ad.stridef"))), "ad.rowf")
    row_i = _byte_gep(eb, heap_i, scaled(eb.mul(worker, word(1, "ad.stridei"))), "ad.rowi")
    stacks = {}
    for k, a in enumerate(allocas):
        dt = a.dtype
        if dt is None:
            raise CodegenError(f"LLVM codegen: ADSTACK_ALLOCA {a.arg!r} has no dtype")
        off, cap = word(2 + 2 * k, f"ad.off{k}"), word(3 + 2 * k, f"ad.cap{k}")
        off = scaled(off)
        dummy = _byte_gep(eb, row_i, ir.Constant(I64, 8 * k), f"ad.slot{k}")
        count = entry_alloca(eb, ctx.lib.target, I64, name=f"ad.count{k}")
        eb.store(ir.Constant(I64, 0), count)
        if dt.is_float and not a.arg.adjoint_in_heap:  # 'primal' kind: the top adjoint is a local
            entries, adjoints = _byte_gep(eb, row_f, off, f"ad.primal{k}"), None
        elif dt.is_float:
            entries = _byte_gep(eb, row_f, off, f"ad.primal{k}")
            region = eb.and_(eb.add(eb.mul(cap, ir.Constant(I64, dt.nbytes)), ir.Constant(I64, 7)),
                             ir.Constant(I64, ~7))
            adjoints = _byte_gep(eb, entries, scaled(region), f"ad.adj{k}")
        else:
            entries, adjoints = _byte_gep(eb, row_i, off, f"ad.entries{k}"), None
        empty = eb.icmp_unsigned("==", cap, ir.Constant(I64, 0), name=f"ad.nocap{k}")
        stacks[a] = _Stack(k, dt, count, dummy, entries, adjoints, cap, empty, w)
    ctx.adstack = AdstackState(task_index, status, stacks)
    return len(allocas)


def stack_of(ctx: FnContext, n) -> _Stack:
    """The stack an ADSTACK_* node addresses."""
    st = ctx.adstack
    s = n if n.op == Op.ADSTACK_ALLOCA else (n.srcs[0] if n.srcs else None)
    if st is None or s not in st.stacks:
        raise CodegenError(f"LLVM codegen: {n.op.name} does not address an ADSTACK_ALLOCA of "
                           f"this task")
    return st.stacks[s]


def _overflow_helper(ctx: FnContext) -> ir.Function:
    """`void spirad.adstack.overflow(ptr status, i32 task, i32 stack)`: first error wins."""
    return status_helper(ctx.lib, OVERFLOW_HELPER, STATUS_ADSTACK_OVERFLOW, [I32, I32],
                         lambda b, args: zip((StatusWord.TASK, StatusWord.AUX), args))


def record_overflow(ctx: FnContext, s: _Stack):
    """Call the overflow helper for stack `s` of this task (first error wins)."""
    st = ctx.adstack
    ctx.b.call(_overflow_helper(ctx), [st.status, ir.Constant(I32, st.task_index),
                                       ir.Constant(I32, s.index)])


def entry_ptr(ctx, base, idx, dt, lanes=1):
    """Entry `idx` of `base` (lane 0's element in a lane-interleaved SPMD stack)."""
    if lanes > 1:
        idx = ctx.b.mul(idx, ir.Constant(I64, lanes), flags=["nuw"])
    return ctx.b.gep(base, [idx], inbounds=True, source_etype=mem_type(dt))


def top_index(ctx, s: _Stack):
    """max(count - 1, 0) as i64."""
    cnt = ctx.b.load(s.count, typ=I64)
    return ctx.b.call(ctx.lib.declare("llvm.usub.sat.i64", I64, [I64, I64]),
                      [cnt, ir.Constant(I64, 1)])


def _value_as(ctx, node, dt):
    return convert(ctx, ctx.value(node), node.dtype, dt)


# -- op rules ---------------------------------------------------------------------------------
def _alloca(ctx: FnContext, n):
    ctx.b.store(ir.Constant(I64, 0), stack_of(ctx, n).count)
    return None  # ops address the stack through ctx.adstack, not through env


def emit_push(ctx: FnContext, s: _Stack, store):
    """A push at the stack's (scalar) count: past the capacity the overflow is recorded and
    nothing written; else `store(count)` writes the entry (and its zero adjoint) and the count
    grows by one. The SPMD lowering's uniform-count push passes a vector store."""
    b = ctx.b
    cnt = b.load(s.count, typ=I64)
    full = b.icmp_unsigned(">=", cnt, s.cap)
    ovf, ok, merge = ctx.block("ad.overflow"), ctx.block("ad.push"), ctx.block("ad.pushed")
    b.cbranch(full, ovf, ok).set_weights([1, 1 << 20])
    b.position_at_end(ovf)
    record_overflow(ctx, s)
    b.branch(merge)
    b.position_at_end(ok)
    store(cnt)
    b.store(b.add(cnt, ir.Constant(I64, 1), flags=["nuw"]), s.count)
    b.branch(merge)
    b.position_at_end(merge)


def _push(ctx: FnContext, n):
    s, b = stack_of(ctx, n), ctx.b

    def store(cnt):
        v = _value_as(ctx, n.srcs[1], s.dtype)
        b.store(to_memory(b, v, s.dtype), entry_ptr(ctx, s.entries, cnt, s.dtype, s.lanes))
        if s.adjoints is not None:
            b.store(ctx.const(s.dtype, 0), entry_ptr(ctx, s.adjoints, cnt, s.dtype, s.lanes))
    emit_push(ctx, s, store)


def _pop(ctx: FnContext, n):
    s, b = stack_of(ctx, n), ctx.b
    cnt = b.load(s.count, typ=I64)
    nz = b.icmp_unsigned("!=", cnt, ir.Constant(I64, 0))
    b.store(b.sub(cnt, b.zext(nz, I64)), s.count)


def _read_top(ctx, s: _Stack, base, node_dtype):
    """Entry max(count-1, 0) of `base`; 0 when cap == 0 (the load then reads the stack's unused
    heap_int counter slot, which is 8 bytes and always in bounds, and the result is discarded)."""
    b = ctx.b
    p = entry_ptr(ctx, base, top_index(ctx, s), s.dtype, s.lanes)
    p = b.select(s.empty_cap, s.dummy, p)
    v = from_memory(b, b.load(p, typ=mem_type(s.dtype)), s.dtype)
    v = b.select(s.empty_cap, ctx.const(s.dtype, 0), v)
    return convert(ctx, v, s.dtype, node_dtype or s.dtype)


def require_heap_adjoints(s: _Stack, n):
    """Raise unless stack `s` keeps its adjoints in the heap (float stacks of kind 'heap')."""
    if s.adjoints is None:
        kind, why = (("primal", "its adjoints live in a local") if s.dtype.is_float else
                     ("int", "int stacks have no adjoints"))
        raise CodegenError(f"LLVM codegen: {n.op.name} on {kind} adstack "
                           f"{n.srcs[0].arg.name!r} ({s.dtype}): {why}")


def _load_top(ctx: FnContext, n):
    s = stack_of(ctx, n)
    return _read_top(ctx, s, s.entries, n.dtype)


def _load_top_adj(ctx: FnContext, n):
    s = stack_of(ctx, n)
    if s.dtype.is_float:
        require_heap_adjoints(s, n)
    else:
        # int stacks have no adjoints; reverse mode asks for them anyway when it undoes a STORE
        # to an int/bool local (the value is never used): they read as 0, like a fresh entry's
        return ctx.const(n.dtype or s.dtype, 0)
    return _read_top(ctx, s, s.adjoints, n.dtype)


def _acc_adj(ctx: FnContext, n):
    s, b = stack_of(ctx, n), ctx.b
    require_heap_adjoints(s, n)
    write, merge = ctx.block("ad.acc"), ctx.block("ad.accd")
    b.cbranch(s.empty_cap, merge, write)
    b.position_at_end(write)
    p = entry_ptr(ctx, s.adjoints, top_index(ctx, s), s.dtype, s.lanes)
    old = b.load(p, typ=ctx.reg_type(s.dtype))
    b.store(b.fadd(old, _value_as(ctx, n.srcs[1], s.dtype)), p)
    b.branch(merge)
    b.position_at_end(merge)


LOWER_ADSTACK = {
    Op.ADSTACK_ALLOCA: _alloca, Op.ADSTACK_PUSH: _push, Op.ADSTACK_POP: _pop,
    Op.ADSTACK_LOAD_TOP: _load_top, Op.ADSTACK_LOAD_TOP_ADJ: _load_top_adj,
    Op.ADSTACK_ACC_ADJ: _acc_adj,
}
