"""Vector math: our own implementations of the math table (`kernel_ir.mathlib`, the algorithms
the SPIR-V path runs too), emitted as LLVM IR.

    from llvm_codegen.vecmath import emit
    y = emit(builder, "sin", [x], x.type)      # float, double, <W x float>, <W x double>

Why: libm is a scalar call per element, which blocks vectorisation and costs a call in every
loop trip; these bodies are plain IR (range reduction + minimax polynomial, `llvm.fma`, bit
tricks) that LLVM inlines and vectorises. NaN, infinities and signed zeros follow numpy; no
fast-math flags. Each function is defined once per module and type as an internal function
`spirad.vm.<name>.<type>`, so callers see a single call instruction (no new blocks in the
caller): scalar bodies are `alwaysinline` (LLVM may then vectorise the caller's loop), vector
bodies `noinline` (one copy per module: inlining every call site of a 16-lane body doubled the
CPU compile time of a kernel with four sin/cos calls and its gradient, and measured no faster,
since the body's own latency dominates the call). Measured accuracy is
`kernel_ir.mathlib.BOUND_ULP` (tests assert it; the table is in docs/vecmath.md). Arguments the fast reduction does not cover (|x| > 2**17 for f32
sin/cos/tan, 2**26 for f64) are sent to libm per lane, in a cold block.
"""
from __future__ import annotations

from llvmlite import ir

from kernel_ir.mathlib import BOUND_ULP, F64_MISSING, FUNCTIONS  # noqa: F401  (one table)
from kernel_ir.mathlib import trig

from .emitter import Em, scalar_of, type_suffix


def supports(name: str, ty: ir.Type) -> bool:
    if name not in FUNCTIONS:
        return False
    return not (name in F64_MISSING and scalar_of(ty) == ir.DoubleType())


def function(module: ir.Module, name: str, ty: ir.Type) -> ir.Function:
    """The module's `spirad.vm.<name>.<type>` (defined on first use)."""
    if not supports(name, ty):
        raise ValueError(f"vecmath: no {name} for {ty}")
    arity, build = FUNCTIONS[name]
    sym = f"spirad.vm.{name}.{type_suffix(ty)}"
    fn = module.globals.get(sym)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(ty, [ty] * arity), sym)
    fn.linkage = "internal"
    fn.attributes.add("noinline" if isinstance(ty, ir.VectorType) else "alwaysinline")
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(build(Em(b, ty), *fn.args))
    return fn


def sincos_function(module: ir.Module, ty: ir.Type) -> ir.Function:
    """The module's `spirad.vm.sincos.<type>`: `{ty, ty}` = (sin x, cos x), one reduction.
    Marked readnone (its libm lanes are finite huge arguments, where libm sets no errno), so
    LLVM merges the calls a paired sin and cos at the same value make (`emit_sincos`)."""
    sym = f"spirad.vm.sincos.{type_suffix(ty)}"
    fn = module.globals.get(sym)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(ir.LiteralStructType([ty, ty]), [ty]), sym)
    fn.linkage = "internal"
    for a in ("noinline" if isinstance(ty, ir.VectorType) else "alwaysinline", "nounwind",
              "readnone"):
        fn.attributes.add(a)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    s, c = trig.sincos(Em(b, ty), fn.args[0])
    pair = b.insert_value(ir.Constant(fn.return_value.type, ir.Undefined), s, 0)
    b.ret(b.insert_value(pair, c, 1))
    return fn


def emit_sincos(builder: ir.IRBuilder, which: str, x, ty: ir.Type) -> ir.Value:
    """`which` ('sin' / 'cos') of x through the shared sincos body."""
    if which not in ("sin", "cos"):  # any other function of a paired value has its own body
        raise RuntimeError(f"vecmath: emit_sincos of {which!r}")
    pair = builder.call(sincos_function(builder.module, ty), [x])
    return builder.extract_value(pair, 0 if which == "sin" else 1)


def emit(builder: ir.IRBuilder, name: str, args, ty: ir.Type) -> ir.Value:
    """Call vecmath `name` on `args` (all of type `ty`) at the builder's position."""
    return builder.call(function(builder.module, name, ty), list(args))
