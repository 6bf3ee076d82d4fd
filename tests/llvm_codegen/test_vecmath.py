"""vecmath functions against numpy: max error in ulps per function and precision below the
documented bound (`vecmath.BOUND_ULP`), specials (NaN, +-inf, +-0, subnormals, huge arguments)
exactly as numpy gives them, and scalar / 8-lane / 16-lane bodies bit for bit equal.

References: numpy float64 for f32 results, numpy longdouble (80-bit on x86) for f64 results, so
the reference's own error is far below one ulp of the result type.
"""
import numpy as np
import pytest

from llvm_codegen import vecmath
from vecmath_kit import run, ulp_error

N = 100_000
WIDE = {np.float32: np.float64, np.float64: np.longdouble}
LANES = (1, 8, 16)
_P = {np.float32: "f32", np.float64: "f64"}


def _specials(dt):
    fi = np.finfo(dt)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, fi.max, -fi.max,
            fi.tiny, -fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal,
            fi.tiny / 3, -fi.tiny / 7, np.pi / 2, np.pi, 1e-10, -1e-10]
    return np.array(vals, dt)


def _mag(rng, dt, lo, hi, n):
    """log-uniform magnitudes in [10**lo, 10**hi), random signs."""
    x = 10.0 ** rng.uniform(lo, hi, n) * rng.choice([-1.0, 1.0], n)
    return x.astype(dt)


def inputs(name, dt, rng):
    """Per-function domains: typical ranges, log-uniform magnitudes over the whole type,
    subnormals and the specials."""
    emax = 38 if dt == np.float32 else 307
    emin = -45 if dt == np.float32 else -323
    parts = [_specials(dt), _mag(rng, dt, emin, emax, N // 4)]
    if name in ("sin", "cos", "tan"):
        parts += [rng.uniform(-10, 10, N).astype(dt), _mag(rng, dt, 1, 5, N // 4),
                  _mag(rng, dt, 5, 9, N // 8),  # around and beyond the libm threshold
                  (np.arange(1, 2001) * (np.pi / 2)).astype(dt)]  # near multiples of pi/2
    elif name == "exp":
        parts += [rng.uniform(-110, 90, N).astype(dt), rng.uniform(-750, 712, N // 4).astype(dt),
                  rng.uniform(-1, 1, N // 4).astype(dt)]
    elif name == "log":
        parts += [np.abs(_mag(rng, dt, emin, emax, N)), rng.uniform(0.5, 2, N // 2).astype(dt)]
    elif name == "tanh":
        parts += [rng.uniform(-3, 3, N).astype(dt), rng.uniform(-0.7, 0.7, N // 2).astype(dt)]
    elif name in ("asin", "acos"):
        parts += [rng.uniform(-1, 1, N).astype(dt), rng.uniform(-1.1, 1.1, N // 4).astype(dt),
                  (1 - 10.0 ** rng.uniform(-7, 0, N // 4)).astype(dt)]
    elif name == "atan":
        parts += [rng.uniform(-3, 3, N).astype(dt)]
    return np.concatenate(parts)


UNARY = [n for n, (arity, _) in vecmath.FUNCTIONS.items() if arity == 1]
CASES = [(n, dt) for dt in (np.float32, np.float64) for n in UNARY]


@pytest.mark.parametrize("name,dt", CASES, ids=[f"{n}-{d.__name__}" for n, d in CASES])
def test_unary_ulps(name, dt):
    rng = np.random.default_rng(17)
    x = inputs(name, dt, rng)
    with np.errstate(all="ignore"):
        ref = getattr(np, {"asin": "arcsin", "acos": "arccos", "atan": "arctan"}.get(name, name))(
            x.astype(WIDE[dt]))
    outs = [run(name, dt, lanes, x) for lanes in LANES]
    for o in outs[1:]:  # the same IR per lane: bit for bit
        assert np.array_equal(o.view(np.uint8), outs[0].view(np.uint8))
    err = ulp_error(outs[0], ref, dt)
    worst = int(np.argmax(err))
    bound = vecmath.BOUND_ULP[_P[dt]][name]
    assert err[worst] <= bound, (f"{name} {dt.__name__}: {err[worst]:.3f} ulp at x={x[worst]!r} "
                                 f"(got {outs[0][worst]!r}, want {ref[worst]!r}), bound {bound}")


def _pairs(dt, rng):
    s = _specials(dt)
    a, b = np.meshgrid(s, s)
    xs = [a.ravel(), rng.uniform(-10, 10, N).astype(dt), _mag(rng, dt, -30, 30, N // 2),
          np.array([-2.0, -2.0, -0.5, -8.0, -1.0], dt)]
    ys = [b.ravel(), rng.uniform(-10, 10, N).astype(dt), _mag(rng, dt, -30, 30, N // 2),
          np.array([3.0, -3.0, 2.0, 1.0 / 3, 1e30], dt)]
    return np.concatenate(xs), np.concatenate(ys)


def test_atan2_ulps():
    for dt in (np.float32, np.float64):
        rng = np.random.default_rng(3)
        y, x = _pairs(dt, rng)
        ref = np.arctan2(y.astype(WIDE[dt]), x.astype(WIDE[dt]))
        outs = [run("atan2", dt, lanes, y, x) for lanes in LANES]
        for o in outs[1:]:
            assert np.array_equal(o.view(np.uint8), outs[0].view(np.uint8))
        err = ulp_error(outs[0], ref, dt)
        k = int(np.argmax(err))
        assert err[k] <= vecmath.BOUND_ULP[_P[dt]]["atan2"], (dt, y[k], x[k], outs[0][k])


def test_pow_f32_ulps():
    rng = np.random.default_rng(5)
    x, y = _pairs(np.float32, rng)
    x = np.concatenate([x, np.abs(x[-N:])])
    y = np.concatenate([y, rng.uniform(-40, 40, N).astype(np.float32)])
    with np.errstate(all="ignore"):
        ref = np.power(x.astype(np.float64), y.astype(np.float64))
    outs = [run("pow", np.float32, lanes, x, y) for lanes in LANES]
    for o in outs[1:]:
        assert np.array_equal(o.view(np.uint8), outs[0].view(np.uint8))
    err = ulp_error(outs[0], ref, np.float32)
    k = int(np.argmax(err))
    assert err[k] <= vecmath.BOUND_ULP["f32"]["pow"], (x[k], y[k], outs[0][k], ref[k])


def test_f64_pow_is_not_offered():
    from llvmlite import ir
    assert not vecmath.supports("pow", ir.DoubleType())
    assert vecmath.supports("pow", ir.VectorType(ir.FloatType(), 8))
    with pytest.raises(ValueError):
        vecmath.function(ir.Module(), "pow", ir.DoubleType())


@pytest.mark.parametrize("dt", (np.float32, np.float64), ids=("float32", "float64"))
def test_sincos_is_sin_and_cos_bit_for_bit(dt):
    """The shared body (paired sin / cos in reverse passes) gives exactly sin's and cos's bits."""
    x = inputs("sin", dt, np.random.default_rng(5))
    for lanes in (1, 16):
        for which in ("sin", "cos"):
            got = run(f"sincos.{which}", dt, lanes, x)
            want = run(which, dt, lanes, x)
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (which, lanes)
