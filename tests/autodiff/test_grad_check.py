"""`sd.ad.Tape(loss, grad_check=[...])` (issue #13 item 3): Taichi's finite-difference check of the
listed fields' gradients after the backward pass; a wrong gradient (a custom one here) fails with
the field's name and the worst relative error."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs

N = 6


def _setup():
    x = sd.field(sd.f64, shape=N, needs_grad=True)
    v = sd.Vector.field(2, sd.f64, shape=N, needs_grad=True)
    y = sd.field(sd.f64, shape=N, needs_grad=True)
    loss = sd.field(sd.f64, shape=(), needs_grad=True)

    @sd.kernel
    def step():
        for i in x:
            y[i] = sd.sin(x[i]) * v[i][0] + v[i][1] * v[i][1]

    @sd.kernel
    def reduce():
        for i in y:
            loss[None] += y[i] * y[i]

    x.from_numpy(np.linspace(0.1, 1.1, N))
    v.from_numpy(np.linspace(-1, 1, 2 * N).reshape(N, 2))
    return x, v, y, loss, step, reduce


@test_archs(require=("f64",))
def test_grad_check_passes_and_keeps_state(arch):
    x, v, y, loss, step, reduce = _setup()
    tape = sd.ad.Tape(loss=loss, grad_check=[x, v])
    with tape:
        step()
        reduce()
    assert tape.checker.worst < 0.01
    xs, vs = np.linspace(0.1, 1.1, N), np.linspace(-1, 1, 2 * N).reshape(N, 2)
    ys = np.sin(xs) * vs[:, 0] + vs[:, 1] ** 2
    np.testing.assert_allclose(loss[None], np.sum(ys ** 2), rtol=1e-12)  # state as after the tape
    np.testing.assert_allclose(x.to_numpy(), xs)
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * ys * np.cos(xs) * vs[:, 0], rtol=1e-10)


@test_archs(require=("f64",))
def test_grad_check_reports_wrong_custom_gradient(arch):
    x, v, y, loss, step, reduce = _setup()

    @sd.kernel
    def wrong_adjoint():
        for i in x:
            x.grad[i] += 2 * y[i] * y.grad[i] * 0.5  # off by the factor of cos(x) etc.

    @sd.ad.grad_replaced
    def custom_step():
        step()

    @sd.ad.grad_for(custom_step)
    def custom_step_grad():
        wrong_adjoint()

    with pytest.raises(AssertionError, match=r"grad check failed: x \([0-9.e+-]+\)") as e:
        with sd.ad.Tape(loss=loss, grad_check=[x]):
            custom_step()
            reduce()
    assert isinstance(e.value, sd.SpiradGradCheckError) and "worst relative error" in str(e.value)


@test_archs(archs=exactly("cpu"))
def test_tape_checks(arch):
    loss = sd.field(sd.f32, shape=2, needs_grad=True)
    with pytest.raises(sd.SpiradAutodiffError, match="0-d"):
        with sd.ad.Tape(loss=loss):
            pass
    scalar = sd.field(sd.f32, shape=(), needs_grad=True)
    plain = sd.field(sd.f32, shape=3)
    with pytest.raises(sd.SpiradTypeError, match="needs_grad"):
        with sd.ad.Tape(loss=scalar, grad_check=[plain]):
            pass
    scalar[None] = 5.0
    with sd.ad.Tape(loss=scalar):
        pass
    assert scalar[None] == 0.0  # Taichi zeroes the loss at entry


@test_archs()
def test_validation_reports_overwrite_across_kernels(arch):
    """Taichi's global data access rule: kernel b overwrites x after kernel a read it."""
    x = sd.field(sd.f32, shape=4, needs_grad=True)
    y = sd.field(sd.f32, shape=4, needs_grad=True)
    hist = sd.field(sd.f32, shape=(3, 4), needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def a():
        for i in x:
            y[i] = x[i] * x[i]

    @sd.kernel
    def b():
        for i in x:
            x[i] = 2.0 * y[i]

    @sd.kernel
    def step(t: sd.i32):       # the time-indexed pattern: reads t, writes t + 1 (allowed)
        for i in range(4):
            hist[t + 1, i] = sd.sin(hist[t, i]) + x[i]

    @sd.kernel
    def reduce():
        for i in range(4):
            loss[None] += hist[2, i] + y[i]

    x.from_numpy(np.arange(4, dtype=np.float32))
    with sd.ad.Tape(loss=loss, validation=True):
        a()
        step(0)
        step(1)
        reduce()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * np.arange(4) + 1 +
                               np.cos(np.sin(0.0) + np.arange(4)), rtol=1e-5)
    with pytest.raises(sd.SpiradAutodiffError, match=r"kernel b overwrote elements of x "
                                                      r"\(4 element"):
        with sd.ad.Tape(loss=loss, validation=True):
            a()
            b()
    with sd.ad.Tape(loss=loss):  # without validation: no check (and the checkbits are reset
        a()                      # by the next validated Tape)
        b()
    with sd.ad.Tape(loss=loss, validation=True):
        a()


@test_archs(require=("f64",))
def test_grad_check_ndarray(arch):
    a = sd.ndarray(sd.f64, shape=N, needs_grad=True)
    loss = sd.field(sd.f64, shape=(), needs_grad=True)

    @sd.kernel
    def k(a: sd.types.ndarray()):
        for i in a:
            loss[None] += sd.exp(a[i] * 0.5) * (i + 1)

    xs = np.linspace(-1, 1, N)
    a.from_numpy(xs)
    tape = sd.ad.Tape(loss=loss, grad_check=[a])
    with tape:
        k(a)
    assert tape.checker.worst < 0.01
    np.testing.assert_allclose(a.to_numpy(), xs)  # restored after the check
    np.testing.assert_allclose(a.grad.to_numpy(), 0.5 * np.exp(xs * 0.5) * (np.arange(N) + 1),
                               rtol=1e-10)
