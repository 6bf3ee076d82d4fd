"""Aliasing and argument layout (architecture §8): one ndarray passed for two parameters is one buffer
(its gradient is right, or refused like a field read and overwritten); different views of one
numpy array are refused; an array's layout is read at every call (numpy in-place reshape,
torch `t_()`); list template arguments are keyed by value; empty arrays are no-ops."""
from __future__ import annotations

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, test_archs


@test_archs()
def test_same_ndarray_twice_is_one_buffer(arch):
    @sd.kernel
    def scale_into(a: sd.types.ndarray(), b: sd.types.ndarray()):
        for i in a:
            b[i] += 2.0 * a[i]

    arr = sd.ndarray(sd.f32, 4, needs_grad=True)
    arr.from_numpy(np.arange(4, dtype=np.float32))
    scale_into(arr, arr)
    np.testing.assert_allclose(arr.to_numpy(), 3 * np.arange(4))
    arr.grad.fill(1.0)
    scale_into.grad(arr, arr)
    np.testing.assert_allclose(arr.grad.to_numpy(), 3.0)  # d(3a)/da: one buffer, b is a


@test_archs()
def test_same_ndarray_read_and_overwritten_grad_is_refused(arch):
    @sd.kernel
    def sin_into(a: sd.types.ndarray(), b: sd.types.ndarray()):
        for i in a:
            b[i] = sd.sin(a[i])

    arr = sd.ndarray(sd.f32, 4, needs_grad=True)
    x = np.linspace(0, 1, 4).astype(np.float32)
    arr.from_numpy(x)
    sin_into(arr, arr)
    np.testing.assert_allclose(arr.to_numpy(), np.sin(x), rtol=1e-6)
    arr.grad.fill(1.0)
    with pytest.raises(sd.SpiradAutodiffError, match="reads 'a' and also overwrites it"):
        sin_into.grad(arr, arr)


@test_archs()
def test_numpy_array_twice_and_overlapping_views(arch):
    @sd.kernel
    def sin_into(a: sd.types.ndarray(), b: sd.types.ndarray()):
        for i in a:
            b[i] = sd.sin(a[i]) + 1.0

    x = np.linspace(0, 1, 4).astype(np.float32)
    want = np.sin(x) + 1
    sin_into(x, x)  # one array, one buffer (GPU backends: copied in and back once)
    np.testing.assert_allclose(x, want, rtol=1e-6)
    y = np.zeros(8, np.float32)
    with pytest.raises(sd.SpiradValueError, match="same memory"):
        sin_into(y[:4], y[2:6])


@test_archs()
def test_numpy_layout_read_at_every_call(arch):
    @sd.kernel
    def label(a: sd.types.ndarray()):
        for i, j in a:
            a[i, j] = i * 10 + j

    a = np.zeros((2, 4), np.float32)
    label(a)
    a.shape = (4, 2)  # in place: the same object, another layout
    a[...] = 0
    label(a)
    np.testing.assert_array_equal(a, np.add.outer(np.arange(4) * 10, np.arange(2)))


def test_torch_transposed_in_place_is_seen():
    torch = pytest.importorskip("torch")
    sd.init(arch=sd.cpu)

    @sd.kernel
    def label(a: sd.types.ndarray()):
        for i, j in a:
            a[i, j] = i * 10 + j

    t = torch.zeros(3, 3)
    label(t)
    t.t_()  # same storage and shape, transposed strides: no longer C-contiguous
    with pytest.raises(sd.SpiradTypeError, match="C-contiguous"):
        label(t)
    t = torch.zeros(2, 3)
    label(t)
    t.resize_(3, 2)
    label(t)
    assert t.tolist() == [[0, 1], [10, 11], [20, 21]]


@test_archs(archs=EVERY_ARCH)
def test_list_template_argument_keyed_by_value(arch):
    x = sd.field(sd.f32, 3)

    @sd.kernel
    def put(vals: sd.template()):
        for k in sd.static(range(3)):
            x[k] = vals[k]

    vals = [1.0, 2.0, 3.0]
    put(vals)
    assert x.to_numpy().tolist() == [1.0, 2.0, 3.0]
    vals[0] = 5.0  # mutated in place: a new value, so a new program
    put(vals)
    assert x.to_numpy().tolist() == [5.0, 2.0, 3.0]


@test_archs()
def test_empty_array_argument_is_a_noop(arch):
    @sd.kernel
    def ones(a: sd.types.ndarray()):
        for i in a:
            a[i] = 1.0

    empty = np.zeros(0, np.float32)
    ones(empty)
    assert empty.shape == (0,)
    torch = pytest.importorskip("torch")
    ones(torch.zeros(0))
