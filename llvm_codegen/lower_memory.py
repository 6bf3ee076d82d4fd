"""Leaves that read launch arguments, locals (ALLOCA / LOAD / STORE) and globals.

Globals are C-ordered arrays: the linear element offset is computed in i64 from i32 (or wider)
indices; field extents are constants, ndarray extents come from the argument buffer. A `u1`
occupies 4 bytes (0/1) in memory and is an `i1` in registers.

Bounds checks (`ctx.bounds_check`, from `compile_tasks(..., bounds_check=True)`): before a
global access every index, widened to i64 (sext / zext by its dtype), is compared *unsigned*
against its axis extent (so a negative index fails too); the access runs in a branch taken only
when all axes pass. Otherwise a cold, never-inlined helper records the error in the status
buffer (layout in `llvm_codegen.cpu_program`; first error wins; `status_helper` builds every such
recorder, the adstack overflow's too) and the access is skipped: a load or
an atomic add yields 0, a store writes nothing. Without bounds checks none of this is emitted.

The default checks (`ctx.oob_check`, from `compile_tasks(..., oob_check=True)`: every backend
without `sd.init(debug=True)` unless `check_bounds=False`): the same test and skip, but the cold
helper records STATUS_OUT_OF_BOUNDS with the task and binding only (`OOB_HELPER`), and accesses
that `kernel_ir.index_range` proves in range (`ctx.oob_safe`) are not checked at all. The SPMD
lowering (`spmd.py`) masks the failing lanes off instead of branching (`lane_ok`).
"""
from __future__ import annotations

from llvmlite import ir

from kernel_ir.abi import STATUS_INDEX_OUT_OF_RANGE, STATUS_OUT_OF_BOUNDS, StatusWord
from kernel_ir.dtypes import i32
from kernel_ir.nodes import GlobalRef, walk
from kernel_ir.ops import ATOMICS, GLOBAL_ACCESS, Op

from .context import CodegenError, FnContext
from .cpu_target import cold_call_convention
from .lltypes import I32, I64, PTR, VOID, mem_type
from .lower_ops import convert
from .splat import zeros

ACCESS_OPS = GLOBAL_ACCESS
BOUNDS_HELPER = "spirad.bounds.fail"
OOB_HELPER = "spirad.oob.fail"


def global_accesses(task) -> list:
    """The task's global accesses in `walk` order: position = the status' access-site word."""
    return [n for n in walk(task.body) if n.op in ACCESS_OPS]


def _arg(ctx: FnContext, n):
    off = ctx.abi.arg_offsets[n.arg]
    if off < 0:
        raise CodegenError(f"LLVM codegen: argument {n.arg} is not a scalar")
    spec = ctx.arg_specs[n.arg]
    dt = spec.dtype or n.dtype
    v = from_memory(ctx.b, ctx.arg_load(off, mem_type(dt)), dt)  # u1: 4-byte 0/1, like memory
    return convert(ctx, v, dt, n.dtype)


def _ndarray_shape(ctx: FnContext, n):
    arg, axis = n.arg
    return convert(ctx, ctx.ndarray_extent(arg, axis), i32, n.dtype)


def _loop_index(ctx: FnContext, n):
    raise CodegenError("LLVM codegen: LOOP_INDEX read outside its loop")


# -- locals -----------------------------------------------------------------------------------
def _alloca(ctx: FnContext, n):
    slot = ctx.hoisted_alloca(ctx.reg_type(n.dtype), name=str(n.arg or "local"))
    ctx.b.store(ctx.const(n.dtype, 0), slot)  # ALLOCA re-zeroes its slot every time it executes
    return slot


def _load(ctx: FnContext, n):
    return ctx.b.load(ctx.value(n.srcs[0]), typ=ctx.reg_type(n.dtype))


def _store(ctx: FnContext, n):
    ctx.b.store(ctx.value(n.srcs[1]), ctx.value(n.srcs[0]))


# -- globals ----------------------------------------------------------------------------------
def axis_extent(ctx: FnContext, ref: GlobalRef, axis: int) -> ir.Value:
    """Axis extent of a global as i64 (static for fields, from the arguments for ndarrays)."""
    if ref.shape is not None:
        return ir.Constant(I64, int(ref.shape[axis]))
    if ref.kind == "temp":
        return ir.Constant(I64, 1)
    if ref.kind != "ndarray":
        raise CodegenError(f"LLVM codegen: {ref!r} has no shape for axis {axis}")
    return ctx.b.zext(ctx.ndarray_extent(ref.key, axis), I64)


