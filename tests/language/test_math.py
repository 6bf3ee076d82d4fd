"""Math builtins, table-driven: (op, numpy reference, input domain, tolerance), in f32 and f64.

Inputs are drawn from each op's domain; the reference is numpy in float64 on the same (rounded)
inputs, so f32 results are held to a few ulps of f32 and f64 results to a few ulps of f64.
"""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs

N = 64
TOL = {"f32": (2e-6, 1e-6), "f64": (1e-13, 1e-14)}  # (rtol, atol)


# Operators as @sd.func, so a table entry can hand them to a kernel as a template argument.
@sd.func
def f_neg(x):
    return -x


@sd.func
def f_pow(a, b):
    return a ** b


@sd.func
def f_add(a, b):
    return a + b


@sd.func
def f_sub(a, b):
    return a - b


@sd.func
def f_mul(a, b):
    return a * b


@sd.func
def f_div(a, b):
    return a / b


@sd.func
def f_floordiv(a, b):
    return a // b


@sd.func
def f_mod(a, b):
    return a % b


@sd.func
def f_and(a, b):
    return a & b


@sd.func
def f_xor(a, b):
    return a ^ b


UNARY = [  # name, spirad fn, numpy fn, domain, tolerance scale
    ("sin", sd.sin, np.sin, (-6.0, 6.0), 2),
    ("cos", sd.cos, np.cos, (-6.0, 6.0), 2),
    ("tan", sd.tan, np.tan, (-1.3, 1.3), 4),
    ("tanh", sd.tanh, np.tanh, (-5.0, 5.0), 2),
    ("asin", sd.asin, np.arcsin, (-0.99, 0.99), 2),
    ("acos", sd.acos, np.arccos, (-0.99, 0.99), 2),
    ("exp", sd.exp, np.exp, (-10.0, 10.0), 2),
    ("log", sd.log, np.log, (0.01, 100.0), 2),
    ("sqrt", sd.sqrt, np.sqrt, (0.0, 100.0), 1),
    ("rsqrt", sd.rsqrt, lambda x: 1 / np.sqrt(x), (0.01, 100.0), 2),
    ("abs", sd.abs, np.abs, (-10.0, 10.0), 1),
    ("builtin_abs", abs, np.abs, (-10.0, 10.0), 1),
    ("floor", sd.floor, np.floor, (-10.0, 10.0), 1),
    ("neg", f_neg, np.negative, (-10.0, 10.0), 1),
]

BINARY = [
    ("atan2", sd.atan2, np.arctan2, (-3.0, 3.0), (-3.0, 3.0), 2),
    ("pow", sd.pow, np.power, (0.1, 4.0), (-3.0, 3.0), 4),
    ("pow_op", f_pow, np.power, (0.1, 4.0), (-3.0, 3.0), 4),
    ("min", sd.min, np.minimum, (-5.0, 5.0), (-5.0, 5.0), 1),
    ("max", sd.max, np.maximum, (-5.0, 5.0), (-5.0, 5.0), 1),
    ("builtin_min", min, np.minimum, (-5.0, 5.0), (-5.0, 5.0), 1),
    ("add", f_add, np.add, (-5.0, 5.0), (-5.0, 5.0), 1),
    ("sub", f_sub, np.subtract, (-5.0, 5.0), (-5.0, 5.0), 1),
    ("mul", f_mul, np.multiply, (-5.0, 5.0), (-5.0, 5.0), 1),
    ("div", f_div, np.divide, (-5.0, 5.0), (0.5, 5.0), 1),
    ("floordiv", f_floordiv, np.floor_divide, (-5.0, 5.0), (0.5, 5.0), 1),
    ("mod", f_mod, np.mod, (-5.0, 5.0), (0.5, 5.0), 4),
]


@sd.kernel
def unary_kernel(op: sd.template(), x: sd.types.ndarray(), y: sd.types.ndarray()):
    for i in x:
        y[i] = op(x[i])


@sd.kernel
def binary_kernel(op: sd.template(), a: sd.types.ndarray(), b: sd.types.ndarray(),
                  y: sd.types.ndarray()):
    for i in a:
        y[i] = op(a[i], b[i])


