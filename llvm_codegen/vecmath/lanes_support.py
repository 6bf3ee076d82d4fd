"""The cold libm fallback of the vector bodies, compiled once per process.

A vector body sends lanes its fast reduction does not cover (finite |x| > 2**17 for f32
sin / cos / tan) to libm. That fallback is a loop over the lanes calling the scalar libm
function; compiled into every module that uses a vector body it cost ~4 ms of LLVM time per
function and module (kernel b's forward and gradient modules: ~20 ms of their first call),
although it almost never runs. So it lives here, in one small module the CPU runtime JIT-links
once (`llvm_codegen.cpu_runtime`), and bodies only call it:

    void spirad_vm_lanes<arity>_<f32|f64>(ptr fn, ptr out, ptr a, ptr b, i64 mask, i32 n)

For each lane k < n whose bit is set in `mask`: out[k] = fn(a[k]) (arity 1) or fn(a[k], b[k])
(arity 2); other lanes of `out` are left as they are. `fn` is the libm function (`sinf`, ...).
"""
from __future__ import annotations

from llvmlite import ir

TYPES = {"f32": ir.FloatType(), "f64": ir.DoubleType()}


def symbol(arity: int, prec: str) -> str:
    return f"spirad_vm_lanes{arity}_{prec}"


def libm_type(arity: int, prec: str) -> ir.FunctionType:
    st = TYPES[prec]
    return ir.FunctionType(st, [st] * arity)


def helper_type(arity: int, prec: str) -> ir.FunctionType:
    p = ir.PointerType()
    return ir.FunctionType(ir.VoidType(), [ir.PointerType(libm_type(arity, prec)), p, p, p,
                                           ir.IntType(64), ir.IntType(32)])


def symbols() -> tuple:
    return tuple(symbol(a, p) for a in (1, 2) for p in TYPES)


def module_ir() -> str:
    """LLVM IR text of the helpers (no target triple: the runtime sets the host's)."""
    m = ir.Module(name="spirad_vm_lanes")
    i32, i64 = ir.IntType(32), ir.IntType(64)
    for prec, st in TYPES.items():
        for arity in (1, 2):
            f = ir.Function(m, helper_type(arity, prec), symbol(arity, prec))
            fnp, out, a, bb, mask, n = f.args
            entry, head, call, nxt, done = (f.append_basic_block(s) for s in
                                            ("entry", "head", "call", "next", "done"))
            b = ir.IRBuilder(entry)
            b.cbranch(b.icmp_signed(">", n, ir.Constant(i32, 0)), head, done)
            b.position_at_end(head)
            k = b.phi(i32)
            k.add_incoming(ir.Constant(i32, 0), entry)
            on = b.trunc(b.lshr(mask, b.zext(k, i64)), ir.IntType(1))
            b.cbranch(on, call, nxt)
            b.position_at_end(call)
            args = [b.load(b.gep(p, [k], source_etype=st), typ=st) for p in (a, bb)[:arity]]
            b.store(b.call(fnp, args), b.gep(out, [k], source_etype=st))
            b.branch(nxt)
            b.position_at_end(nxt)
            k2 = b.add(k, ir.Constant(i32, 1))
            k.add_incoming(k2, nxt)
            b.cbranch(b.icmp_signed("<", k2, n), head, done)
            b.position_at_end(done)
            b.ret_void()
    return str(m)
