"""Taichi's layout API (issue #13 item 1): `root.dense(...).place(x, x.grad)`, `lazy_grad`,
`dense(ij, n)`, `place(..., needs_grad=True)`, gradients enabled after kernels were compiled, and
the "not supported" errors of hash / bit_struct SNodes."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


@sd.kernel
def square_sum(x: sd.template(), loss: sd.template()):
    for i in x:
        loss[None] += x[i] * x[i]


@test_archs()
def test_place_x_and_grad(arch):
    x = sd.field(sd.f32)
    loss = sd.field(sd.f32)
    sd.root.dense(sd.i, 5).place(x, x.grad)
    sd.root.place(loss, loss.grad)
    assert x.shape == x.grad.shape == (5,) and loss.shape == ()
    data = np.linspace(-1, 1, 5).astype(np.float32)
    x.from_numpy(data)
    with sd.ad.Tape(loss):
        square_sum(x, loss)
    np.testing.assert_allclose(loss[None], np.sum(data.astype(np.float64) ** 2), rtol=1e-6)
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * data, rtol=1e-6)


@test_archs()
def test_lazy_grad_after_compile(arch):
    """A gradient added after the kernel ran (and compiled) is differentiated at the next grad."""
    x = sd.field(sd.f32)
    loss = sd.field(sd.f32)
    sd.root.dense(sd.i, 4).place(x)
    sd.root.place(loss)
    x.from_numpy(np.array([1, 2, 3, 4], np.float32))
    square_sum(x, loss)
    assert loss[None] == 30.0
    assert not x.needs_grad  # x.grad is an unplaced slot until lazy_grad
    sd.root.lazy_grad()
    assert x.needs_grad and loss.needs_grad and x.grad.shape == (4,)
    loss[None] = 0
    with sd.ad.Tape(loss):
        square_sum(x, loss)
    np.testing.assert_allclose(x.grad.to_numpy(), [2, 4, 6, 8])


@test_archs()
def test_place_needs_grad_and_square_dense(arch):
    a = sd.field(sd.f32)
    b = sd.field(sd.i32)
    sd.root.dense(sd.ij, 3).place(a, needs_grad=True)
    sd.root.dense(sd.ij, (2, 4)).place(b)
    assert a.shape == a.grad.shape == (3, 3) and b.shape == (2, 4) and b.grad is None
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def k():
        for i, j in a:
            loss[None] += sd.sin(a[i, j]) * (i + 1)

    data = np.arange(9, dtype=np.float32).reshape(3, 3) / 7
    a.from_numpy(data)
    with sd.ad.Tape(loss):
        k()
    expect = np.cos(data.astype(np.float64)) * (np.arange(3)[:, None] + 1)
    np.testing.assert_allclose(a.grad.to_numpy(), expect, rtol=1e-5, atol=1e-6)
    with pytest.raises(sd.SpiradTypeError, match="float"):
        sd.root.dense(sd.i, 2).place(sd.field(sd.i32), needs_grad=True)


@test_archs()
def test_vector_field_grad_placed(arch):
    v = sd.Vector.field(2, sd.f32)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)
    sd.root.dense(sd.i, 3).place(v, v.grad)

    @sd.kernel
    def k():
        for i in v:
            loss[None] += v[i].dot(v[i]) * 0.5

    data = np.arange(6, dtype=np.float32).reshape(3, 2)
    v.from_numpy(data)
    with sd.ad.Tape(loss):
        k()
    np.testing.assert_allclose(v.grad.to_numpy(), data)


@test_archs(archs=("cpu",))
def test_layout_errors(arch):
    x = sd.field(sd.f32)
    sd.root.dense(sd.i, 3).place(x)
    with pytest.raises(sd.SpiradValueError, match="no gradient"):
        y = sd.field(sd.f32)
        g = y.grad
        sd.root.dense(sd.i, 3).place(y)
        g.to_numpy()
    for what in ("hash", "bit_struct"):  # pointer / bitmasked / dynamic: tests/sparse
        with pytest.raises(sd.SpiradNotSupportedError, match="dense") as e:
            getattr(sd.root, what)(sd.i, 8)
        assert isinstance(e.value, NotImplementedError) and what in str(e.value)
    with pytest.raises(sd.SpiradValueError, match="shape"):
        z = sd.field(sd.f32)
        sd.root.dense(sd.i, 3).place(z)
        sd.root.dense(sd.i, 4).place(z)
    w = sd.field(sd.f32)
    with pytest.raises(sd.SpiradValueError, match="shape"):
        sd.root.dense(sd.i, 3).place(w)
        sd.root.dense(sd.i, 4).place(w.grad if w.grad is not None else w)