def index64(b: ir.IRBuilder, v: ir.Value, dt) -> ir.Value:
    """Index value `v` of dtype `dt` widened to i64 (sext / zext by its kind); lane-wise for a
    vector `v`."""
    t = v.type.element if isinstance(v.type, ir.VectorType) else v.type
    if t.width == 64:
        return v
    wide = ir.VectorType(I64, v.type.count) if isinstance(v.type, ir.VectorType) else I64
    return (b.sext if dt.kind == "i" else b.zext)(v, wide)


def _index64(ctx: FnContext, node) -> ir.Value:
    return index64(ctx.b, ctx.value(node), node.dtype)


def linear_index(ctx: FnContext, ref: GlobalRef, idx, dtypes=None) -> ir.Value:
    """The C-order element offset of the indices `idx` (one scalar per axis): i64 values, or
    values of `dtypes`, each widened (`index64`) as its axis is reached."""
    lin = ir.Constant(I64, 0)
    for axis, i in enumerate(idx):
        if dtypes is not None:
            i = index64(ctx.b, i, dtypes[axis])
        lin = i if axis == 0 else ctx.b.add(ctx.b.mul(lin, axis_extent(ctx, ref, axis)), i)
    return lin


def _check_arity(ref: GlobalRef, index_nodes):
    if len(index_nodes) != ref.ndim:
        raise CodegenError(f"LLVM codegen: {ref!r} has {ref.ndim} dims, indexed with "
                           f"{len(index_nodes)}")


def ptr_at(ctx: FnContext, ref: GlobalRef, idx) -> ir.Value:
    """Element pointer from the i64 indices `idx` (C order)."""
    lin = linear_index(ctx, ref, idx)
    return ctx.b.gep(ctx.buffer_ptr(ref), [lin], inbounds=True, source_etype=mem_type(ref.dtype))


def element_ptr(ctx: FnContext, ref: GlobalRef, index_nodes) -> ir.Value:
    _check_arity(ref, index_nodes)
    lin = linear_index(ctx, ref, [ctx.value(s) for s in index_nodes],
                       [s.dtype for s in index_nodes])
    return ctx.b.gep(ctx.buffer_ptr(ref), [lin], inbounds=True, source_etype=mem_type(ref.dtype))


def status_helper(lib, name: str, code: int, params: list, words) -> ir.Function:
    """`void @name(ptr status, *params)`, the one way LLVM code records an error in the status
    words (`kernel_ir.abi.StatusWord`): cmpxchg word CODE from 0 to `code`, and the winner (the
    first error wins) stores `words(b, args)` = [(StatusWord, i32 value), ...]. Internal,
    noinline, cold: the error path costs the hot code one call. On the CPU it preserves the
    caller's registers (`cpu_target.cold_call_convention`), so that call does not make the hot
    code keep its values on the stack."""
    sig = (VOID, [PTR] + list(params))
    if lib.has(name):
        return lib.declare(name, *sig)
    fn = lib.declare(name, *sig)
    fn.linkage = "internal"
    for a in ("noinline", "cold", "nounwind"):
        fn.attributes.add(a)
    if lib.target.arch == "cpu":  # CPU code (the host's or a cross target's); GPUs keep theirs
        fn.calling_convention = cold_call_convention(lib.target.triple)
    status = fn.args[0]
    entry, won, done = (fn.append_basic_block(s) for s in ("entry", "won", "done"))
    b = ir.IRBuilder(entry)
    word = b.gep(status, [ir.Constant(I64, StatusWord.CODE)], inbounds=True, source_etype=I32)
    res = b.cmpxchg(word, ir.Constant(I32, 0), ir.Constant(I32, code), lib.target.ordering(),
                    "monotonic")
    b.cbranch(b.extract_value(res, 1), won, done)
    b.position_at_end(won)
    for i, v in words(b, fn.args[1:]):
        b.store(v, b.gep(status, [ir.Constant(I64, i)], inbounds=True, source_etype=I32))
    b.branch(done)
    b.position_at_end(done)
    b.ret_void()
    return fn


def _bounds_words(b, args):
    task, k, axis, value, extent, site = args
    hi = b.trunc(b.lshr(value, ir.Constant(I64, 32)), I32)
    W = StatusWord
    return ((W.TASK, task), (W.AUX, k), (W.VALUE_LO, b.trunc(value, I32)), (W.AXIS, axis),
            (W.EXTENT, b.trunc(extent, I32)), (W.VALUE_HI, hi), (W.SITE, site))


def _bounds_helper(ctx: FnContext) -> ir.Function:
    """`void spirad.bounds.fail(ptr status, i32 task, i32 k, i32 axis, i64 value, i64 extent,
    i32 site)`: STATUS_INDEX_OUT_OF_RANGE with words 1..7 (layout in `llvm_codegen.cpu_program`)."""
    return status_helper(ctx.lib, BOUNDS_HELPER, STATUS_INDEX_OUT_OF_RANGE,
                         [I32, I32, I32, I64, I64, I32], _bounds_words)


