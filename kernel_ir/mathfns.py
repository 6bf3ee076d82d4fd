"""The float math functions of one operand, one record each (engineering 16: a new function is one
record here plus its `Op`, not edits across the tree).

    MathFn(op, name, reference, slope, uses_out=False, singular=False, expand=None,
           domain=(lo, hi), ulp=None, lowering="native")

- `op`: the IR node (`kernel_ir.ops`; it is in `UNARY` and `FLOAT_UNARY`). `name`: what users
  call — `sd.<name>` (`spirad.lang`), `math.<name>` inside kernels where Python's math module has
  it (`spirad.frontend.builtins` builds both from this table).
- `reference(x)`: the meaning, with numpy: the interpreter, constant folding, calls from Python.
- `slope(e, x, out)`: d out / d x built with `e` (`kernel_ir.builder.Emit`) from the primal `x`
  and the result `out` (`uses_out`: the slope reads `out`, so reverse mode recomputes it;
  `singular`: the slope can be inf or NaN, so a zero seed must give 0, not NaN). Both reverse
  and forward mode read it (`passes.derivatives`).
- `expand(e, x)`: for a function no code generator lowers itself, its algorithm in IR ops.
  `passes.expand_math` replaces the node before code generation, so every backend
  computes it the same way and `ulp` (max error in ulps per precision, measured against the
  reference by tests/language/test_math_functions.py on every arch) is its one accuracy table.
  The others are lowered by the code generators, as `lowering` says; `kernel_ir.mathlib`'s
  algorithms also serve the CPU's vector path (docs/vecmath.md has their accuracy).
- `lowering`: how the code generators lower it, and the one place that says so (their tables
  are built from these records: `spirv_codegen.lower_math.UNARY`, `llvm_codegen.lower_ops.UNARY`,
  `llvm_codegen.spmd`): "native" — GLSL.std.450 for f32 on Vulkan / Metal (our `mathlib` for
  f64), libm / LLVM intrinsics / the device libraries on the LLVM side; "mathlib" — our
  `kernel_ir.mathlib` algorithm at both widths on Vulkan / Metal (the drivers' own are not
  accurate enough), as "native" on the LLVM side; "expanded" — `expand`, before any code
  generator. sqrt, rsqrt and log's domain guards are the code generators' own rules.
- `domain`: where the generated tests draw inputs (values and gradients).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .dtypes import i32
from .ops import Op


@dataclass(frozen=True)
class MathFn:
    op: Op
    name: str
    reference: Callable
    slope: Callable
    uses_out: bool = False
    singular: bool = False  # the slope can be inf / NaN (log at 0): a zero seed then gives 0
    expand: Callable | None = None
    domain: tuple = (-2.0, 2.0)
    ulp: dict | None = None
    lowering: str = "native"  # "native" | "mathlib" | "expanded" (module docstring)

    def __post_init__(self):
        expanded = self.expand is not None
        if self.lowering not in LOWERINGS or (self.lowering == "expanded") != expanded:
            raise RuntimeError(f"MathFn {self.name}: lowering {self.lowering!r} with expand "
                               f"{self.expand!r} (an expanded function has `expand`, no other)")


LOWERINGS = ("native", "mathlib", "expanded")


def _one(e, x):
    return e.const(1.0, x.dtype)


def _asin_slope(e, x, out):
    return e.op(Op.RSQRT, e.sub(_one(e, x), e.mul(x, x)))


def _log1p(e, x):
    """log(1 + x) without losing x's digits near 0: for -1/2 < x < 1 the series
    log1p(x) = 2 atanh(s) = 2 s (1 + z/3 + z^2/5 + ...), s = x / (2 + x), z = s^2 < 1/9 (17
    terms reach 2^-55, 9 reach 2^-27); elsewhere log(1 + x), whose argument is exact for
    x <= -1/2 and rounded by at most 1/2 ulp of a result >= log 2 above. No compensated sums,
    so no code generator's reassociation (Mesa simplifies `(1 + x) - 1` to x) can change it."""
    dt = x.dtype
    terms = 17 if dt.bits == 64 else 9
    s = e.div(x, e.add(e.const(2.0, dt), x))
    z = e.mul(s, s)
    acc = e.const(1.0 / (2 * terms - 1), dt)
    for k in range(terms - 2, -1, -1):
        acc = e.add(e.mul(acc, z), e.const(1.0 / (2 * k + 1), dt))
    series = e.mul(e.add(s, s), acc)
    small = e.select(e.cmp(Op.CMP_GT, x, e.const(-0.5, dt)),
                     e.cmp(Op.CMP_LT, x, _one(e, x)), e.cmp(Op.CMP_NE, x, x))
    return e.select(small, series, e.op(Op.LOG, e.add(_one(e, x), x)))


def _expm1_series(e, x):
    """exp(x) - 1 = x (1 + x/2! + x^2/3! + ...) for |x| < 1, by Horner: 18 terms reach 2^-53,
    10 reach 2^-24 (the first term left out is below half an ulp of x)."""
    dt = x.dtype
    terms = 18 if dt.bits == 64 else 10
    fact = [1.0]
    for k in range(1, terms + 1):
        fact.append(fact[-1] * k)
    acc = e.const(1.0 / fact[terms], dt)
    for k in range(terms - 1, 0, -1):
        acc = e.add(e.mul(acc, x), e.const(1.0 / fact[k], dt))
    return e.mul(x, acc)


