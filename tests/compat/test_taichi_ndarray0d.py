"""0-d ndarrays indexed with `x[None]`, `sd.types.ndarray(needs_grad=...)`, and numpy scalars /
0-d arrays as kernel constants (issue #13 item 4)."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs

SCALE = np.float32(2.5)
OFFSET = np.array(3.0)
COUNT = np.int64(4)
FLAG = np.bool_(True)


class Cfg:
    dt = np.float64(0.25)


@sd.kernel
def affine(x: sd.types.ndarray(), y: sd.types.ndarray(needs_grad=True)):
    y[None] = sd.sin(x[None]) * SCALE + OFFSET * COUNT + Cfg.dt * FLAG


@test_archs()
def test_zero_d_ndarray_forward_and_grad(arch):
    x = sd.ndarray(sd.f32, shape=(), needs_grad=True)
    y = sd.ndarray(sd.f32, shape=(), needs_grad=True)
    x[None] = 0.7
    affine(x, y)
    np.testing.assert_allclose(y[None], np.sin(0.7) * 2.5 + 12.25, rtol=1e-6)
    y.grad[None] = 1.0
    affine.grad(x, y)
    np.testing.assert_allclose(x.grad[None], np.cos(0.7) * 2.5, rtol=1e-6)
    assert x.shape == () and x.to_numpy().shape == ()


@test_archs()
def test_zero_d_ndarray_accumulates_loss(arch):
    v = sd.ndarray(sd.f32, shape=8, needs_grad=True)
    loss = sd.ndarray(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def total(v: sd.types.ndarray(dtype=sd.f32, ndim=1),
              loss: sd.types.ndarray(dtype=sd.f32, ndim=0, needs_grad=True)):
        for i in v:
            loss[None] += v[i] * v[i] * np.float32(0.5)

    data = np.linspace(-1, 1, 8).astype(np.float32)
    v.from_numpy(data)
    total(v, loss)
    np.testing.assert_allclose(loss[None], 0.5 * np.sum(data.astype(np.float64) ** 2), rtol=1e-6)
    loss.grad[None] = 1.0
    total.grad(v, loss)
    np.testing.assert_allclose(v.grad.to_numpy(), data, rtol=1e-6)


@test_archs(archs=exactly("cpu"))
def test_needs_grad_annotation_checked(arch):
    x = sd.ndarray(sd.f32, shape=())
    y = sd.ndarray(sd.f32, shape=())  # no .grad, but the annotation requires one
    with pytest.raises(sd.SpiradTypeError, match="needs_grad=True"):
        affine(x, y)

    @sd.kernel
    def k(a: sd.types.ndarray(needs_grad=False)):
        a[None] = 1.0

    # needs_grad=False accepts an ndarray with a .grad (Taichi): it is a constant for the adjoint
    g = sd.ndarray(sd.f32, shape=(), needs_grad=True)
    k(g)
    assert g[None] == 1.0
    k(x)
    assert x[None] == 1.0


@test_archs(archs=exactly("cpu"))
def test_older_annotation_keywords_and_copy_from(arch):
    @sd.kernel
    def k(a: sd.types.ndarray(field_dim=1, element_dim=0)):
        for i in a:
            a[i] = i

    a = sd.ndarray(sd.f32, shape=3)
    k(a)
    with pytest.raises(sd.SpiradTypeError, match="dimension"):
        k(sd.ndarray(sd.f32, shape=(2, 2)))
    f = sd.field(sd.f32, shape=3)
    f.copy_from(a)
    np.testing.assert_array_equal(f.to_numpy(), [0, 1, 2])