def _inputs(dt, lo, hi, seed):
    x = np.random.default_rng(seed).uniform(lo, hi, N).astype(dt.np)
    arr = sd.ndarray(dt, N)
    arr.from_numpy(x)
    return x, arr


def _check(dt, got, want, scale):
    rtol, atol = TOL[dt.name]
    np.testing.assert_allclose(got, want, rtol=rtol * scale, atol=atol * scale)


@test_archs(require=("f64",))
@pytest.mark.parametrize("dt", [sd.f32, sd.f64], ids=str)
@pytest.mark.parametrize("name,fn,ref,dom,scale", UNARY, ids=[u[0] for u in UNARY])
def test_unary(arch, dt, name, fn, ref, dom, scale):
    x, xa = _inputs(dt, *dom, seed=hash(name) % 1000)
    y = sd.ndarray(dt, N)
    unary_kernel(fn, xa, y)
    out = y.to_numpy()
    assert out.dtype == dt.np
    want = ref(x.astype(np.float64))
    if name == "floor":
        np.testing.assert_array_equal(out, want)
    else:
        _check(dt, out, want, scale)


@test_archs(require=("f64",))
@pytest.mark.parametrize("dt", [sd.f32, sd.f64], ids=str)
@pytest.mark.parametrize("name,fn,ref,da,db,scale", BINARY, ids=[b[0] for b in BINARY])
def test_binary(arch, dt, name, fn, ref, da, db, scale):
    a, aa = _inputs(dt, *da, seed=1)
    b, ba = _inputs(dt, *db, seed=2)
    y = sd.ndarray(dt, N)
    binary_kernel(fn, aa, ba, y)
    want = ref(a.astype(np.float64), b.astype(np.float64))
    if name in ("floordiv", "mod"):
        # an f32 quotient can round across an integer; compare where the f64 reference is clear
        q = a.astype(np.float64) / b
        clear = np.abs(q - np.round(q)) > 1e-4
        _check(dt, y.to_numpy()[clear], want[clear], scale)
    else:
        _check(dt, y.to_numpy(), want, scale)


INT_BINARY = [
    ("min", sd.min, np.minimum), ("max", sd.max, np.maximum),
    ("add", f_add, np.add), ("mul", f_mul, np.multiply),
    ("floordiv", f_floordiv, np.floor_divide), ("mod", f_mod, np.mod),
    ("and", f_and, np.bitwise_and), ("xor", f_xor, np.bitwise_xor),
]


@test_archs(require=("i64",))
@pytest.mark.parametrize("dt", [sd.i32, sd.i64, sd.u32], ids=str)
@pytest.mark.parametrize("name,fn,ref", INT_BINARY, ids=[b[0] for b in INT_BINARY])
def test_int_binary(arch, dt, name, fn, ref):
    rng = np.random.default_rng(5)
    lo = 0 if dt == sd.u32 else -1000
    a = rng.integers(lo, 1000, N).astype(dt.np)
    b = rng.integers(1, 50, N).astype(dt.np)
    if dt != sd.u32:
        b[::2] *= -1
    aa, ba, y = sd.ndarray(dt, N), sd.ndarray(dt, N), sd.ndarray(dt, N)
    aa.from_numpy(a)
    ba.from_numpy(b)
    binary_kernel(fn, aa, ba, y)
    np.testing.assert_array_equal(y.to_numpy(), ref(a, b))


@test_archs()
def test_int_abs_neg_pow(arch):
    @sd.kernel
    def k(x: sd.types.ndarray(), out: sd.types.ndarray()):
        for i in x:
            out[i, 0] = abs(x[i])
            out[i, 1] = -x[i]
            out[i, 2] = x[i] ** 3
            out[i, 3] = sd.pow(x[i], 2)
            out[i, 4] = ~x[i]

    xs = np.array([-5, -1, 0, 2, 7], np.int32)
    x, out = sd.ndarray(sd.i32, 5), sd.ndarray(sd.i32, (5, 5))
    x.from_numpy(xs)
    k(x, out)
    np.testing.assert_array_equal(out.to_numpy(), np.stack([np.abs(xs), -xs, xs ** 3, xs ** 2, ~xs], 1))


