"""Leaves that read launch arguments, locals (ALLOCA / LOAD / STORE) and globals.

Globals are C-ordered arrays: the linear element offset is computed in i64 from i32 (or wider)
indices; field extents are constants, ndarray extents come from the argument buffer. A `u1`
occupies 4 bytes (0/1) in memory and is an `i1` in registers.
"""
from __future__ import annotations

from llvmlite import ir

from spirad.ir.dtypes import i32
from spirad.ir.nodes import GlobalRef
from spirad.ir.ops import Op

from .context import CodegenError, FnContext
from .lltypes import I32, I64, const, mem_type, reg_type
from .lower_ops import convert


def _arg(ctx: FnContext, n):
    off = ctx.abi.arg_offsets[n.arg]
    if off < 0:
        raise CodegenError(f"LLVM codegen: argument {n.arg} is not a scalar")
    spec = ctx.arg_specs[n.arg]
    dt = spec.dtype or n.dtype
    v = ctx.arg_load(off, mem_type(dt))  # u1 scalars: 4-byte 0/1, like memory
    if dt.is_bool:
        v = ctx.b.icmp_unsigned("!=", v, ir.Constant(I32, 0))
    return convert(ctx, v, dt, n.dtype)


def _ndarray_shape(ctx: FnContext, n):
    arg, axis = n.arg
    return convert(ctx, ctx.ndarray_extent(arg, axis), i32, n.dtype)


def _loop_index(ctx: FnContext, n):
    raise CodegenError("LLVM codegen: LOOP_INDEX read outside its loop")


# -- locals -----------------------------------------------------------------------------------
def _alloca(ctx: FnContext, n):
    slot = ctx.hoisted_alloca(reg_type(n.dtype), name=str(n.arg or "local"))
    ctx.b.store(const(n.dtype, 0), slot)  # ALLOCA re-zeroes its slot every time it executes
    return slot


def _load(ctx: FnContext, n):
    return ctx.b.load(ctx.value(n.srcs[0]), typ=reg_type(n.dtype))


def _store(ctx: FnContext, n):
    ctx.b.store(ctx.value(n.srcs[1]), ctx.value(n.srcs[0]))


# -- globals ----------------------------------------------------------------------------------
def _extent(ctx: FnContext, ref: GlobalRef, axis: int) -> ir.Value:
    if ref.shape is not None:
        return ir.Constant(I64, int(ref.shape[axis]))
    if ref.kind != "ndarray":
        raise CodegenError(f"LLVM codegen: {ref!r} has no shape for axis {axis}")
    return ctx.b.zext(ctx.ndarray_extent(ref.key, axis), I64)


def _index64(ctx: FnContext, node) -> ir.Value:
    v = ctx.value(node)
    dt = node.dtype
    if reg_type(dt).width == 64:
        return v
    return (ctx.b.sext if dt.kind == "i" else ctx.b.zext)(v, I64)


def element_ptr(ctx: FnContext, ref: GlobalRef, index_nodes) -> ir.Value:
    if len(index_nodes) != ref.ndim:
        raise CodegenError(f"LLVM codegen: {ref!r} has {ref.ndim} dims, indexed with "
                           f"{len(index_nodes)}")
    lin = ir.Constant(I64, 0)
    for axis, node in enumerate(index_nodes):
        idx = _index64(ctx, node)
        lin = idx if axis == 0 else ctx.b.add(ctx.b.mul(lin, _extent(ctx, ref, axis)), idx)
    return ctx.b.gep(ctx.buffer_ptr(ref), [lin], inbounds=True, source_etype=mem_type(ref.dtype))


def _global_load(ctx: FnContext, n):
    ref = n.arg
    v = ctx.b.load(element_ptr(ctx, ref, n.srcs), typ=mem_type(ref.dtype))
    if ref.dtype.is_bool:
        v = ctx.b.icmp_unsigned("!=", v, ir.Constant(I32, 0))
    return convert(ctx, v, ref.dtype, n.dtype)


def _to_memory(ctx: FnContext, v, dt):
    return ctx.b.zext(v, I32) if dt.is_bool else v


def _global_store(ctx: FnContext, n):
    ref = n.arg
    v = convert(ctx, ctx.value(n.srcs[-1]), n.srcs[-1].dtype, ref.dtype)
    ctx.b.store(_to_memory(ctx, v, ref.dtype), element_ptr(ctx, ref, n.srcs[:-1]))


def _atomic_add(ctx: FnContext, n):
    ref = n.arg
    dt = ref.dtype
    p = element_ptr(ctx, ref, n.srcs[:-1])
    v = convert(ctx, ctx.value(n.srcs[-1]), n.srcs[-1].dtype, dt)
    op = "fadd" if dt.is_float else ("or" if dt.is_bool else "add")  # bool(old + v) == old | v
    old = ctx.b.atomic_rmw(op, p, _to_memory(ctx, v, dt), "monotonic")
    if dt.is_bool:
        old = ctx.b.icmp_unsigned("!=", old, ir.Constant(I32, 0))
    return convert(ctx, old, dt, n.dtype)


LOWER_MEMORY = {
    Op.ARG: _arg, Op.NDARRAY_SHAPE: _ndarray_shape, Op.LOOP_INDEX: _loop_index,
    Op.ALLOCA: _alloca, Op.LOAD: _load, Op.STORE: _store,
    Op.GLOBAL_LOAD: _global_load, Op.GLOBAL_STORE: _global_store, Op.ATOMIC_ADD: _atomic_add,
}
