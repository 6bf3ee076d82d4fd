"""`with sd.ad.Tape(loss=loss): k1(); k2(); ...`: the recorded launches' adjoints run in reverse
order from loss.grad = 1, against float64 central differences of the whole chain; the Tape clears
every needs_grad field's gradient at entry."""
import numpy as np
import pytest

import spirad as sd
from tests.autodiff.gradutil import FP, TOL, central_diff
from tests.support.archs import EVERY_ARCH, exactly, test_archs

N = 6
XS = np.array([0.12, 0.29, 0.41, 0.57, 0.66, 0.83])
WS = np.array([1.0, 0.5, 1.5, 0.8, 1.2, 0.7])


def make(dt):
    x = sd.field(dt, shape=N, needs_grad=True)
    y = sd.field(dt, shape=N, needs_grad=True)
    z = sd.field(dt, shape=N, needs_grad=True)
    w = sd.field(dt, shape=N)                  # no gradient: weights
    loss = sd.field(dt, shape=(), needs_grad=True)

    @sd.kernel
    def k_loop(n: sd.i32):
        for i in x:
            v = x[i]
            for j in range(n):
                v = sd.sin(v) * 0.9 + 0.1 * x[i]
            y[i] = v

    @sd.kernel
    def k_map():
        for i in y:
            z[i] = sd.exp(y[i] * 0.5) + y[i] * x[i]

    @sd.kernel
    def k_reduce():
        for i in z:
            loss[None] += w[i] * z[i] * z[i]    # atomic reduction

    x.from_numpy(XS.astype(dt.np))
    w.from_numpy(WS.astype(dt.np))
    return x, y, z, w, loss, k_loop, k_map, k_reduce


def ref_loss(xv, n, three=True):
    v = xv.copy()
    for j in range(n):
        v = np.sin(v) * 0.9 + 0.1 * xv
    z = np.exp(v * 0.5) + v * xv if three else v
    return np.sum(WS * z * z)


@pytest.mark.parametrize("fp", ["f32", "f64"])
@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_tape_three_kernels(arch, fp):
    if arch == "interp" and fp == "f32":
        pytest.skip("interp: f64 only")
    dt = FP[fp]
    x, y, z, w, loss, k_loop, k_map, k_reduce = make(dt)
    n = 4
    x.grad.fill(7.0)                            # stale gradients: the Tape clears them
    y.grad.fill(-3.0)
    loss[None] = 0.0
    with sd.ad.Tape(loss=loss):
        k_loop(n)
        k_map()
        k_reduce()
    rt, at, grt, gat = TOL[fp]
    xs = XS.astype(dt.np).astype(np.float64)
    np.testing.assert_allclose(loss[None], ref_loss(xs, n), rtol=rt * 10, atol=at)
    np.testing.assert_allclose(x.grad.to_numpy(), central_diff(lambda v: ref_loss(v, n), xs, 1.0),
                               rtol=grt, atol=gat)
    assert loss.grad[None] == 1.0


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_tape_two_kernels_reduction(arch):
    x, y, z, w, loss, k_loop, k_map, k_reduce = make(sd.f64)

    @sd.kernel
    def k_reduce_y():
        for i in y:
            loss[None] += w[i] * y[i] * y[i]

    for n in (0, 1, 5):
        loss[None] = 0.0
        with sd.ad.Tape(loss=loss):
            k_loop(n)
            k_reduce_y()
        np.testing.assert_allclose(loss[None], ref_loss(XS, n, three=False), rtol=1e-12)
        # a second Tape must not see the first one's gradients (cleared at entry)
        np.testing.assert_allclose(x.grad.to_numpy(),
                                   central_diff(lambda v: ref_loss(v, n, three=False), XS, 1.0),
                                   rtol=1e-6, atol=1e-8)


P0 = np.array([0.2, 0.5, 0.9])  # the positions at step 0 of the two time-step tests


def _steps_loss(p, T):
    """The time-step tests' loss in float64: step t applies t + 1 updates v += 0.1 sin(v + 0.2 j)."""
    v = p.copy()
    for t in range(T):
        for j in range(t + 1):
            v = v + 0.1 * np.sin(v + j * 0.2)
    return np.sum(v * v)


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_tape_time_steps(arch):
    """The same kernel launched several times (a time-stepping loop, DiffTaichi style:
    pos[t + 1, i] = f(pos[t, i])) inside one Tape."""
    T = 4
    pos = sd.field(sd.f64, shape=(T + 1, 3), needs_grad=True)
    loss = sd.field(sd.f64, shape=(), needs_grad=True)

    @sd.kernel
    def step(t: sd.i32, n: sd.i32):
        for i in range(3):
            v = pos[t, i]
            for j in range(n):
                v = v + 0.1 * sd.sin(v + j * 0.2)
            pos[t + 1, i] = v

    @sd.kernel
    def final():
        for i in range(3):
            loss[None] += pos[T, i] * pos[T, i]

    pos.fill(0.0)
    pos.from_numpy(np.concatenate([P0[None], np.zeros((T, 3))]))
    loss[None] = 0.0
    with sd.ad.Tape(loss=loss):
        for t in range(T):
            step(t, t + 1)
        final()
    np.testing.assert_allclose(loss[None], _steps_loss(P0, T), rtol=1e-12)
    np.testing.assert_allclose(pos.grad.to_numpy()[0], central_diff(lambda p: _steps_loss(p, T), P0, 1.0),
                               rtol=1e-6, atol=1e-8)


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_tape_time_steps_separate_fields(arch):
    """Time steps through one field per step (template arguments), several launches of the same
    kernel inside one Tape."""
    T = 4
    pos = [sd.field(sd.f64, shape=3, needs_grad=True) for _ in range(T + 1)]
    loss = sd.field(sd.f64, shape=(), needs_grad=True)

    @sd.kernel
    def step(src: sd.template(), dst: sd.template(), n: sd.i32):
        for i in src:
            v = src[i]
            for j in range(n):
                v = v + 0.1 * sd.sin(v + j * 0.2)
            dst[i] = v

    @sd.kernel
    def final(p: sd.template()):
        for i in p:
            loss[None] += p[i] * p[i]

    pos[0].from_numpy(P0)
    loss[None] = 0.0
    with sd.ad.Tape(loss=loss):
        for t in range(T):
            step(pos[t], pos[t + 1], t + 1)
        final(pos[T])
    np.testing.assert_allclose(loss[None], _steps_loss(P0, T), rtol=1e-12)
    np.testing.assert_allclose(pos[0].grad.to_numpy(), central_diff(lambda p: _steps_loss(p, T), P0, 1.0),
                               rtol=1e-6, atol=1e-8)


@test_archs(archs=exactly("cpu"), default_fp=sd.f64)
def test_tape_clear_gradients_false_accumulates(arch):
    x, y, z, w, loss, k_loop, k_map, k_reduce = make(sd.f64)
    n = 2
    want = central_diff(lambda v: ref_loss(v, n), XS, 1.0)
    x.grad.fill(1.0)
    loss[None] = 0.0
    with sd.ad.Tape(loss=loss, clear_gradients=False):
        k_loop(n)
        k_map()
        k_reduce()
    np.testing.assert_allclose(x.grad.to_numpy(), want + 1.0, rtol=1e-6, atol=1e-8)


@test_archs(archs=exactly("cpu"))
def test_tape_loss_without_grad_is_an_error(arch):
    loss = sd.field(sd.f32, shape=())
    with pytest.raises(sd.SpiradAutodiffError, match="needs_grad"):
        with sd.ad.Tape(loss=loss):
            pass
