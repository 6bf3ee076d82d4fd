"""Helpers shared by the reverse-mode tests: float64 central differences and tolerances.

The oracle is always a numpy float64 reference of the kernel's forward computation; gradients
are checked against central differences of `sum(w * reference(x))` for random output weights w.
"""
from __future__ import annotations

from dataclasses import dataclass, field as dc_field

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, exactly, test_archs

# (forward rtol, forward atol, gradient rtol, gradient atol) per float type
TOL = {
    "f64": (1e-10, 1e-12, 1e-6, 1e-8),
    "f32": (2e-5, 2e-5, 3e-3, 3e-4),
}

FP = {"f32": sd.f32, "f64": sd.f64}


def central_diff(ref, xs, w, eps=1e-6):
    """d/dx of sum(w * ref(x)) at xs, by float64 central differences (any shape of xs)."""
    xs = np.asarray(xs, np.float64)
    flat = xs.reshape(-1)
    out = np.zeros_like(flat)
    for k in range(flat.size):
        e = np.zeros_like(flat)
        e[k] = eps
        hi = np.sum(w * np.asarray(ref((flat + e).reshape(xs.shape)), np.float64))
        lo = np.sum(w * np.asarray(ref((flat - e).reshape(xs.shape)), np.float64))
        out[k] = (hi - lo) / (2 * eps)
    return out.reshape(xs.shape)


def check(fp, fwd, want_fwd, grad, want_grad):
    rt, at, grt, gat = TOL[fp]
    np.testing.assert_allclose(fwd, want_fwd, rtol=rt, atol=at, err_msg="forward")
    np.testing.assert_allclose(grad, want_grad, rtol=grt, atol=gat, err_msg="gradient")


def weights(shape, seed=0):
    return np.random.default_rng(seed).uniform(0.5, 1.5, shape)


def arr(dtype, data, needs_grad=False):
    data = np.asarray(data)
    a = sd.ndarray(dtype, data.shape, needs_grad=needs_grad)
    a.from_numpy(data.astype(dtype.np))
    return a


X5 = np.array([0.13, 0.27, 0.41, 0.58, 0.72])


@dataclass
class Case:
    """One table row: `kernel(x, *outs, *extra)` and its float64 reference
    `ref(x, *extra_np) -> list of outputs` (`ref_extra` replaces extra_np when given)."""
    kernel: object
    ref: object
    x: np.ndarray = dc_field(default_factory=lambda: X5.copy())
    outs: tuple = (5,)               # output shapes
    extra: tuple = ()                # scalars, or (kind, array): kind "i32" / "fp" ndarray,
                                     # "field_i32" / "field_fp" field
    interp: bool = False             # also run on the interpreter (f64)
    ref_extra: tuple = None
    xfail: str = ""                  # a known bug (reported): strict xfail
    accumulated: tuple = ()          # outputs the kernel updates with `+=` (their .grad is kept);
                                     # every other output is stored (`y[i] = ...`): its .grad is
                                     # consumed by the grad launch (Taichi's store rule)
    unstored: tuple = ()             # (output, flat index) of elements the kernel never writes:
                                     # their seed stays in .grad


def extra_args(extra, dt):
    out, np_vals = [], []
    for e in extra:
        if isinstance(e, tuple):
            kind, data = e
            data = np.asarray(data)
            if kind == "i32":
                out.append(arr(sd.i32, data))
            elif kind == "fp":
                out.append(arr(dt, data))
            elif kind == "field_i32":
                f = sd.field(sd.i32, shape=data.shape)
                f.from_numpy(data.astype(np.int32))
                out.append(f)
            elif kind == "field_fp":
                f = sd.field(dt, shape=data.shape)
                f.from_numpy(data.astype(dt.np))
                out.append(f)
            else:
                raise ValueError(kind)
            np_vals.append(data)
        else:
            out.append(e)
            np_vals.append(e)
    return out, np_vals


def run_case(case: Case, fp: str, request=None):
    if case.xfail and request is not None:
        request.applymarker(pytest.mark.xfail(strict=True, reason=case.xfail))
    dt = FP[fp]
    x = arr(dt, case.x, needs_grad=True)
    outs = [sd.ndarray(dt, s, needs_grad=True) for s in case.outs]
    extra, extra_np = extra_args(case.extra, dt)
    if case.ref_extra is not None:
        extra_np = list(case.ref_extra)
    args = (x, *outs, *extra)
    case.kernel(*args)
    fwd = [o.to_numpy() for o in outs]
    ws = [weights(o.shape, seed=k) for k, o in enumerate(outs)]
    for o, w in zip(outs, ws):
        o.grad.from_numpy(w.astype(dt.np))
    case.kernel.grad(*args)
    grad = x.grad.to_numpy()

    def ref(xv):
        return np.concatenate([np.ravel(r) for r in case.ref(xv, *extra_np)])

    w_all = np.concatenate([np.ravel(w) for w in ws])
    xs = case.x.astype(dt.np).astype(np.float64)  # the inputs the kernel actually saw
    want = central_diff(ref, xs, w_all)
    check(fp, np.concatenate([np.ravel(f) for f in fwd]), ref(xs), grad, want)
    check_seeds_consumed(case, outs, ws, dt)
    if not case.accumulated:
        # every seed was consumed: a second grad launch without new seeds adds nothing
        case.kernel.grad(*args)
        np.testing.assert_array_equal(x.grad.to_numpy(), grad, err_msg="second grad launch")


def case_tests(cases: dict, f64_archs=exactly("interp") | EVERY_ARCH, interp_subset=True):
    """The f64 and f32 gradient tests over a table of `Case`s, written once for every table.

    Bind them to test names in the module: `test_loops_f64, test_loops_f32 = case_tests(CASES)`
    (pytest collects a test by the name it has in the module). The f64 test runs on `f64_archs`;
    with `interp_subset`, interp runs only the cases marked `interp=True` (the interpreter is slow).
    """
    @pytest.mark.parametrize("name", sorted(cases))
    @test_archs(archs=f64_archs, default_fp=sd.f64)
    def test_f64(arch, name, request):
        if interp_subset and arch == "interp" and not cases[name].interp:
            pytest.skip("interp: a representative subset (slow)")
        run_case(cases[name], "f64", request)

    @pytest.mark.parametrize("name", sorted(cases))
    @test_archs(archs=EVERY_ARCH)
    def test_f32(arch, name, request):
        run_case(cases[name], "f32", request)

    return test_f64, test_f32


def check_seeds_consumed(case: Case, outs, ws, dt):
    """A stored output's .grad is zero after the grad launch; an accumulated one keeps its seed."""
    for k, (o, w) in enumerate(zip(outs, ws)):
        want = w.astype(dt.np) if k in case.accumulated else np.zeros_like(w, dt.np)
        for kk, e in case.unstored:
            if kk == k:
                want.reshape(-1)[e] = w.reshape(-1)[e]
        np.testing.assert_array_equal(o.grad.to_numpy(), want, err_msg=f"output {k}'s .grad")
