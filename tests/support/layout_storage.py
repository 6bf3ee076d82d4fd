"""The storage check of Quadrants' `layout=` tests (fields and ndarrays alike): three tensors
filled with values of their canonical indices read back canonically, and, on the CPU (host
memory), stored with their axes in the layout's order."""
import numpy as np


def check_filled_in_layout_order(arch, a, b, v):
    """`a` (3, 5) f32 laid out (1, 0), `b` (2, 3, 4) i32 laid out (2, 0, 1), `v` a 2-vector
    (3, 4) laid out (1, 0), filled with a[i, j] = 10 i + j, b[i, j, k] = 100 i + 10 j + k,
    v[i, j] = (i, 2 j)."""
    want_a = np.add.outer(np.arange(3) * 10, np.arange(5)).astype(np.float32)
    want_b = (np.arange(2)[:, None, None] * 100 + np.arange(3)[None, :, None] * 10
              + np.arange(4)[None, None, :]).astype(np.int32)
    want_v = np.stack(np.meshgrid(np.arange(3), np.arange(4) * 2, indexing="ij"), -1)
    np.testing.assert_array_equal(a.to_numpy(), want_a)
    np.testing.assert_array_equal(b.to_numpy(), want_b)
    np.testing.assert_array_equal(v.to_numpy(), want_v.astype(np.float32))
    if arch == "cpu":  # the storage itself (host memory): the axes in the layout's order
        np.testing.assert_array_equal(a._flat_view(), want_a.T.ravel())
        np.testing.assert_array_equal(b._flat_view(), want_b.transpose(2, 0, 1).ravel())
        np.testing.assert_array_equal(v._flat_view(), want_v.transpose(1, 0, 2).ravel())


def laid_out_pair_and_view(backend, values):
    """Two laid-out tensors of `backend` (x (3, 5) f32 laid out (1, 0), filled with `values`;
    y (2, 3, 4) i32 laid out (2, 0, 1)) and x's zero-copy torch view, checked strided over the
    live memory; the view's element [1, 2] set to -7 (kernels must see the write). Returns
    (torch, x, y, the view)."""
    import pytest

    import spirad as sd
    torch = pytest.importorskip("torch")
    x = sd.tensor(sd.f32, (3, 5), backend=backend, layout=(1, 0))
    y = sd.tensor(sd.i32, (2, 3, 4), backend=backend, layout=(2, 0, 1))
    x.from_numpy(values)
    t = x.to_torch(copy=False)
    assert tuple(t.shape) == (3, 5) and t.stride() == (1, 3)
    np.testing.assert_array_equal(t.numpy(), values)
    t[1, 2] = -7.0  # the live memory: kernels see the write
    return torch, x, y, t
