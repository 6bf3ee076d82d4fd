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


def _pow_f64_inputs(rng):
    """Pairs for f64 pow: the specials' pairs and atan2's pairs, then |x| log-uniform from the
    smallest subnormal to max with y = t / log|x| for t over the whole result range (results
    near overflow, in the subnormals, underflowing), x near 1 with large |y|, y log-uniform from
    1e-300 to 1e300 of both signs, negative x with integer y (odd and even), extra specials."""
    x, y = _pairs(np.float64, rng)
    xs, ys = [x], [y]
    ax = 10.0 ** rng.uniform(-323.5, 308.2, N)
    with np.errstate(all="ignore"):
        t = rng.uniform(-746, 710, N)
        xs.append(ax * rng.choice([-1.0, 1.0], N))
        ys.append(np.where(np.log(ax) != 0, t / np.log(ax), 1.0))
        for lo, hi in ((-705, -703), (708, 709.8), (-745.2, -707)):  # edges of the result range
            t = rng.uniform(lo, hi, N // 8)
            a = ax[: N // 8]
            xs.append(a)
            ys.append(np.where(np.log(a) != 0, t / np.log(a), 1.0))
    near1 = 1 + rng.choice([-1.0, 1.0], N // 2) * 10.0 ** rng.uniform(-15.5, -1, N // 2)
    xs.append(near1)
    ys.append(rng.uniform(-700, 700, N // 2) / np.log(near1))
    xs.append(_mag(rng, np.float64, -300, 300, N // 2))
    ys.append(_mag(rng, np.float64, -300, 300, N // 2))
    xs.append(-np.abs(_mag(rng, np.float64, -3, 3, N // 4)))
    ys.append(np.round(rng.uniform(-60, 60, N // 4)))
    s = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0,
                  -3.0, 2.0 ** 53, -(2.0 ** 53), 2.0 ** 53 + 2, 2.0 ** 52 + 1, -(2.0 ** 52 + 1),
                  1e308, -1e308, 1e-308, 5e-324, -5e-324, 1 + 2.0 ** -52, 1 - 2.0 ** -53,
                  -1 - 2.0 ** -52, 0.1, 1e300, -1e300, 1e-300])
    a, b = np.meshgrid(s, s)
    xs.append(a.ravel())
    ys.append(b.ravel())
    return np.concatenate(xs), np.concatenate(ys)


def test_pow_f64_ulps():
    """Against numpy longdouble; the specials exactly numpy float64's (glibc / C99) results."""
    rng = np.random.default_rng(7)
    x, y = _pow_f64_inputs(rng)
    with np.errstate(all="ignore"):
        ref = np.power(x.astype(np.longdouble), y.astype(np.longdouble))
        ref64 = np.power(x, y)
    outs = [run("pow", np.float64, lanes, x, y) for lanes in LANES]
    for o in outs[1:]:
        assert np.array_equal(o.view(np.uint8), outs[0].view(np.uint8))
    got = outs[0]
    err = ulp_error(got, ref, np.float64)
    k = int(np.argmax(err))
    assert err[k] <= vecmath.BOUND_ULP["f64"]["pow"], (x[k], y[k], got[k], ref[k], err[k])
    # NaN, infinities and zeros (with their signs) exactly where numpy float64 gives them
    special = np.isnan(ref64) | np.isinf(ref64) | (ref64 == 0)
    assert special.sum() > 1000
    same = (np.isnan(got) & np.isnan(ref64)) | ((got == ref64) & (np.signbit(got) == np.signbit(ref64)))
    bad = np.where(special & ~same)[0]
    assert bad.size == 0, [(x[i], y[i], got[i], ref64[i]) for i in bad[:5]]
    assert not np.any((np.isnan(got) | np.isinf(got) | (got == 0)) & ~special & (err > 0))


def test_pow_is_offered_for_f32_and_f64():
    from llvmlite import ir
    assert vecmath.supports("pow", ir.DoubleType())
    assert vecmath.supports("pow", ir.VectorType(ir.DoubleType(), 8))
    assert vecmath.supports("pow", ir.VectorType(ir.FloatType(), 8))
    assert not vecmath.F64_MISSING


@pytest.mark.parametrize("dt", (np.float32, np.float64), ids=("float32", "float64"))
def test_sincos_is_sin_and_cos_bit_for_bit(dt):
    """The shared body (paired sin / cos in reverse passes) gives exactly sin's and cos's bits."""
    x = inputs("sin", dt, np.random.default_rng(5))
    for lanes in (1, 16):
        for which in ("sin", "cos"):
            got = run(f"sincos.{which}", dt, lanes, x)
            want = run(which, dt, lanes, x)
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (which, lanes)
