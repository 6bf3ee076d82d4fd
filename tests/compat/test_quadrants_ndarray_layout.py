"""Quadrants' `sd.tensor(..., backend=NDARRAY, layout=perm)` (Genesis' ndarray mode lays its
constraint solver's tensors out environment-first): the storage holds the axes in `perm`'s
order, `shape` and host reads, writes and zero-copy views are canonical, kernels index the
storage with the indices permuted (each index checked against its own axis), the layout is part
of the argument's type (another layout: another program), shape specialisation sees the
storage's shape, gradients share the layout."""
import math

import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradOutOfBoundsError
from kernel_ir.nodes import walk
from kernel_ir.ops import GLOBAL_ACCESS, Op
from tests.support.archs import exactly, test_archs
from tests.support.layout_storage import check_filled_in_layout_order, laid_out_pair_and_view

N = sd.Backend.NDARRAY
ND = sd.types.ndarray()


def _values(shape):
    return np.arange(math.prod(shape), dtype=np.float32).reshape(shape) * 0.5 - 3.0


@sd.kernel
def _fill2(a: ND):
    for i, j in a:
        a[i, j] = i * 10 + j


@sd.kernel
def _fill3(b: ND):
    for i, j, k in b:
        b[i, j, k] = i * 100 + j * 10 + k


@sd.kernel
def _fillv(v: ND):
    for i, j in sd.ndrange(v.shape[0], v.shape[1]):
        v[i, j] = sd.Vector([i, j * 2])


@test_archs()
def test_storage_is_in_layout_order(arch):
    a = sd.tensor(sd.f32, (3, 5), backend=N, layout=(1, 0))
    b = sd.tensor(sd.i32, (2, 3, 4), backend=N, layout=(2, 0, 1))
    v = sd.Vector.tensor(2, sd.f32, (3, 4), backend=N, layout=(1, 0))
    assert a.shape == (3, 5) and a.layout == (1, 0) and b.shape == (2, 3, 4)
    _fill2(a)
    _fill3(b)
    _fillv(v)
    check_filled_in_layout_order(arch, a, b, v)


@test_archs()
def test_host_io_and_kernel_reads(arch):
    x = sd.tensor(sd.f32, (4, 6), backend=N, layout=(1, 0))
    out = sd.ndarray(sd.f32, (4, 6))
    data = _values((4, 6))
    x.from_numpy(data)
    x[2, 5] = 42.0

    @sd.kernel
    def copy(x: ND, out: ND):
        for i, j in out:
            out[i, j] = x[i, j] * 2.0 + x[x.shape[0] - 1 - i, j] + x.shape[1] * 1000

    copy(x, out)
    data[2, 5] = 42.0
    np.testing.assert_array_equal(out.to_numpy(), data * 2.0 + data[::-1] + 6000)
    assert x[2, 5] == 42.0 and x[1, 3] == data[1, 3]
    x.fill(1.5)
    np.testing.assert_array_equal(x.to_numpy(), np.full((4, 6), 1.5, np.float32))
    x.from_numpy(data)
    if arch == "cpu":  # host writes went to the storage's order
        np.testing.assert_array_equal(x._flat_view(), data.T.ravel())
    torch = pytest.importorskip("torch")
    x.from_torch(torch.from_numpy(data))
    np.testing.assert_array_equal(x.to_torch().numpy(), data)
    y = sd.tensor(sd.f32, (4, 6), backend=N, layout=(1, 0))
    y.copy_from(x)
    np.testing.assert_array_equal(y.to_numpy(), data)


@test_archs(archs=exactly("cpu"))
def test_zero_copy_views_are_strided(arch):
    torch, x, y, t = laid_out_pair_and_view(N, _values((3, 5)))

    @sd.kernel
    def read(x: ND) -> sd.f32:
        return x[1, 2]

    assert read(x) == -7.0
    u = y.to_torch(copy=False)
    assert tuple(u.shape) == (2, 3, 4) and u.stride() == (3, 1, 6)
    d = torch.from_dlpack(x)  # DLPack: the same strided view
    assert tuple(d.shape) == (3, 5) and d.stride() == (1, 3)
    d[0, 4] = 11.0
    assert x[0, 4] == 11.0 and read(x) == -7.0


