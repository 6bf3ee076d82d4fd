"""Every pure op on every dtype it accepts, LLVM against the reference interpreter."""
from __future__ import annotations

import numpy as np
import pytest

from tests.llvm_codegen.kit import check, field, kernel, range_task, serial_task
from kernel_ir.dtypes import ALL, f32, f64, i32, i64, u1, u32
from kernel_ir.ops import BINARY, COMPARE, FLOAT_UNARY, Op
from kernel_ir.mathfns import MATH

N = 96
RNG_SEED = 1234


def values(dt, rng, n=N, kind="any"):
    """Interesting inputs of `dt`: edge values first, then random ones."""
    if dt.is_bool:
        return rng.integers(0, 2, n).astype(np.uint32)
    if dt.is_float:
        special = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-3, 7.25, -7.25, 1e30, -1e30,
                   np.inf, -np.inf, np.nan, 2.0 ** -130]
        if kind == "unit":
            special = [0.0, -0.0, 1.0, -1.0, 0.5, -0.999, 0.25, np.nan]
            rnd = rng.uniform(-1, 1, n)
        elif kind == "pos":
            special = [0.0, 1.0, 0.5, 1e-3, 3.0, 1e30, np.inf, np.nan]
            rnd = rng.uniform(0, 100, n)
        else:
            rnd = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
        return np.concatenate([special, rnd])[:n].astype(dt.np)
    info = np.iinfo(dt.np)
    special = [0, 1, 2, 3, 7, 13, 100, info.max, info.min, info.max - 1, 123456789]
    if dt.is_signed:
        special += [-1, -2, -7, -13, -100, info.min + 1, -123456789]
    rnd = rng.integers(info.min, info.max, n, dtype=dt.np, endpoint=True)
    small = rng.integers(-50 if dt.is_signed else 0, 50, n).astype(dt.np)
    return np.concatenate([np.array(special, dt.np), small[: n // 3], rnd])[:n]


def operands(op, dt, rng):
    """(a, b) arrays for a binary op, avoiding the IR's undefined cases."""
    a, b = values(dt, rng), values(dt, rng)[::-1].copy()
    if dt.is_int and op in (Op.DIV, Op.FLOORDIV, Op.MOD):
        b[b == 0] = 3
    if dt.is_int and op in (Op.SHL, Op.SHR):
        b = rng.integers(0, dt.bits + 8, N).astype(dt.np)  # >= width included: defined here
    if dt.is_int and op == Op.POW:
        b = rng.integers(0, 70, N).astype(dt.np)
    if dt.is_float and op == Op.POW:
        a = np.abs(a)
    return a, b


INT_ONLY = {Op.AND, Op.OR, Op.XOR, Op.SHL, Op.SHR}
FLOAT_ONLY = {Op.ATAN2}


def binary_cases():
    for op in sorted(BINARY - COMPARE, key=lambda o: o.value):
        for dt in ALL:
            if op in INT_ONLY and dt.is_float or op in FLOAT_ONLY and not dt.is_float:
                continue
            if dt.is_bool and op in (Op.DIV, Op.FLOORDIV, Op.MOD, Op.SHL, Op.SHR):
                continue
            yield pytest.param(op, dt, id=f"{op.name}-{dt}")


def tol(op, dt):
    transcendental = {Op.POW, Op.ATAN2} | FLOAT_UNARY - {Op.SQRT, Op.FLOOR, Op.RSQRT}
    if dt.is_float and op in transcendental:
        return (2e-6, 1e-30) if dt == f32 else (1e-14, 1e-300)
    return (0.0, 0.0)


def elementwise(op, dt, out_dt, n_in):
    A, B = field(0, dt, (N,)), field(1, dt, (N,))
    OUT = field(2, out_dt, (N,))

    def body(b, i):
        srcs = [b.global_load(A, [i]), b.global_load(B, [i])][:n_in]
        b.global_store(OUT, [i], b.emit(op, out_dt, srcs))

    return kernel(f"k_{op.name}_{dt}", range_task(body, 0, N)), A, B, OUT


def _run(op, dt, out_dt, a, b, n_in):
    tl, A, B, OUT = elementwise(op, dt, out_dt, n_in)
    arrays = {("field", 0, False): a, ("field", 1, False): b,
              ("field", 2, False): np.zeros(N, out_dt.np)}
    rtol, atol = tol(op, dt)
    check(tl, arrays, rtol=rtol, atol=atol)


@pytest.mark.parametrize("op,dt", list(binary_cases()))
def test_binary(op, dt):
    rng = np.random.default_rng(RNG_SEED + op.value)
    a, b = operands(op, dt, rng)
    _run(op, dt, dt, a, b, 2)


@pytest.mark.parametrize("op", sorted(COMPARE, key=lambda o: o.value), ids=lambda o: o.name)
@pytest.mark.parametrize("dt", ALL, ids=str)
def test_compare(op, dt):
    rng = np.random.default_rng(RNG_SEED + op.value)
    a = values(dt, rng)
    b = np.where(rng.random(N) < 0.3, a, values(dt, rng)[::-1]).astype(a.dtype)
    _run(op, dt, u1, a, b, 2)


def unary_cases():
    # (math functions with an IR expansion never reach a code generator: passes.expand_math)
    expanded = {f.op for f in MATH if f.expand is not None}
    for op in sorted(({Op.NEG, Op.NOT, Op.BIT_NOT, Op.ABS} | FLOAT_UNARY) - expanded,
                     key=lambda o: o.value):
        for dt in ALL:
            if op in FLOAT_UNARY and not dt.is_float or op in (Op.NOT, Op.BIT_NOT) and dt.is_float:
                continue
            yield pytest.param(op, dt, id=f"{op.name}-{dt}")


@pytest.mark.parametrize("op,dt", list(unary_cases()))
def test_unary(op, dt):
    rng = np.random.default_rng(RNG_SEED + op.value)
    kind = {Op.ASIN: "unit", Op.ACOS: "unit", Op.LOG: "pos", Op.SQRT: "pos",
            Op.RSQRT: "pos"}.get(op, "any")
    a = values(dt, rng, kind=kind)
    _run(op, dt, dt, a, a, 1)


@pytest.mark.parametrize("src", ALL, ids=str)
@pytest.mark.parametrize("dst", ALL, ids=str)
def test_cast(src, dst):
    rng = np.random.default_rng(7)
    a = values(src, rng)
    if src.is_float and dst.is_int:
        a = np.where(np.abs(a) < 9e18, a, 12345.75).astype(src.np)  # below 2**63: defined
        a[:4] = [np.nan, np.inf, -np.inf, -3.99]
    _run(Op.CAST, src, dst, a, a, 1)


@pytest.mark.parametrize("dt", ALL, ids=str)
def test_select_and_const(dt):
    rng = np.random.default_rng(3)
    a, bvals = values(dt, rng), values(dt, rng)[::-1].copy()
    A, B, C = field(0, dt, (N,)), field(1, dt, (N,)), field(2, u1, (N,))
    OUT = field(3, dt, (N,))

    def body(b, i):
        s = b.select(b.global_load(C, [i]), b.global_load(A, [i]), b.global_load(B, [i]))
        k = b.const(1 if dt.is_bool else 5, dt)
        s = b.select(b.binary(Op.CMP_EQ, b.cast(i, dt), k), k, s)
        b.global_store(OUT, [i], s)

    arrays = {("field", 0, False): a, ("field", 1, False): bvals,
              ("field", 2, False): rng.integers(0, 2, N).astype(np.uint32),
              ("field", 3, False): np.zeros(N, dt.np)}
    check(kernel("sel", range_task(body, 0, N)), arrays)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_float_const_rounding_and_int_wrap():
    OUT32, OUT64, OUTI = field(0, f32, (4,)), field(1, f64, (4,)), field(2, i32, (4,))

    def body(b):
        for k, v in enumerate([0.1, 1e40, -1e-50, 3.4028235e38]):
            b.global_store(OUT32, [b.const(k, i32)], b.const(v, f32))
            b.global_store(OUT64, [b.const(k, i32)], b.const(v, f64))
        for k, v in enumerate([2**31, -2**31 - 1, 2**40 + 5, 7.9]):
            b.global_store(OUTI, [b.const(k, i32)], b.const(v, i32))

    arrays = {("field", 0, False): np.zeros(4, np.float32),
              ("field", 1, False): np.zeros(4, np.float64),
              ("field", 2, False): np.zeros(4, np.int32)}
    check(kernel("consts", serial_task(body)), arrays)


def test_mixed_width_index_types():
    """Globals indexed by i64 and u32 values: beyond the verifier's contract (i32 indices), but
    the lowering extends any int index to i64, so it works."""
    A = field(0, f64, (5, 7))
    OUT = field(1, f64, (5, 7))

    def body(b, i):
        j64 = b.cast(b.binary(Op.MOD, i, b.const(7, i32)), i64)
        r = b.cast(b.binary(Op.FLOORDIV, i, b.const(7, i32)), u32)
        b.global_store(OUT, [r, j64], b.binary(Op.MUL, b.global_load(A, [r, j64]),
                                                b.const(2.0, f64)))

    arrays = {("field", 0, False): np.arange(35, dtype=np.float64).reshape(5, 7),
              ("field", 1, False): np.zeros((5, 7))}
    check(kernel("mixidx", range_task(body, 0, 35)), arrays, verify=False)
