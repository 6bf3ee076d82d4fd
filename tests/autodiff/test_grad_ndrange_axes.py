"""Gradients of ndrange loops with `axes=` (Quadrants' nesting order,
spirad/data/ndrange_axes.py).

A serialised or nested loop whose body carries a value from one iteration to the next gives a
result that depends on the visit order; its adjoint must walk the same flat order backwards.
Each kernel is checked forward against a float64 numpy reference written with the loops nested
in the permuted order, and backward against central differences of that reference."""
import numpy as np

import spirad as sd
from tests.autodiff.gradutil import central_diff, weights
from tests.support.archs import EVERY_ARCH, test_archs

ND = sd.types.ndarray()
M, N = 3, 4


def carried(v, x, i, j, np_sin=np.sin):
    return np_sin(v) * 0.9 + x[i, j] * (1.0 + 0.25 * i) - 0.1 * j


@sd.kernel
def k_serial(x: ND, y: ND):
    v = 0.3
    sd.loop_config(serialize=True)
    for i, j in sd.ndrange(M, N, axes=(1, 0)):
        v = sd.sin(v) * 0.9 + x[i, j] * (1.0 + 0.25 * i) - 0.1 * j
    y[0] = v


@sd.kernel
def k_nested_grouped(x: ND, y: ND):
    for r in range(2):
        v = 0.3 + r
        for I in sd.grouped(sd.ndrange(M, (1, N), axes=(1, 0))):
            v = sd.sin(v) * 0.9 + x[I] * (1.0 + 0.25 * I[0]) - 0.1 * I[1]
        y[r] = v


def r_serial(x):
    v = 0.3
    for j in range(N):
        for i in range(M):
            v = carried(v, x, i, j)
    return np.array([v])


def r_nested_grouped(x):
    out = []
    for r in range(2):
        v = 0.3 + r
        for j in range(1, N):
            for i in range(M):
                v = carried(v, x, i, j)
        out.append(v)
    return np.array(out)


def run(kernel, ref, n_out):
    xs = np.random.default_rng(1).uniform(-1, 1, (M, N))
    x = sd.ndarray(sd.f32, (M, N), needs_grad=True)
    y = sd.ndarray(sd.f32, n_out, needs_grad=True)
    x.from_numpy(xs.astype(np.float32))
    kernel(x, y)
    np.testing.assert_allclose(y.to_numpy(), ref(xs), rtol=1e-5, atol=1e-5)
    w = weights(n_out)
    y.grad.from_numpy(w.astype(np.float32))
    kernel.grad(x, y)
    np.testing.assert_allclose(x.grad.to_numpy(), central_diff(ref, xs, w), rtol=1e-4, atol=1e-5)


def test_references_depend_on_the_order():
    """The canonical order gives another value: the kernels' tests tell the orders apart."""
    xs = np.random.default_rng(1).uniform(-1, 1, (M, N))
    v = 0.3
    for i in range(M):
        for j in range(N):
            v = carried(v, xs, i, j)
    assert abs(v - r_serial(xs)[0]) > 1e-3


@test_archs(EVERY_ARCH)
def test_serialised_top_level(arch):
    run(k_serial, r_serial, 1)


@test_archs(EVERY_ARCH)
def test_nested_grouped(arch):
    run(k_nested_grouped, r_nested_grouped, 2)