@test_archs()
def test_float_base_integer_exponent_within_a_few_ulp(arch):
    """x ** n for an f32 base and an integer exponent (a run-time i32, |n| < 32, both signs of
    x) is within 4 ulp of the exact power: SPIR-V takes it by repeated squaring, where GLSL's Pow
    (exp2(n * log2 x) on lavapipe) was 17 ulp off for 6.66 ** -6 (Taichi's
    test_pow_float_base_int_exp_32). pow(-0, odd < 0) is -inf, as C's pow."""
    @sd.kernel
    def k(x: sd.types.ndarray(), n: sd.types.ndarray(), out: sd.types.ndarray()):
        for i in x:
            out[i] = x[i] ** n[i]

    bases = np.array([-6.66, -2.0, -1.5, -0.5, 0.5, 1.5, 2.0, 6.66, 0.001, 37.5], np.float32)
    xs = np.repeat(bases, 63)
    ns = np.tile(np.arange(-31, 32, dtype=np.int32), len(bases))
    x, n, out = sd.ndarray(sd.f32, xs.size), sd.ndarray(sd.i32, xs.size), sd.ndarray(sd.f32, xs.size)
    x.from_numpy(xs)
    n.from_numpy(ns)
    k(x, n, out)
    got = out.to_numpy()
    with np.errstate(over="ignore"):
        want = (xs.astype(np.float64) ** ns).astype(np.float32)
    normal = (np.abs(want) >= np.finfo(np.float32).tiny) & np.isfinite(want)
    ulps = np.abs(got[normal] - want[normal]) / np.spacing(np.abs(want[normal]))
    assert ulps.max() <= 4, (xs[normal][ulps.argmax()], ns[normal][ulps.argmax()], ulps.max())
    zx, zn, zo = sd.ndarray(sd.f32, 4), sd.ndarray(sd.i32, 4), sd.ndarray(sd.f32, 4)
    zx.from_numpy(np.array([-0.0, -0.0, 0.0, -0.0], np.float32))
    zn.from_numpy(np.array([-1, -2, -3, 3], np.int32))
    k(zx, zn, zo)
    z = zo.to_numpy()
    assert list(z[:3]) == [-np.inf, np.inf, np.inf] and z[3] == 0 and np.signbit(z[3])


@test_archs()
def test_negative_zero_argument_is_not_zero(arch):
    """A launch with -0.0 after one with 0.0 passes -0.0 (the reused launch plan compared the
    arguments with ==, which holds for 0.0 and -0.0)."""
    @sd.kernel
    def inv(x: sd.f32) -> sd.f32:
        return 1.0 / x

    assert inv(0.0) == np.inf
    assert inv(-0.0) == -np.inf
    assert inv(0.0) == np.inf


@test_archs(require=("f64",))
@pytest.mark.parametrize("dt", [sd.f32, sd.f64], ids=str)
def test_frexp_exact(arch, dt):
    """sd.frexp (Taichi's ti.frexp) gives numpy's mantissa and exponent exactly, over magnitudes
    across the type's range, subnormals, zeros, inf and NaN; the mantissa's gradient is
    2 ** -exponent; in Python scope it is numpy's."""
    @sd.kernel
    def k(x: sd.types.ndarray(), m: sd.types.ndarray(), e: sd.types.ndarray()):
        for i in x:
            a, b = sd.frexp(x[i])
            m[i] = a
            e[i] = b

    info = np.finfo(dt.np)
    rng = np.random.default_rng(7)
    top = np.log10(info.max) * 0.99
    special = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, info.max, -info.max, info.tiny, -info.tiny * 0.25,
               np.inf, -np.inf, np.nan]
    xs = np.concatenate([rng.standard_normal(500) * 10.0 ** rng.uniform(-top, top, 500),
                         special]).astype(dt.np)
    x, m, e = sd.ndarray(dt, xs.size), sd.ndarray(dt, xs.size), sd.ndarray(sd.i32, xs.size)
    x.from_numpy(xs)
    k(x, m, e)
    want_m, want_e = np.frexp(xs)
    np.testing.assert_array_equal(m.to_numpy(), want_m)
    finite = np.isfinite(xs)
    np.testing.assert_array_equal(e.to_numpy()[finite], want_e[finite])

    @sd.kernel
    def mant(x: sd.types.ndarray(), out: sd.types.ndarray()):
        for i in x:
            a, _ = sd.frexp(x[i])
            out[i] += 3.0 * a

    gs = np.array([5.0, -0.3, 1e-3, 1024.0], dt.np)
    xg, og = sd.ndarray(dt, 4, needs_grad=True), sd.ndarray(dt, 4, needs_grad=True)
    xg.from_numpy(gs)
    og.grad.fill(1.0)
    mant.grad(xg, og)
    np.testing.assert_array_equal(xg.grad.to_numpy(), 3.0 * 2.0 ** -np.frexp(gs)[1])
    pm, pe = sd.frexp(1.4)
    assert (pm, pe) == (0.7, 1) and isinstance(pe, np.int32)