def _oob_words(b, args):
    task, k = args
    return ((StatusWord.TASK, task), (StatusWord.AUX, k))


def oob_helper(ctx: FnContext) -> ir.Function:
    """`void spirad.oob.fail(ptr status, i32 task, i32 k)`: STATUS_OUT_OF_BOUNDS (the default
    check: task and binding only)."""
    return status_helper(ctx.lib, OOB_HELPER, STATUS_OUT_OF_BOUNDS, [I32, I32], _oob_words)


def set_oob_check(ctx: FnContext, task) -> None:
    """The default checks in this task, less the accesses proven in range."""
    from kernel_ir.index_range import in_range_accesses
    ctx.oob_check = True
    ctx.oob_safe = in_range_accesses(task)


def oob_checked(ctx: FnContext, n, index_nodes) -> bool:
    """Does access `n` get the default check (not debug, not proven in range)?"""
    return ctx.oob_check and bool(index_nodes) and n not in ctx.oob_safe


def _access(ctx: FnContext, n, index_nodes, access):
    """`access(element pointer)` -> value or None, behind a bounds check when enabled (see the
    module docstring). Returns the value (0 where the check failed)."""
    ref = n.arg
    cheap = not ctx.bounds_check and oob_checked(ctx, n, index_nodes)
    if not (ctx.bounds_check or cheap) or not index_nodes:
        return access(element_ptr(ctx, ref, index_nodes))  # exactly the unchecked code
    _check_arity(ref, index_nodes)
    idx = [_index64(ctx, node) for node in index_nodes]
    b = ctx.b
    ext = [axis_extent(ctx, ref, axis) for axis in range(len(idx))]
    oks = [b.icmp_unsigned("<", i, e) for i, e in zip(idx, ext)]
    ok = oks[0]
    for o in oks[1:]:
        ok = b.and_(ok, o)
    body, fail, merge = ctx.block("bc.ok"), ctx.block("bc.fail"), ctx.block("bc.done")
    b.cbranch(ok, body, fail).set_weights([1 << 20, 1])
    b.position_at_end(fail)
    if cheap:
        b.call(oob_helper(ctx), [ctx.status_ptr(), ir.Constant(I32, ctx.task_index),
                                 ir.Constant(I32, ctx.abi.binding_index(ref))])
        return _access_tail(ctx, ref, idx, access, fail, merge, body)
    axis, val, extent = ir.Constant(I32, len(idx) - 1), idx[-1], ext[-1]
    for a in range(len(idx) - 2, -1, -1):  # the first failing axis
        axis = b.select(oks[a], axis, ir.Constant(I32, a))
        val = b.select(oks[a], val, idx[a])
        extent = b.select(oks[a], extent, ext[a])
    b.call(_bounds_helper(ctx), [ctx.status_ptr(), ir.Constant(I32, ctx.task_index),
                                 ir.Constant(I32, ctx.abi.binding_index(ref)), axis, val, extent,
                                 ir.Constant(I32, ctx.access_sites.get(n, 0))])
    return _access_tail(ctx, ref, idx, access, fail, merge, body)


def _access_tail(ctx, ref, idx, access, fail, merge, body):
    """The checked access of `_access`: from the end of the fail block on."""
    b = ctx.b
    b.branch(merge)
    b.position_at_end(body)
    v = access(ptr_at(ctx, ref, idx))
    end = b.block
    b.branch(merge)
    b.position_at_end(merge)
    if v is None:
        return None
    phi = b.phi(v.type)
    phi.add_incoming(v, end)
    zero = 0.0 if isinstance(v.type, (ir.FloatType, ir.DoubleType)) else 0
    phi.add_incoming(ir.Constant(v.type, zero), fail)
    return phi


def _global_load(ctx: FnContext, n):
    ref = n.arg

    def load(p):
        v = from_memory(ctx.b, ctx.b.load(p, typ=mem_type(ref.dtype)), ref.dtype)
        return convert(ctx, v, ref.dtype, n.dtype)
    return _access(ctx, n, n.srcs, load)


def to_memory(b: ir.IRBuilder, v, dt):
    """A register value as memory holds it: a bool (i1, or <W x i1>) as a 0/1 i32."""
    if not dt.is_bool:
        return v
    return b.zext(v, ir.VectorType(I32, v.type.count) if isinstance(v.type, ir.VectorType) else I32)


