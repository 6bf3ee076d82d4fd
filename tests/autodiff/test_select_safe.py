"""`sd.select(x > 0, sd.sqrt(x), 0)`: the branch select drops gives no NaN gradient (Taichi and
JAX give NaN there). Derivative rules of ops that can be singular (sqrt, rsqrt, log, division,
pow, asin, acos, atan2) contribute 0 where the adjoint is 0; a singular value that does reach
the loss still gives inf / NaN (docs/autodiff.md)."""
from __future__ import annotations

import numpy as np

import spirad as sd
from tests.support.archs import test_archs


@test_archs()
def test_select_drops_the_singular_branch(arch):
    x = sd.field(sd.f32, 5, needs_grad=True)
    y = sd.field(sd.f32, 5, needs_grad=True)

    @sd.kernel
    def k():
        for i in x:
            v = x[i]
            y[i] = (sd.select(v > 0, sd.sqrt(v), 0.0) + sd.select(v > 0, sd.log(v), 0.0)
                    + sd.select(v != 0, 1.0 / v, 0.0) + sd.select(v > 0, v ** 0.5, 0.0)
                    + sd.select(sd.abs(v) < 1, sd.asin(v), 0.0))

    xs = np.array([-1.0, 0.0, 0.25, 1.0, 4.0], np.float32)
    x.from_numpy(xs)
    k()
    y.grad.fill(1.0)
    k.grad()
    g = x.grad.to_numpy()
    want = np.zeros(5)
    pos = xs > 0
    want[pos] += 0.5 / np.sqrt(xs[pos]) + 1 / xs[pos] + 0.5 / np.sqrt(xs[pos])
    nz = xs != 0
    want[nz] += -1 / xs[nz] ** 2
    lt = np.abs(xs) < 1
    want[lt] += 1 / np.sqrt(1 - xs[lt] ** 2)
    assert np.all(np.isfinite(g)), g  # was NaN at x <= 0
    np.testing.assert_allclose(g, want, rtol=1e-5)


@test_archs()
def test_singular_value_that_reaches_the_loss_still_gives_inf(arch):
    x = sd.field(sd.f32, 2, needs_grad=True)
    y = sd.field(sd.f32, 2, needs_grad=True)

    @sd.kernel
    def k():
        for i in x:
            y[i] = sd.sqrt(x[i])

    x.from_numpy(np.array([0.0, 4.0], np.float32))
    k()
    y.grad.fill(1.0)
    k.grad()
    g = x.grad.to_numpy()
    assert np.isinf(g[0]) and g[1] == 0.25