@test_archs()
def test_frexp_refuses_non_floats(arch):
    @sd.kernel
    def k(x: sd.i32) -> sd.i32:
        _, e = sd.frexp(x)
        return e

    with pytest.raises(sd.SpiradTypeError, match="frexp needs a float scalar, got i32"):
        k(3)


@test_archs()
def test_select_and_cast(arch):
    @sd.kernel
    def k(x: sd.types.ndarray(), out: sd.types.ndarray(), outi: sd.types.ndarray()):
        for i in x:
            v = x[i]
            out[i, 0] = sd.select(v > 0, v, -2 * v)
            out[i, 1] = sd.select(v > 0, 1, 0.5)
            outi[i, 0] = sd.cast(v, sd.i32)            # truncation toward zero
            outi[i, 1] = sd.cast(sd.floor(v), sd.i32)
            outi[i, 2] = int(v)
            outi[i, 3] = sd.i32(v * 2)
            out[i, 2] = float(sd.cast(v, sd.i32))
            out[i, 3] = sd.cast(sd.cast(v, sd.i64), sd.f64) + sd.cast(v > 0, sd.f32)
            outi[i, 4] = sd.cast(v, sd.u1)

    xs = np.array([-2.5, -0.5, 0.0, 0.75, 3.5], np.float32)
    x, out, outi = sd.ndarray(sd.f32, 5), sd.ndarray(sd.f32, (5, 4)), sd.ndarray(sd.i32, (5, 5))
    x.from_numpy(xs)
    k(x, out, outi)
    tr = np.trunc(xs)
    np.testing.assert_array_equal(out.to_numpy(), np.stack([np.where(xs > 0, xs, -2 * xs),
                                                            np.where(xs > 0, 1, 0.5), tr,
                                                            tr + (xs > 0)], 1))
    np.testing.assert_array_equal(outi.to_numpy(), np.stack([tr, np.floor(xs), tr, np.trunc(xs * 2),
                                                             xs != 0], 1).astype(np.int32))


@test_archs()
def test_int_args_promote_to_float_in_math(arch):
    @sd.kernel
    def k(out: sd.types.ndarray()):
        for i in out:
            out[i] = sd.sqrt(i) + sd.atan2(i, 2)

    out = sd.ndarray(sd.f32, 5)
    k(out)
    r = np.arange(5.0)
    np.testing.assert_allclose(out.to_numpy(), np.sqrt(r) + np.arctan2(r, 2), rtol=1e-6)


@test_archs()
def test_min_max_many_and_vectors(arch):
    @sd.kernel
    def k(out: sd.types.ndarray()):
        for i in range(1):
            out[0] = sd.min(3.0, 1.0, 2.0)
            out[1] = sd.max(1, 5, 2, 4)
            v = sd.Vector([4.0, -1.0, 2.0])
            out[2] = sd.max(v)
            out[3] = sd.min(v, 0.0)[2]
            out[4] = sd.sqrt(sd.Vector([4.0, 9.0]))[1]

    out = sd.ndarray(sd.f32, 5)
    k(out)
    np.testing.assert_array_equal(out.to_numpy(), [1, 5, 4, 0, 3])


@test_archs()
def test_compile_time_math_folds(arch):
    out = sd.field(sd.f64, shape=3)

    @sd.kernel
    def k():
        out[0] = sd.sin(1.0)     # evaluated by Python at compile time
        out[1] = sd.sqrt(2.0) * 2
        out[2] = abs(-3)

    k()
    np.testing.assert_allclose(out.to_numpy(), [np.sin(1.0), 2 * np.sqrt(2.0), 3], rtol=1e-15)
