"""JIT-run `llvm_codegen.vecmath` functions over numpy arrays and measure errors in ulps.

`run(name, dtype, lanes, *inputs)` compiles `out[i] = name(in0[i], ...)` with the function
emitted for `<lanes x T>` (lanes=1: the scalar type) and runs it on the inputs; `sincos.sin` /
`sincos.cos` are the two results of the shared sincos body.
`ulp_error(got, ref, dtype)` is |got - ref| in ulps of dtype at ref (ref in higher precision);
NaN vs NaN and the correctly rounded value count 0; a wrong NaN / infinity or a zero of the
wrong sign counts inf.
"""
from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import ir

from llvm_codegen import vecmath
from llvm_codegen.cpu_runtime import _Target

_CACHE = {}
_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def _kernel(name, dtype, lanes):
    key = (name, np.dtype(dtype).name, lanes)
    if key in _CACHE:
        return _CACHE[key]
    st = ir.FloatType() if np.dtype(dtype) == np.float32 else ir.DoubleType()
    ty = ir.VectorType(st, lanes) if lanes > 1 else st
    arity = 1 if name.startswith("sincos.") else vecmath.FUNCTIONS[name][0]
    i64, ptr = ir.IntType(64), ir.PointerType()
    m = ir.Module(name=f"vm_{name}")
    sym = f"vmtest_{name}_{key[1]}_{lanes}"
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr, i64]), sym)
    out, a, b, n = fn.args
    entry, body, done = (fn.append_basic_block(s) for s in ("entry", "body", "done"))
    bb = ir.IRBuilder(entry)
    bb.cbranch(bb.icmp_signed(">", n, ir.Constant(i64, 0)), body, done)
    bb.position_at_end(body)
    i = bb.phi(i64)
    args = [bb.load(bb.gep(p, [i], source_etype=st), typ=ty, align=np.dtype(dtype).itemsize)
            for p in (a, b)[:arity]]
    if name.startswith("sincos."):
        y = vecmath.emit_sincos(bb, name.split(".")[1], args[0], ty)
    else:
        y = vecmath.emit(bb, name, args, ty)
    bb.store(y, bb.gep(out, [i], source_etype=st), align=np.dtype(dtype).itemsize)
    i2 = bb.add(i, ir.Constant(i64, lanes))
    i.add_incoming(ir.Constant(i64, 0), entry)
    i.add_incoming(i2, body)
    bb.cbranch(bb.icmp_signed("<", i2, n), body, done)
    bb.position_at_end(done)
    bb.ret_void()
    t = _Target.get()
    with t.compile_lock:
        tracker = t.link(t.emit_object(t.optimize(str(m))), [sym])
    f = _FN(tracker[sym])
    _CACHE[key] = (f, tracker)
    return _CACHE[key]


def run(name, dtype, lanes, *inputs):
    f, _ = _kernel(name, dtype, lanes)
    n = len(inputs[0])
    pad = -n % lanes
    xs = [np.ascontiguousarray(np.concatenate([np.asarray(x, dtype), np.ones(pad, dtype)]))
          for x in inputs]
    xs += [xs[0]] * (2 - len(xs))
    out = np.empty(n + pad, dtype)
    f(out.ctypes.data, xs[0].ctypes.data, xs[1].ctypes.data, n + pad)
    return out[:n]


def ulp_error(got, ref, dtype):
    """Per-element error in ulps of `dtype`; `ref` is float64 / longdouble."""
    dtype = np.dtype(dtype)
    got = np.asarray(got, dtype)
    p, tiny = (24, -149) if dtype == np.float32 else (53, -1074)
    with np.errstate(all="ignore"):
        ref_t = ref.astype(dtype)
        _, e = np.frexp(ref)  # |ref| in [2**(e-1), 2**e): one ulp is 2**(e-p)
        ulp = np.ldexp(np.ones_like(ref), np.maximum(e - p, tiny))
        err = np.abs(got.astype(ref.dtype) - ref) / ulp
    both_nan = np.isnan(got) & np.isnan(ref)
    # equal to the correctly rounded value (covers overflow to inf and underflow to 0)
    same = (got == ref_t) & (np.signbit(got) == np.signbit(ref_t))
    special = ~np.isfinite(ref_t) | ~np.isfinite(got)
    zero_sign = (got == 0) & (ref_t == 0) & (np.signbit(got) != np.signbit(ref_t))
    err = np.where((special & ~same) | zero_sign, np.inf, err)
    err = np.where(both_nan | same, 0.0, err)
    return err.astype(np.float64)
