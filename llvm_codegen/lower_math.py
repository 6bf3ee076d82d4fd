"""Lowering rules for the math ops, per `math_policy.mode`: a libm / intrinsic call, that call
tagged with a `vecmath` vector variant (LLVM's vector-function ABI attribute), or the inlined
scalar `vecmath` body.

Only math ops in an innermost loop of a task without adstacks get variants (`variant_sites`).
A variant is `spirad.vm.<name>.v<W><T>` for the target's width W (math_policy.lanes), named on the
call as `"vector-function-abi-variant"="_ZGV_LLVM_N<W>v.._<callee>(<variant>)"`; the loop
vectoriser then calls it for W iterations at once. Variants are kept alive until the vectoriser
runs by `@llvm.compiler.used` (emitted by `emit_kept`), since nothing references them before.
"""
from __future__ import annotations

from llvmlite import ir

from . import math_policy
from .lltypes import PTR, reg_type


def vm_rule(name: str, libm_rule):
    """A lowering rule `(ctx, *args, dt)` for op `name` falling back to `libm_rule`."""
    def rule(ctx, *args):
        dt = args[-1]
        if ctx.lib.target.math != "libm":
            return libm_rule(ctx, *args)  # a GPU target: its device library, never vecmath
        mode = math_policy.mode(name, dt.name, ctx.options.vecmath)
        if mode == "inline":
            from . import vecmath
            return vecmath.emit(ctx.b, name, args[:-1], ctx.reg_type(dt))
        v = libm_rule(ctx, *args)
        if mode == "variant" and ctx.current in ctx.variant_sites:
            _tag_variant(ctx.lib, v, name, dt, len(args) - 1, ctx.options.vector_bits)
        return v
    return rule


def variant_sites(task) -> frozenset:
    """Math nodes whose loop LLVM's vectoriser can take: the nearest enclosing loop (a
    RANGE_FOR, WHILE or the task loop) has no loop inside it, and the task has no adstacks
    (their push / pop order keeps every loop scalar). Variants elsewhere would only cost
    compile time (each is a full vector body)."""
    from kernel_ir.ops import Op

    loops = (Op.RANGE_FOR, Op.WHILE)
    if task.kind != "range" or any(n.op.name.startswith("ADSTACK") for n in _walk(task.body)):
        return frozenset()
    out = set()

    def has_loop(block):
        return any(n.op in loops for n in _walk(block))

    def visit(block, innermost):
        for n in block.nodes:
            if n.op in loops:
                visit(n.blocks[0], not has_loop(n.blocks[0]))
            elif n.blocks:
                for b in n.blocks:
                    visit(b, innermost)
            elif innermost:
                out.add(n)
    visit(task.body, not has_loop(task.body))
    return frozenset(out)


def _walk(block):
    from kernel_ir.nodes import walk
    return walk(block)


def _tag_variant(lib, call: ir.CallInstr, name: str, dt, arity: int, bits=None):
    from . import vecmath

    w = math_policy.lanes(dt.name, bits)
    vf = vecmath.function(lib.module, name, ir.VectorType(reg_type(dt), w))
    if vf not in lib.kept:
        lib.kept.append(vf)
    attr = (f'"vector-function-abi-variant"="_ZGV_LLVM_N{w}{"v" * arity}_{call.callee.name}'
            f'({vf.name})"')
    # llvmlite validates call attributes against a fixed list; string attributes are plain
    # text in the IR, so they are added to the underlying set directly
    set.add(call.attributes, attr)
    if not call.callee.name.startswith("llvm."):
        call.attributes.add("readnone")  # a libm call: the vectoriser needs it memory-free


def emit_kept(lib):
    """`@llvm.compiler.used` holding the vector variants (call once, after all tasks)."""
    if not lib.kept:
        return
    arr = ir.ArrayType(PTR, len(lib.kept))
    g = ir.GlobalVariable(lib.module, arr, "llvm.compiler.used")
    g.linkage = "appending"
    g.section = "llvm.metadata"
    g.initializer = ir.Constant(arr, list(lib.kept))
