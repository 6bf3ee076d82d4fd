"""The SPIR-V path runs `kernel_ir.mathlib`'s algorithms (every f64 function; atan2 / asin /
acos / tanh at both widths) within the same ulp bounds as the CPU's vector math
(`kernel_ir.mathlib.BOUND_ULP`), on the device: lavapipe's f64 Fma is not fused, so this also
proves the emitter's exact products (`exact_fma`) and NoContraction keep the algorithms exact.
Specials (NaN, +-inf, +-0) must be numpy's exactly. sin / cos / tan are checked up to 2**26:
SPIR-V has no libm for the lanes past the fast reduction (the CPU's test covers those)."""
import numpy as np
import pytest

import spirad as sd
from kernel_ir.mathlib import BOUND_ULP
from tests.support.archs import SPIRV_ARCHS, test_archs

N = 20_000
F64 = ["sin", "cos", "tan", "exp", "log", "tanh", "asin", "acos", "atan2", "pow"]
BOTH = ["tanh", "asin", "acos", "atan2"]
CASES = [(n, "f64") for n in F64] + [(n, "f32") for n in BOTH]
REF = {"sin": np.sin, "cos": np.cos, "tan": np.tan, "exp": np.exp, "log": np.log,
       "tanh": np.tanh, "asin": np.arcsin, "acos": np.arccos, "atan2": np.arctan2,
       "pow": np.power}


def _inputs(name, np_dt):
    rng = np.random.default_rng(11)
    fi = np.finfo(np_dt)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0,
                        fi.tiny, -fi.tiny, 1e-10, -1e-10], np_dt)
    mags = np.exp(rng.uniform(np.log(fi.tiny), np.log(fi.max) * 0.99, N // 4))
    wide = np.concatenate([mags, -mags])
    typical = {"sin": (-10, 10), "cos": (-10, 10), "tan": (-10, 10), "exp": (-700, 700),
               "log": (0, 4), "tanh": (-3, 3), "asin": (-1.1, 1.1), "acos": (-1.1, 1.1),
               "atan2": (-3, 3), "pow": (-4, 4)}[name]
    x = np.concatenate([special, rng.uniform(*typical, N), wide]).astype(np_dt)
    if name in ("sin", "cos", "tan"):
        x = x[~(np.abs(x) > 2.0 ** 26)]
    if name in ("atan2", "pow"):
        y = np.concatenate([special[::-1], rng.uniform(-3, 3, N), rng.permutation(wide)])
        y = y.astype(np_dt)[:len(x)]
        if name == "pow":
            y[: N // 4] = np.round(y[: N // 4])  # integer exponents, negative bases
        return x, y
    return (x,)


@pytest.mark.parametrize("name,prec", CASES, ids=[f"{n}-{p}" for n, p in CASES])
@test_archs(archs=SPIRV_ARCHS)
def test_mathlib_on_spirv_within_the_cpu_bounds(arch, name, prec):
    dt = sd.f64 if prec == "f64" else sd.f32
    args = _inputs(name, dt.np)
    fn = getattr(sd, name)
    arrs = [sd.ndarray(dt, a.shape) for a in args]
    out = sd.ndarray(dt, args[0].shape)
    for a, v in zip(arrs, args):
        a.from_numpy(v)

    if len(args) == 1:
        @sd.kernel
        def k(x: sd.types.ndarray(), y: sd.types.ndarray()):
            for i in x:
                y[i] = fn(x[i])
        k(arrs[0], out)
    else:
        @sd.kernel
        def k2(a: sd.types.ndarray(), b: sd.types.ndarray(), y: sd.types.ndarray()):
            for i in a:
                y[i] = fn(a[i], b[i])
        k2(arrs[0], arrs[1], out)
    got = out.to_numpy()
    wide_t = np.float64 if prec == "f32" else np.longdouble
    with np.errstate(all="ignore"):
        want = REF[name](*(a.astype(wide_t) for a in args))
    want_t = want.astype(dt.np)
    finite = np.isfinite(want_t) & np.isfinite(got)
    np.testing.assert_array_equal(got[~finite], want_t[~finite], err_msg="NaN / inf results")
    scale = np.spacing(np.abs(want_t[finite])).astype(np.float64)
    err = np.abs(got[finite].astype(wide_t) - want[finite]).astype(np.float64) / scale
    worst = int(np.argmax(err)) if err.size else 0
    assert err.max() <= BOUND_ULP[prec][name], \
        (name, prec, float(err.max()), [a[finite][worst] for a in args])