@test_archs()
def test_another_layout_of_the_same_signature(arch):
    """Square ndarrays: the same dtype, rank and storage shape, only the layout differs; each
    is read through its own permutation (another program), in either order of first use."""
    data = _values((3, 3))
    arrays = [sd.tensor(sd.f32, (3, 3), backend=N, layout=lay) for lay in
              ((1, 0), None, (1, 0), None)]
    out = sd.ndarray(sd.f32, (3, 3))

    @sd.kernel
    def rows(x: ND, out: ND):
        for i, j in out:
            out[i, j] = x[i, j] * 10.0 + j

    for x in arrays:
        x.from_numpy(data)
        out.fill(0)
        rows(x, out)
        np.testing.assert_array_equal(out.to_numpy(), data * 10.0 + np.arange(3))
    keys = {k[3] for k in rows._cache}
    assert len(keys) == 2, keys  # one signature per layout
    if arch == "cpu":
        np.testing.assert_array_equal(arrays[0]._flat_view(), data.T.ravel())


def _accesses(tl):
    return [n for t in tl.tasks for n in walk(t.body)]


@test_archs(archs=exactly("cpu"), debug=False)
def test_accesses_index_the_storage_shape(arch, monkeypatch):
    """The first shapes are specialised (the storage's shape, constant), other shapes take the
    generic program; both right, with no division or remainder in the accesses."""
    monkeypatch.setenv("SPIRAD_SHAPE_SPECIALISE", "1")

    @sd.kernel
    def scale(x: ND, k: sd.f32):
        for b in range(x.shape[1]):
            for d in range(x.shape[0]):
                x[d, b] = x[d, b] * k + d

    want = lambda n: np.tile((np.arange(6) + 2.0)[:, None], (1, n)).astype(np.float32)  # noqa
    x = sd.tensor(sd.f32, (6, 256), backend=N, layout=(1, 0))
    x.fill(1.0)
    scale(x, 2.0)
    np.testing.assert_array_equal(x.to_numpy(), want(256))
    nodes = _accesses(scale.compile((x, 2.0)).tl)
    refs = [n.arg for n in nodes if n.op in GLOBAL_ACCESS]
    assert refs and all(tuple(r.shape) == (256, 6) for r in refs), refs
    assert not [n for n in nodes if n.op in (Op.DIV, Op.FLOORDIV, Op.MOD)]
    y = sd.tensor(sd.f32, (6, 100), backend=N, layout=(1, 0))
    y.fill(1.0)
    scale(y, 2.0)  # another shape: the generic program
    np.testing.assert_array_equal(y.to_numpy(), want(100))
    generic = [n for c in scale._cache.values() for n in _accesses(c.tl)
               if not any(m.op in GLOBAL_ACCESS and m.arg.shape for m in _accesses(c.tl))]
    assert [n for n in generic if n.op in GLOBAL_ACCESS]
    # the inner loop's `x.shape[0]`: the storage's axis 1 (the outer bound is the task's range)
    assert (0, 1) in {n.arg for n in generic if n.op == Op.NDARRAY_SHAPE}
    np.testing.assert_array_equal(x.to_numpy(), want(256))


@test_archs(debug=False)
def test_out_of_range_index_is_checked_per_axis(arch):
    x = sd.tensor(sd.f32, (3, 5), backend=N, layout=(1, 0))
    x.fill(1.0)

    @sd.kernel
    def poke(x: ND, i: sd.i32, j: sd.i32):
        x[i, j] = 9.0

    poke(x, 1, 4)
    assert x[1, 4] == 9.0
    if arch == "cpu":  # element 4 * 3 + 1 of the storage
        assert x._flat_view()[13] == 9.0
    # (3, 0) is inside the storage's 15 cells (element 3 of a C-order (5, 3)) but outside axis 0
    poke(x, 3, 0)
    with pytest.raises(SpiradOutOfBoundsError, match="kernel poke"):
        sd.sync()
    got = x.to_numpy()
    assert got[1, 4] == 9.0 and (np.delete(got.ravel(), 9) == 1.0).all()


