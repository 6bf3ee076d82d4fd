"""The float math functions computed by their expansion (`kernel_ir.mathfns` records with
`expand`: log1p, ...) agree with their reference within the record's `ulp` bound on every arch,
in f32 and f64: over the record's domain, log-uniform magnitudes of both signs and the special
values (0, -0, the smallest normal, +-inf, NaN; NaN / inf / zero results must be the
reference's exactly). Gradients and forward mode of every record: tests/autodiff/test_grad_ops.py
and test_forward_mode.py. Adding a record adds its cases here."""
import numpy as np
import pytest

import spirad as sd
from kernel_ir.mathfns import MATH
from tests.support.archs import test_archs

EXPANDED = [f for f in MATH if f.expand is not None]
FP = {"f32": sd.f32, "f64": sd.f64}


def inputs(f, np_dt):
    rng = np.random.default_rng(3)
    lo, hi = f.domain
    info = np.finfo(np_dt)
    mags = np.exp(rng.uniform(np.log(info.tiny), np.log(info.max) * 0.99, 2000))
    special = [0.0, -0.0, info.tiny, -info.tiny, np.inf, -np.inf, np.nan, info.max, -info.max,
               lo, hi, info.eps, -info.eps]
    xs = np.concatenate([rng.uniform(lo, hi, 2000), mags, -mags, special])
    return xs.astype(np_dt)


def ulp_error(got, want64, np_dt):
    want = want64.astype(np_dt)
    both = np.isfinite(got) & np.isfinite(want)
    scale = np.spacing(np.abs(want).astype(np_dt)).astype(np.float64)
    err = np.zeros(got.shape)
    err[both] = np.abs(got[both].astype(np.float64) - want64[both]) / scale[both]
    return err, both


@pytest.mark.parametrize("prec", ["f32", "f64"])
@pytest.mark.parametrize("name", [f.name for f in EXPANDED])
@test_archs()
def test_expanded_function_accuracy(arch, name, prec):
    f = next(g for g in EXPANDED if g.name == name)
    dt = FP[prec]
    xs = inputs(f, dt.np)
    x = sd.ndarray(dt, xs.shape)
    y = sd.ndarray(dt, xs.shape)
    fn = getattr(sd, name)

    @sd.kernel
    def k(x: sd.types.ndarray(), y: sd.types.ndarray()):
        for i in x:
            y[i] = fn(x[i])

    x.from_numpy(xs)
    k(x, y)
    got = y.to_numpy()
    with np.errstate(all="ignore"):
        want64 = f.reference(xs.astype(np.longdouble)).astype(np.float64)
    err, both = ulp_error(got, want64, dt.np)
    want = want64.astype(dt.np)
    odd = ~both
    np.testing.assert_array_equal(got[odd], want[odd], err_msg="non-finite results")
    zero = both & (want == 0)
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]), "signed zeros")
    worst = int(np.argmax(err))
    assert err.max() <= f.ulp[prec], (f"{name} {prec}: {err.max():.2f} ulp at x = "
                                      f"{xs[worst]!r} (bound {f.ulp[prec]})")
