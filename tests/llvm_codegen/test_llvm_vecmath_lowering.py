"""The CPU codegen's math lowering modes (llvm_codegen.math_policy, SPIRAD_CPU_VECMATH):
auto (default) tags libm calls with vecmath vector variants that the loop vectoriser uses,
1 inlines the vecmath scalar bodies, 0 leaves libm alone. Every mode's results are within the
documented ulp bound of numpy (float64 / longdouble reference) on a vector body plus a tail
(where libm runs, glibc's own bound applies)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from kernel_ir.dtypes import f32, f64, i32
from kernel_ir.ops import Op
from llvm_codegen import math_policy, vecmath
from tests.llvm_codegen.harness import codegen_options, compile_and_load, run_llvm
from tests.llvm_codegen.kit import field, kernel, range_task
from vecmath_kit import ulp_error

N = 1000 + 7  # a vectorised body and a scalar remainder
GLIBC_ULP = 4.0  # glibc's documented worst case for these functions (tanhf measures 1.7 here)
CASES = [(Op.SIN, f32, "sin"), (Op.EXP, f64, "exp"), (Op.TANH, f32, "tanh"),
         (Op.ATAN2, f64, "atan2"), (Op.POW, f32, "pow"), (Op.ACOS, f64, "acos"),
         (Op.POW, f64, "pow")]
REF = {"sin": np.sin, "exp": np.exp, "tanh": np.tanh, "atan2": np.arctan2, "pow": np.power,
       "acos": np.arccos}


def _kernel(op, dt):
    A, B, OUT = field(0, dt, (N,)), field(1, dt, (N,)), field(2, dt, (N,))
    arity = 2 if op in (Op.ATAN2, Op.POW) else 1

    def body(b, i):
        srcs = [b.global_load(A, [i]), b.global_load(B, [i])][:arity]
        b.global_store(OUT, [i], b.emit(op, dt, srcs))

    return kernel(f"vm_{op.name}_{dt}", range_task(body, 0, N))


def _task_fn(llvm_ir: str) -> str:
    """The text of the (single) task function of a module."""
    start = llvm_ir.index("define void @")
    return llvm_ir[start:llvm_ir.index("\n}\n", start)]


def _inputs(name, dt):
    rng = np.random.default_rng(11)
    lo, hi = {"acos": (-1, 1), "pow": (0.01, 4)}.get(name, (-6, 6))
    a = rng.uniform(lo, hi, N).astype(dt.np)
    b = rng.uniform(-3, 3, N).astype(dt.np)
    a[:4] = [0.0, -0.0, np.nan, 0.5]
    return a, b


@pytest.mark.parametrize("flag", ["auto", "1", "0"])
@pytest.mark.parametrize("op,dt,name", CASES, ids=[c[2] + "-" + str(c[1]) for c in CASES])
def test_modes(monkeypatch, flag, op, dt, name):
    monkeypatch.setenv("SPIRAD_CPU_VECMATH", flag)
    monkeypatch.setenv("SPIRAD_CPU_SPMD", "0")  # the scalar task loop (SPMD: test_llvm_spmd.py)
    tl = _kernel(op, dt)
    loaded = compile_and_load(tl)
    _, prog, mod = loaded
    w = math_policy.lanes(dt.name, codegen_options().vector_bits)  # the target's (CI: AVX2 too)
    variant = f"spirad.vm.{name}.v{w}{dt.name}"
    if flag == "auto":
        assert "vector-function-abi-variant" in prog.llvm_ir
        assert re.search(rf'call <{w} x \w+> @"?{re.escape(variant)}"?\(', _task_fn(mod.optimized_ir)), \
            "the vectorised loop does not call the vecmath variant"
    elif flag == "1":
        assert "spirad.vm." in prog.llvm_ir and "vector-function-abi-variant" not in prog.llvm_ir
        body = _task_fn(prog.llvm_ir)
        assert f"llvm.{name}." not in body and f"@{name}f(" not in body and f"@{name}(" not in body
    else:
        assert "spirad.vm." not in prog.llvm_ir
    a, b = _inputs(name, dt)
    arrays = {("field", 0, False): a, ("field", 1, False): b,
              ("field", 2, False): np.zeros(N, dt.np)}
    got = run_llvm(tl, arrays, loaded=loaded)[("field", 2, False)]
    wide = np.float64 if dt == f32 else np.longdouble
    with np.errstate(all="ignore"):
        ref = REF[name](*(v.astype(wide) for v in ((a, b) if name in ("atan2", "pow") else (a,))))
    err = ulp_error(got, ref, dt.np)
    bound = vecmath.BOUND_ULP[dt.name][name]
    if flag != "1":  # libm runs (the scalar tail in auto): glibc is within 4 ulp, not always 1
        bound = max(bound, GLIBC_ULP)
    assert err.max() <= bound, (flag, float(err.max()))


def test_policy_modes():
    assert math_policy.mode("sin", "f32") == "variant"  # the default switch: "auto"
    assert math_policy.mode("pow", "f64", "auto") == "variant"  # f64 pow has a body (powd.py)
    assert math_policy.mode("floor", "f32") == "libm"
    assert math_policy.mode("sin", "f64", "1") == "inline"
    assert math_policy.mode("sin", "f32", "0") == "libm"
    assert math_policy.lanes("f32") == 2 * math_policy.lanes("f64") >= 4
    assert math_policy.mode("atan2", "f32") == "inline"  # SCALAR_INLINE: faster than glibc's
    assert math_policy.mode("atan2", "f64") == "variant"
    assert math_policy.mode("atan2", "f32", "0") == "libm"


def test_f32_atan2_inlined_by_default(monkeypatch):
    """Under the default switch a scalar f32 atan2 is our body, not glibc's `atan2f` (~350
    instructions a call through `__atan2f_finite` and `atanf`: a tenth of Genesis'
    `kernel_substep_post`), and within its documented bound of numpy, specials included."""
    monkeypatch.setenv("SPIRAD_CPU_SPMD", "0")
    tl = _kernel(Op.ATAN2, f32)
    loaded = compile_and_load(tl)
    _, prog, mod = loaded
    body = _task_fn(mod.optimized_ir)
    assert "@atan2f(" not in body and "spirad.vm.atan2" in prog.llvm_ir
    a, b = _inputs("atan2", f32)
    b[4:12] = [0.0, -0.0, np.inf, -np.inf, 0.0, -0.0, np.nan, 1e-30]
    a[4:12] = [np.inf, np.inf, 1.0, -1.0, 0.0, -0.0, 1.0, 3e38]
    arrays = {("field", 0, False): a, ("field", 1, False): b,
              ("field", 2, False): np.zeros(N, np.float32)}
    got = run_llvm(tl, arrays, loaded=loaded)[("field", 2, False)]
    with np.errstate(all="ignore"):
        ref = np.arctan2(a.astype(np.float64), b.astype(np.float64))
    assert ulp_error(got, ref, np.float32).max() <= vecmath.BOUND_ULP["f32"]["atan2"]
    assert np.array_equal(np.signbit(got[4:12]), np.signbit(ref[4:12].astype(np.float32)))


def test_variant_sites_are_innermost_loops_only():
    """Variants (each a compiled vector body) only where the vectoriser can use them."""
    from llvm_codegen.lower_math import variant_sites
    X, Y = field(0, f32, (N,)), field(1, f32, (N,))
    marks = {}

    def body(b, i):
        outer = b.emit(Op.SIN, f32, (b.global_load(X, [i]),))  # the task loop has a loop inside
        v = b.alloca(f32, "v")
        b.store(v, outer)
        with b.range_for(b.const(0, i32), b.const(4, i32)):
            inner = b.emit(Op.COS, f32, (b.load(v),))
            b.store(v, inner)
            marks["inner"] = inner
        marks["outer"] = outer
        b.global_store(Y, [i], b.load(v))

    sites = variant_sites(_range(body))
    assert marks["inner"] in sites and marks["outer"] not in sites
    flat = _kernel(Op.SIN, f32).tasks[0]
    assert any(n.op == Op.SIN for n in variant_sites(flat))


def _range(body):
    from tests.llvm_codegen.kit import range_task
    return range_task(body, 0, N)