@test_archs(debug_only="a named bounds error")
@pytest.mark.parametrize("specialise", ["1", "0"])
def test_out_of_range_index_named_by_the_canonical_axis_under_debug(arch, specialise, monkeypatch):
    # the checks test the storage's index on each storage axis; the error names the user's
    # axis and shape, with the program specialised on the shape and without
    monkeypatch.setenv("SPIRAD_SHAPE_SPECIALISE", specialise)
    x = sd.tensor(sd.f32, (3, 5), backend=N, layout=(1, 0))
    g = sd.tensor(sd.f32, (2, 3, 4), backend=N, layout=(2, 0, 1))

    @sd.kernel
    def poke(x: ND, i: sd.i32, j: sd.i32):
        x[i, j] = 9.0

    @sd.kernel
    def poke3(g: ND, i: sd.i32, j: sd.i32, k: sd.i32):
        g[i, j, k] = 9.0

    for args, axis, extent in (((3, 0), 0, 3), ((0, 5), 1, 5)):
        with pytest.raises(sd.SpiradBoundsError, match=rf"ndarray 'x' of shape \(3, 5\) "
                           rf"indexed with {args[axis]} on axis {axis} \(extent {extent};"):
            poke(x, *args)
            sd.sync()
    for args, axis in (((2, 0, 0), 0), ((0, 3, 0), 1), ((0, 0, 4), 2)):
        with pytest.raises(sd.SpiradBoundsError, match=rf"ndarray 'g' of shape \(2, 3, 4\) "
                           rf"indexed with {args[axis]} on axis {axis} "):
            poke3(g, *args)
            sd.sync()


@test_archs()
def test_gradients_follow_the_layout(arch):
    x = sd.tensor(sd.f32, (3, 4), backend=N, layout=(1, 0), needs_grad=True)
    loss = sd.ndarray(sd.f32, (), needs_grad=True)
    data = _values((3, 4))
    x.from_numpy(data)
    assert x.grad.layout == (1, 0)

    @sd.kernel
    def cubes(x: ND, loss: ND):
        for i, j in x:
            loss[None] += x[i, j] ** 3 * (i + 1) + x[i, 3 - j] * j

    cubes(x, loss)
    loss.grad.fill(1.0)
    cubes.grad(x, loss)
    d = data.astype(np.float64)
    want = 3 * d ** 2 * (np.arange(3)[:, None] + 1) + (3 - np.arange(4))[None, :]
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-5)
    if arch == "cpu":
        np.testing.assert_allclose(x.grad._flat_view(), want.T.ravel(), rtol=1e-5)


@test_archs(archs=exactly("cpu"))
def test_gradients_match_finite_differences(arch):
    """float64, a loss reading the array through both axes and its shape: the adjoint against
    central differences."""
    shape = (3, 4)
    x = sd.tensor(sd.f64, shape, backend=N, layout=(1, 0), needs_grad=True)
    loss = sd.ndarray(sd.f64, (), needs_grad=True)
    rng = np.random.default_rng(286)
    data = rng.uniform(-1, 1, shape)

    @sd.kernel
    def f(x: ND, loss: ND):
        for i, j in x:
            loss[None] += sd.sin(x[i, j]) * x[(i + 1) % x.shape[0], j] * (j + 1)

    def value(v):
        x.from_numpy(v)
        loss.fill(0)
        f(x, loss)
        return loss[None]

    value(data)
    loss.grad.fill(1.0)
    x.grad.fill(0)
    f.grad(x, loss)
    got = x.grad.to_numpy()
    np.testing.assert_array_equal(x.grad._flat_view(), got.T.ravel())
    h = 1e-6
    fd = np.zeros(shape)
    for idx in np.ndindex(shape):
        e = np.zeros(shape)
        e[idx] = h
        fd[idx] = (value(data + e) - value(data - e)) / (2 * h)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)


@test_archs()
def test_adstack_sized_from_a_laid_out_trip_count(arch):
    """Reverse mode through a loop whose trip count is read from an ndarray with `layout=`: the
    adstack sizers read it at the storage's indices (`sizing_cache.LaunchContext`, the GPU
    sizer's leaves), so the one long row is sized, and the gradient is the chain rule's."""
    shape = (2, 3)
    x = sd.tensor(sd.f32, shape, backend=N, layout=(1, 0), needs_grad=True)
    n = sd.tensor(sd.i32, shape, backend=N, layout=(1, 0))
    loss = sd.ndarray(sd.f32, (), needs_grad=True)
    trips = np.ones(shape, np.int32)
    trips[0, 2] = 9
    n.from_numpy(trips)
    data = np.linspace(0.1, 0.6, 6, dtype=np.float32).reshape(shape)
    x.from_numpy(data)

    @sd.kernel
    def f(x: ND, n: ND, loss: ND):
        for i, j in n:
            v = x[i, j]
            for _ in range(n[i, j]):
                v = sd.sin(v) * 0.9 + v * 0.2
            loss[None] += v

    f(x, n, loss)
    loss.grad.fill(1.0)
    f.grad(x, n, loss)
    want = np.ones(shape)
    for idx in np.ndindex(shape):
        v = float(data[idx])
        for _ in range(trips[idx]):
            want[idx] *= np.cos(v) * 0.9 + 0.2
            v = np.sin(v) * 0.9 + v * 0.2
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-4)
    if arch == "cpu":  # the trip counts were read from the storage's order
        np.testing.assert_array_equal(n._flat_view(), trips.T.ravel())