def _expm1(e, x):
    """exp(x) - 1 without losing x's digits near 0: for -1 < x < 1 the series x (1 + x/2 + ...);
    above, exp(x) = 2^n (1 + q) with n = round(x / ln 2), q = expm1(r) by the series on
    r = x - n ln 2 (Cody and Waite's two-part ln 2: n ln2_hi is exact), 2^n as products of
    selected constant powers of two (exact; two factors, so 2^128 in f32 overflows only the
    result) and 2^n q + (2^n - 1) while 2^n - 1 is exact — our own exp, as a backend's exp may
    lose |x| ulps (lavapipe's f32 exp is exp2(x log2 e)); at or below -1, exp(x) - 1, whose
    value is near -1, so the backend's exp error is below its ulp."""
    dt = x.dtype
    wide = dt.bits == 64
    c = (lambda v: e.const(v, dt))
    big, bits, mant = (710.0, 10, 53) if wide else (89.0, 7, 24)
    ln2_hi, ln2_lo = (6.93147180369123816490e-01, 1.90821492927058770002e-10) if wide else \
        (0.693359375, -2.12194440e-4)
    # x clamped to [0, big] (NaN -> big): the integer conversion below sees only finite values
    xp = e.select(e.cmp(Op.CMP_LT, x, c(big)),
                  e.select(e.cmp(Op.CMP_GT, x, c(0.0)), x, c(0.0)), c(big))
    t = e.op(Op.FLOOR, e.add(e.mul(xp, c(1.4426950408889634)), c(0.5)))
    r = e.sub(e.sub(xp, e.mul(t, c(ln2_hi))), e.mul(t, c(ln2_lo)))
    q = _expm1_series(e, r)
    n = e.cast(t, i32)
    half = e.op(Op.SHR, n, e.const(1, i32))
    p1 = c(1.0)
    for b in range(bits):  # 2^(n >> 1), one selected factor per bit
        on = e.cmp(Op.CMP_NE, e.op(Op.AND, half, e.const(1 << b, i32)), e.const(0, i32))
        p1 = e.mul(p1, e.select(on, c(2.0 ** (2 ** b)), c(1.0)))
    odd = e.cmp(Op.CMP_NE, e.op(Op.AND, n, e.const(1, i32)), e.const(0, i32))
    p2 = e.mul(p1, e.select(odd, c(2.0), c(1.0)))  # p1 p2 = 2^n
    p = e.mul(p1, p2)
    exact = e.add(e.mul(q, p), e.sub(p, c(1.0)))
    scaled = e.mul(e.mul(e.add(c(1.0), q), p1), p2)
    pos = e.select(e.cmp(Op.CMP_LE, t, c(float(mant))), exact, scaled)
    small = e.select(e.cmp(Op.CMP_GT, x, c(-1.0)), e.cmp(Op.CMP_LT, x, c(1.0)),
                     e.cmp(Op.CMP_NE, x, x))
    neg = e.sub(e.op(Op.EXP, x), c(1.0))
    return e.select(small, _expm1_series(e, x), e.select(e.cmp(Op.CMP_GT, x, c(0.0)), pos, neg))


MATH = tuple([
    MathFn(Op.SIN, "sin", np.sin, lambda e, x, o: e.op(Op.COS, x), domain=(-3.0, 3.0)),
    MathFn(Op.COS, "cos", np.cos, lambda e, x, o: e.neg(e.op(Op.SIN, x)), domain=(-3.0, 3.0)),
    MathFn(Op.TAN, "tan", np.tan, lambda e, x, o: e.add(_one(e, x), e.mul(o, o)), uses_out=True,
           domain=(-1.2, 1.2)),
    # lavapipe's f32 Tanh is off by ~5e-6 relative near 0, its Asin / Acos by ~4e-4: our own
    MathFn(Op.TANH, "tanh", np.tanh, lambda e, x, o: e.sub(_one(e, x), e.mul(o, o)),
           uses_out=True, lowering="mathlib"),
    MathFn(Op.ASIN, "asin", np.arcsin, _asin_slope, singular=True, domain=(-0.9, 0.9),
           lowering="mathlib"),
    MathFn(Op.ACOS, "acos", np.arccos, lambda e, x, o: e.neg(_asin_slope(e, x, o)),
           singular=True, domain=(-0.9, 0.9), lowering="mathlib"),
    MathFn(Op.EXP, "exp", np.exp, lambda e, x, o: o, uses_out=True),
    MathFn(Op.LOG, "log", np.log, lambda e, x, o: e.div(_one(e, x), x), singular=True,
           domain=(0.1, 4.0)),
    MathFn(Op.SQRT, "sqrt", np.sqrt, lambda e, x, o: e.div(e.const(0.5, x.dtype), o),
           uses_out=True, singular=True, domain=(0.1, 4.0)),
    MathFn(Op.RSQRT, "rsqrt", lambda x: type(x)(1) / np.sqrt(x),
           lambda e, x, o: e.mul(e.const(-0.5, x.dtype), e.div(o, x)), uses_out=True,
           singular=True, domain=(0.1, 4.0)),
    MathFn(Op.LOG1P, "log1p", np.log1p, lambda e, x, o: e.div(_one(e, x), e.add(_one(e, x), x)),
           singular=True, lowering="expanded",
           expand=_log1p, domain=(-0.9, 3.0), ulp={"f32": 2.5, "f64": 2.0}),  # above x = 1 and
    # below -1/2 the backend's own log decides (lavapipe's f32 log: 2.2 ulp)
    MathFn(Op.EXPM1, "expm1", np.expm1, lambda e, x, o: e.add(o, _one(e, x)), uses_out=True,
           lowering="expanded", expand=_expm1, domain=(-3.0, 3.0),
           ulp={"f32": 2.0, "f64": 1.5}),  # measured: 1.66, 1.0
])
BY_OP = {f.op: f for f in MATH}
BY_NAME = {f.name: f for f in MATH}
