"""`sd.ad.grad_replaced` / `sd.ad.grad_for` (issue #13 item 6), Taichi's semantics: inside a Tape
the decorated Python function is recorded as one step and its registered gradient runs instead of
the adjoints of the kernels it launched. Checked against analytic values and float64 central
differences."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs

N = 5


@test_archs()
def test_replaced_gradient_runs_instead(arch):
    x = sd.field(sd.f32, shape=N, needs_grad=True)
    total = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def func(mul: sd.f32):
        for i in x:
            sd.atomic_add(total[None], x[i] * mul)

    @sd.ad.grad_replaced
    def forward(mul):
        func(mul)
        func(mul)

    @sd.ad.grad_for(forward)
    def backward(mul):
        func.grad(mul)   # once, although forward ran func twice

    x.from_numpy(np.arange(N, dtype=np.float32))
    with sd.ad.Tape(loss=total):
        forward(4.0)
    assert total[None] == 2 * 4 * np.arange(N).sum()
    np.testing.assert_array_equal(x.grad.to_numpy(), np.full(N, 4.0))
    forward(1.0)  # outside a Tape: just runs
    assert total[None] == 2 * 4 * np.arange(N).sum() + 2 * np.arange(N).sum()


@test_archs()
def test_custom_gradient_matches_central_differences(arch):
    """A step with a hand-written adjoint kernel, between two differentiated kernels."""
    x = sd.field(sd.f32, shape=N, needs_grad=True)
    y = sd.field(sd.f32, shape=N, needs_grad=True)
    z = sd.field(sd.f32, shape=N, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def sqrt_k():
        for i in x:
            y[i] = sd.sqrt(x[i])

    @sd.kernel
    def sqrt_adjoint():
        for i in x:
            x.grad[i] += y.grad[i] * 0.5 / sd.sqrt(x[i])

    @sd.kernel
    def tail():
        for i in y:
            z[i] = sd.sin(y[i])
            loss[None] += z[i] * (i + 1)

    class Model:
        @sd.ad.grad_replaced
        def step(self):
            sqrt_k()

        @sd.ad.grad_for(step)
        def step_grad(self):
            sqrt_adjoint()

    m = Model()
    xs = np.linspace(0.3, 1.7, N)
    x.from_numpy(xs.astype(np.float32))
    with sd.ad.Tape(loss=loss):
        m.step()
        tail()

    def f(v):
        return np.sum(np.sin(np.sqrt(v)) * (np.arange(N) + 1))

    h = 1e-6
    want = np.array([(f(xs + h * e) - f(xs - h * e)) / (2 * h) for e in np.eye(N)])
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-4, atol=1e-5)


@test_archs(archs=exactly("cpu"))
def test_custom_grad_errors(arch):
    x = sd.field(sd.f32, shape=N, needs_grad=True)

    @sd.kernel
    def k():
        for i in x:
            x[i] += 1.0

    @sd.ad.grad_replaced
    def no_grad():
        k()

    with sd.ad.Tape() as tape:  # without a loss: records only (as Taichi's)
        no_grad()
    with pytest.raises(sd.SpiradAutodiffError, match="grad_for"):
        tape.backward()
    with pytest.raises(sd.SpiradTypeError, match="grad_replaced"):
        sd.ad.grad_for(k)
    with pytest.raises(sd.SpiradTypeError, match="not an @sd.kernel"):
        sd.ad.grad_replaced(k)


@test_archs()
def test_no_grad_and_clear_all_gradients(arch):
    x = sd.field(sd.f32, shape=N, needs_grad=True)
    total = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def acc(mul: sd.f32):
        for i in x:
            total[None] += x[i] * mul

    @sd.ad.no_grad
    def frozen():
        acc(10.0)

    x.from_numpy(np.ones(N, np.float32))
    with sd.ad.Tape(loss=total):
        frozen()
        acc(3.0)
    assert total[None] == 13.0 * N
    np.testing.assert_array_equal(x.grad.to_numpy(), np.full(N, 3.0))
    sd.ad.clear_all_gradients()
    assert not x.grad.to_numpy().any() and total.grad[None] == 0