@test_archs(archs=exactly("cuda"))
def test_cuda_array_interface_has_the_permuted_strides(arch):
    x = sd.tensor(sd.f32, (3, 5), backend=N, layout=(1, 0))
    v = sd.Vector.tensor(2, sd.f32, (3, 4), backend=N, layout=(1, 0))
    c = x.__cuda_array_interface__
    assert c["shape"] == (3, 5) and c["strides"] == (4, 12)
    c = v.__cuda_array_interface__
    assert c["shape"] == (3, 4, 2) and c["strides"] == (8, 24, 4)
    assert sd.ndarray(sd.f32, (3, 5)).__cuda_array_interface__["strides"] is None


@test_archs()
def test_forward_mode_duals_follow_the_layout(arch):
    shape = (2, 3)
    x = sd.ndarray(sd.f32, shape, needs_dual=True, layout=(1, 0))
    y = sd.ndarray(sd.f32, shape, needs_dual=True, layout=(1, 0))
    assert x.dual.layout == (1, 0)
    data = _values(shape)
    x.from_numpy(data)

    @sd.kernel
    def f(x: ND, y: ND):
        for i, j in x:
            y[i, j] = x[i, j] ** 2 * (j + 1) + x[i, x.shape[1] - 1 - j]

    seed = np.arange(6, dtype=np.float32).reshape(shape) + 1.0
    with sd.ad.FwdMode(loss=y, param=x, seed=seed.ravel()):
        f(x, y)
    want = 2 * data * seed * (np.arange(3) + 1) + seed[:, ::-1]
    np.testing.assert_allclose(y.dual.to_numpy(), want, rtol=1e-5)


@test_archs(archs=exactly("cpu", "vulkan"))
def test_every_permutation_of_ranks_two_and_three(arch):
    """Each layout of a (2, 3) and a (2, 3, 4) ndarray: a kernel copies a canonical array into
    it and back through canonical indices, with `x.shape` per axis; host reads agree."""
    import itertools

    @sd.kernel
    def through(src: ND, x: ND, back: ND, last: sd.template()):
        for I in sd.grouped(src):
            x[I] = src[I] * 2.0 + x.shape[0] * 100.0 + x.shape[last] * 10.0
        for I in sd.grouped(x):
            back[I] = x[I]

    for shape in ((2, 3), (2, 3, 4)):
        data = _values(shape)
        src = sd.ndarray(sd.f32, shape)
        src.from_numpy(data)
        want = data * 2.0 + shape[0] * 100.0 + shape[-1] * 10.0
        for perm in itertools.permutations(range(len(shape))):
            x = sd.tensor(sd.f32, shape, backend=N, layout=perm)
            back = sd.ndarray(sd.f32, shape)
            through(src, x, back, len(shape) - 1)
            np.testing.assert_array_equal(x.to_numpy(), want, err_msg=str(perm))
            np.testing.assert_array_equal(back.to_numpy(), want, err_msg=str(perm))
            if arch == "cpu":  # stored in the layout's order
                np.testing.assert_array_equal(x._flat_view(), want.transpose(perm).ravel())


@test_archs()
def test_extents_of_one_and_zero(arch):
    """Genesis' `n_envs` 0 is one environment, and a scene may have no rows of a kind: a
    laid-out ndarray with an axis of 1 or 0 is written, read and zero-filled as any other."""

    @sd.kernel
    def k(x: ND):
        for i, j in x:
            x[i, j] = i * 10 + j + x.shape[0] * 100

    for shape in ((4, 1), (1, 4), (0, 5), (5, 0)):
        x = sd.tensor(sd.f32, shape, backend=N, layout=(1, 0), needs_grad=True)
        x.fill(0)
        x.grad.fill(1.0)
        k(x)
        want = np.add.outer(np.arange(shape[0]) * 10, np.arange(shape[1])) + shape[0] * 100
        np.testing.assert_array_equal(x.to_numpy(), want, err_msg=str(shape))
        assert x.storage_shape == shape[::-1] and x.grad.to_numpy().shape == shape
