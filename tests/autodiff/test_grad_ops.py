"""Every differentiable op inside a dynamic loop with loop-carried values, checked against float64
central differences (f32 and f64, every arch). The float math functions of `kernel_ir.mathfns`
are all included (those without a hand-written case through their record's domain), and
test_forward_mode runs the same table in forward mode."""
import numpy as np
import pytest

import spirad as sd
from kernel_ir.mathfns import MATH
from tests.support.archs import EVERY_ARCH, exactly, test_archs

N = 6


@sd.func
def f_sin(v): return sd.sin(v)
@sd.func
def f_cos(v): return sd.cos(v)
@sd.func
def f_tan(v): return sd.tan(v * 0.5)
@sd.func
def f_tanh(v): return sd.tanh(v)
@sd.func
def f_asin(v): return sd.asin(v * 0.5)
@sd.func
def f_acos(v): return sd.acos(v * 0.5)
@sd.func
def f_exp(v): return sd.exp(v * 0.5)
@sd.func
def f_log(v): return sd.log(v + 1.5)
@sd.func
def f_sqrt(v): return sd.sqrt(v + 1.5)
@sd.func
def f_rsqrt(v): return sd.rsqrt(v + 1.5)
@sd.func
def f_pow(v): return sd.pow(v + 1.5, v * 0.5 + 1.0)
@sd.func
def f_abs(v): return sd.abs(v - 0.4)
@sd.func
def f_min(v): return sd.min(v, 0.45)
@sd.func
def f_max(v): return sd.max(v, 0.45)
@sd.func
def f_atan2(v): return sd.atan2(v, v * v + 0.5)
@sd.func
def f_select(v): return sd.select(v > 0.45, v * v, v * 3.0)
@sd.func
def f_div(v): return 1.0 / (v + 1.2)
@sd.func
def f_mul(v): return v * v * v
@sd.func
def f_sub(v): return 0.3 - v
@sd.func
def f_neg(v): return -v
@sd.func
def f_floor(v): return sd.floor(v * 3.0) + v
@sd.func
def f_mod(v): return (v * 3.0) % 1.0
@sd.func
def f_ifelse(v):
    r = v
    if v > 0.45:
        r = sd.sin(v)
    else:
        r = v * v
    return r


NP = {
    "sin": np.sin, "cos": np.cos, "tan": lambda v: np.tan(v * 0.5), "tanh": np.tanh,
    "asin": lambda v: np.arcsin(v * 0.5), "acos": lambda v: np.arccos(v * 0.5),
    "exp": lambda v: np.exp(v * 0.5), "log": lambda v: np.log(v + 1.5),
    "sqrt": lambda v: np.sqrt(v + 1.5), "rsqrt": lambda v: 1 / np.sqrt(v + 1.5),
    "pow": lambda v: np.power(v + 1.5, v * 0.5 + 1.0), "abs": lambda v: np.abs(v - 0.4),
    "min": lambda v: np.minimum(v, 0.45), "max": lambda v: np.maximum(v, 0.45),
    "atan2": lambda v: np.arctan2(v, v * v + 0.5),
    "select": lambda v: np.where(v > 0.45, v * v, v * 3.0), "div": lambda v: 1.0 / (v + 1.2),
    "mul": lambda v: v * v * v, "sub": lambda v: 0.3 - v, "neg": lambda v: -v,
    "floor": lambda v: np.floor(v * 3.0) + v, "mod": lambda v: np.mod(v * 3.0, 1.0),
    "ifelse": lambda v: np.where(v > 0.45, np.sin(v), v * v),
}
FUNCS = {name: globals()["f_" + name] for name in NP}


def _from_record(f):
    """A case for a math function of `kernel_ir.mathfns` without one above: its argument mapped
    into the record's domain (v stays in about [0.1, 0.9] here)."""
    fn, (lo, hi) = getattr(sd, f.name), f.domain

    @sd.func
    def g(v):
        return fn(lo + (hi - lo) * v)
    return g, lambda v: f.reference(lo + (hi - lo) * v)


for _f in MATH:  # a new math function is tested here (both modes, every arch) without edits
    if _f.name not in NP:
        FUNCS[_f.name], NP[_f.name] = _from_record(_f)


def reference(op, xs, n):
    v = xs.astype(np.float64).copy()
    acc = np.zeros_like(v)
    for s in range(n):
        acc = acc + NP[op](v + s * 0.01)
        v = v * 0.9 + 0.05
    return acc + v


def central_diff(op, xs, n, eps=1e-6):
    out = np.zeros_like(xs, dtype=np.float64)
    for i in range(len(xs)):
        e = np.zeros_like(xs, dtype=np.float64)
        e[i] = eps
        out[i] = (reference(op, xs + e, n)[i] - reference(op, xs - e, n)[i]) / (2 * eps)
    return out


# the inputs, away from the kinks of abs/min/max/select/floor/mod
XS = np.array([0.11, 0.23, 0.37, 0.52, 0.68, 0.83])


def op_kernel(x, y):
    """The kernel every op case runs (reverse mode here, forward mode in test_forward_mode):
    `fn` applied in a loop of `steps` trips with a loop-carried value."""
    @sd.kernel
    def k(fn: sd.template(), steps: sd.i32):
        for i in x:
            v = x[i]
            acc = 0.0
            for s in range(steps):
                acc += fn(v + s * 0.01)
                v = v * 0.9 + 0.05
            y[i] = acc + v
    return k


def run_case(op, dtype, n=5):
    x = sd.field(dtype, shape=N, needs_grad=True)
    y = sd.field(dtype, shape=N, needs_grad=True)
    k = op_kernel(x, y)
    xs = XS
    x.from_numpy(xs)
    k(FUNCS[op], n)
    fwd = y.to_numpy()
    y.grad.fill(1.0)
    k.grad(FUNCS[op], n)
    # `y[i] = ...` overwrites: its adjoint consumed the seed (Taichi's store rule)
    np.testing.assert_array_equal(y.grad.to_numpy(), 0.0)
    return xs, fwd, x.grad.to_numpy()


@pytest.mark.parametrize("op", sorted(NP))
@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_grad_op_f64(arch, op):
    if arch == "interp" and op not in ("sin", "pow", "ifelse", "select"):
        pytest.skip("interp: a representative subset (slow)")
    xs, fwd, g = run_case(op, sd.f64)
    np.testing.assert_allclose(fwd, reference(op, xs, 5), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g, central_diff(op, xs, 5), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("op", sorted(NP))
@test_archs(archs=EVERY_ARCH)
def test_grad_op_f32(arch, op):
    xs, fwd, g = run_case(op, sd.f32)
    np.testing.assert_allclose(fwd, reference(op, xs, 5), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(g, central_diff(op, xs, 5), rtol=2e-3, atol=2e-4)
