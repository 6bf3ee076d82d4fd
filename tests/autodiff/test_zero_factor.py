"""A product with the constant 0 passes no derivative to its other factor (`derivatives.
constant_zero`), and a local that only such a product reads gets no adjoint at all
(`adjoint.adjoint_slots`): its stores add nothing into gradients. DiffTaichi's `wave` multiplies
a five-point stencil of guarded neighbour reads by `c * alpha * dt` with alpha = 0; its adjoint
added five zero products per cell into `p.grad` with atomics.

Checked against float64 central differences on every arch, by the adjoint's atomic adds (only
the live terms' remain), and for what changes: the forward product keeps IEEE semantics (0 * inf
is NaN), the derivative through a constant zero is 0 even for an infinite seed (as in Taichi).
"""
import numpy as np

import spirad as sd
from kernel_ir.nodes import walk
from kernel_ir.ops import Op
from tests.autodiff.gradutil import central_diff, check, weights, arr
from tests.support.archs import test_archs

ND = sd.types.ndarray()
X6 = np.array([0.21, -0.43, 0.65, 0.18, -0.77, 0.39])
ALPHA = 0.0  # a module constant, as in wave.py: the kernels see the literal 0.0


@sd.func
def at(x, j):
    return x[j] if 0 <= j < x.shape[0] else 0.0   # a guarded read: a local in a branch


@sd.func
def stencil(x, j):
    return at(x, j - 1) + at(x, j + 1) - 2.0 * at(x, j)


@sd.kernel
def k_wave(x: ND, y: ND, n: sd.i32):
    for i in x:
        acc = 0.0
        for s in range(n):                 # a serial loop, as wave's inner loop
            acc += 0.5 * stencil(x, i) * (s + 1) - ALPHA * 3.0 * stencil(x, i + 1)
        y[i] = acc + x[i] * x[i]


def r_wave(x, n):
    m = len(x)
    at_ = lambda j: x[j] if 0 <= j < m else 0.0  # noqa: E731
    st = [at_(j - 1) + at_(j + 1) - 2.0 * at_(j) for j in range(m)]
    return np.array([sum(0.5 * st[i] * (s + 1) for s in range(n)) + x[i] * x[i]
                     for i in range(m)])


@test_archs()
def test_zero_factor_gradient(arch):
    dt = sd.f32
    x = arr(dt, X6, needs_grad=True)
    y = sd.ndarray(dt, X6.shape, needs_grad=True)
    k_wave(x, y, 3)
    w = weights(X6.shape)
    y.grad.from_numpy(w.astype(np.float32))
    k_wave.grad(x, y, 3)
    xs = X6.astype(np.float32).astype(np.float64)
    check("f32", y.to_numpy(), r_wave(xs, 3), x.grad.to_numpy(),
          central_diff(lambda v: r_wave(v, 3), xs, w))


def _atomic_adds(kernel, args):
    g = kernel.compile_adjoint(args)
    return sum(1 for t in g.tl.tasks for n in walk(t.body) if n.op == Op.ATOMIC_ADD)


@sd.kernel
def k_live(x: ND, y: ND, n: sd.i32):
    for i in x:
        acc = 0.0
        for s in range(n):
            acc += 0.5 * stencil(x, i) * (s + 1)
        y[i] = acc + x[i] * x[i]


def test_zero_factor_adds_nothing():
    """The adjoint of k_wave adds into x.grad exactly where the one without the zero term does
    (the three guarded reads of the live stencil, x[i] twice); before, the zero term's three
    guarded reads added zeros too."""
    sd.init(arch="cpu")
    x = arr(sd.f32, X6, needs_grad=True)
    y = sd.ndarray(sd.f32, X6.shape, needs_grad=True)
    assert _atomic_adds(k_wave, (x, y, 3)) == _atomic_adds(k_live, (x, y, 3)) > 0


@sd.kernel
def k_times_zero(x: ND, y: ND):
    for i in x:
        y[i] = 0.0 * x[i] + x[i] * -0.0


@test_archs()
def test_zero_factor_forward_is_ieee_and_derivative_is_zero(arch):
    x = arr(sd.f32, [1.5, np.inf, np.nan], needs_grad=True)
    y = sd.ndarray(sd.f32, 3, needs_grad=True)
    k_times_zero(x, y)
    out = y.to_numpy()
    assert out[0] == 0.0 and np.isnan(out[1]) and np.isnan(out[2])  # forward: IEEE (0 * inf)
    y.grad.from_numpy(np.array([np.inf, 2.0, np.nan], np.float32))
    k_times_zero.grad(x, y)
    np.testing.assert_array_equal(x.grad.to_numpy(), np.zeros(3, np.float32))  # no NaN