def from_memory(b: ir.IRBuilder, v, dt):
    """A value loaded from memory as a register: a 0/1 i32 bool (or <W x i32>) as i1."""
    if not dt.is_bool:
        return v
    vec = isinstance(v.type, ir.VectorType)
    return b.icmp_unsigned("!=", v, zeros(v.type) if vec else ir.Constant(v.type, 0))


def _global_store(ctx: FnContext, n):
    ref = n.arg
    v = convert(ctx, ctx.value(n.srcs[-1]), n.srcs[-1].dtype, ref.dtype)
    v = to_memory(ctx.b, v, ref.dtype)

    def store(p):
        ctx.b.store(v, p)
    _access(ctx, n, n.srcs[:-1], store)


def rmw_op(op, dt) -> str:
    """The `atomicrmw` operation of an atomic op on `dt` (u1 is a 0/1 i32 in memory:
    bool(old + v) == old | v)."""
    if op == Op.ATOMIC_ADD:
        return "fadd" if dt.is_float else ("or" if dt.is_bool else "add")
    if op in (Op.ATOMIC_MIN, Op.ATOMIC_MAX):
        name = "min" if op == Op.ATOMIC_MIN else "max"
        return ("f" + name) if dt.is_float else (name if dt.kind == "i" else "u" + name)
    return {Op.ATOMIC_AND: "and", Op.ATOMIC_OR: "or", Op.ATOMIC_XOR: "xor",
            Op.ATOMIC_XCHG: "xchg", Op.ATOMIC_MUL: "mul"}[op]


def atomic_update(ctx: FnContext, op: str, p, v, dt, order, mask: int = 0):
    """`atomicrmw op` of `v` (memory form) at `p`; returns the old value (memory form). "mul"
    (Taichi's atomic_mul) has no atomicrmw: a compare-and-swap loop on the element's bits. A
    `mask` (GlobalRef.mask: a bit-field of an unsigned word) is a compare-and-swap loop too:
    only the masked bits of the combined value replace the word's."""
    b = ctx.b
    if op != "mul" and not mask:
        return b.atomic_rmw(op, p, v, order)
    mt = mem_type(dt)
    fl = dt.is_float
    it = (I64 if isinstance(mt, ir.DoubleType) else I32) if fl else mt
    pi = b.bitcast(p, it.as_pointer()) if fl else p
    start = b.load_atomic(pi, order, dt.bits // 8, typ=it)
    pre, head, done = b.block, ctx.block("atom.mul.cas"), ctx.block("atom.mul.done")
    b.branch(head)
    b.position_at_end(head)
    cur = b.phi(it)
    cur.add_incoming(start, pre)
    if mask:
        new = {"add": lambda: b.add(cur, v), "xchg": lambda: v}[op]()
        keep = ir.Constant(it, ~mask & ((1 << dt.bits) - 1))
        new = b.or_(b.and_(cur, keep), b.and_(new, ir.Constant(it, mask)))
    else:
        new = b.bitcast(b.fmul(b.bitcast(cur, mt), v), it) if fl else b.mul(cur, v)
    # the syncscope (GPU targets) is written once, before both orderings
    pair = b.cmpxchg(pi, cur, new, order, order.split()[-1])
    cur.add_incoming(b.extract_value(pair, 0), head)
    b.cbranch(b.extract_value(pair, 1), done, head)
    b.position_at_end(done)
    return b.bitcast(cur, mt) if fl else cur


def _atomic(ctx: FnContext, n):
    ref = n.arg
    dt = ref.dtype
    op = rmw_op(n.op, dt)

    def rmw(p):
        v = convert(ctx, ctx.value(n.srcs[-1]), n.srcs[-1].dtype, dt)
        target = ctx.lib.target
        old = atomic_update(ctx, op, p, to_memory(ctx.b, v, dt), dt, target.ordering(), ref.mask)
        if op == "fadd" and target.fadd_metadata:  # AMDGPU: native float atomic, not a CAS loop
            for md in ("amdgpu.no.fine.grained.memory", "amdgpu.ignore.denormal.mode"):
                old.set_metadata(md, ctx.lib.module.add_metadata([]))
        return convert(ctx, from_memory(ctx.b, old, dt), dt, n.dtype)
    return _access(ctx, n, n.srcs[:-1], rmw)


LOWER_MEMORY = {
    Op.ARG: _arg, Op.NDARRAY_SHAPE: _ndarray_shape, Op.LOOP_INDEX: _loop_index,
    Op.ALLOCA: _alloca, Op.LOAD: _load, Op.STORE: _store,
    Op.GLOBAL_LOAD: _global_load, Op.GLOBAL_STORE: _global_store, **{op: _atomic for op in ATOMICS},
}
