"""Quadrants' `sd.tensor(..., layout=perm)` for fields: the storage holds the axes in `perm`'s
order (Genesis lays its constraint solver's tensors out environment-first on the CPU), host
reads, writes and zero-copy views see the logical array, kernels address the storage with the
indices permuted (no address arithmetic, each index checked against its own axis), gradients
follow their primal's layout."""
import math

import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradOutOfBoundsError
from kernel_ir.nodes import walk
from kernel_ir.ops import GLOBAL_ACCESS, Op
from tests.support.archs import exactly, test_archs
from tests.support.layout_storage import check_filled_in_layout_order, laid_out_pair_and_view

F = sd.Backend.FIELD


def _values(shape):
    return np.arange(math.prod(shape), dtype=np.float32).reshape(shape) * 0.5 - 3.0


@test_archs()
def test_storage_is_in_layout_order(arch):
    a = sd.tensor(sd.f32, (3, 5), backend=F, layout=(1, 0))
    b = sd.tensor(sd.i32, (2, 3, 4), backend=F, layout=(2, 0, 1))
    v = sd.Vector.tensor(2, sd.f32, (3, 4), backend=F, layout=(1, 0))

    @sd.kernel
    def fill():
        for i, j in sd.ndrange(3, 5):
            a[i, j] = i * 10 + j
        for i, j, k in sd.ndrange(2, 3, 4):
            b[i, j, k] = i * 100 + j * 10 + k
        for i, j in sd.ndrange(3, 4):
            v[i, j] = sd.Vector([i, j * 2])

    fill()
    check_filled_in_layout_order(arch, a, b, v)


@test_archs(archs=exactly("cpu"))
def test_layout_reports_the_axis_order(arch):
    # Quadrants' `Field.layout`: the permutation passed, None for the identity / none given
    assert sd.tensor(sd.f32, (3, 5), backend=F, layout=(1, 0)).layout == (1, 0)
    assert sd.tensor(sd.f32, (2, 3, 4), backend=F, layout=(2, 0, 1)).layout == (2, 0, 1)
    assert sd.tensor(sd.f32, (3, 5), backend=F, layout=(0, 1)).layout is None
    assert sd.tensor(sd.f32, (3, 5), backend=F).layout is None
    assert sd.field(sd.f32, shape=(3, 5), order="ji").layout == (1, 0)
    assert sd.Vector.tensor(2, sd.f32, (3, 4), backend=F, layout=(1, 0)).layout == (1, 0)


@test_archs()
def test_host_writes_and_kernel_reads(arch):
    x = sd.tensor(sd.f32, (4, 6), backend=F, layout=(1, 0))
    out = sd.tensor(sd.f32, (4, 6), backend=F)
    data = _values((4, 6))
    x.from_numpy(data)
    x[2, 5] = 42.0

    @sd.kernel
    def copy():
        for i, j in sd.ndrange(4, 6):
            out[i, j] = x[i, j] * 2.0 + x[3 - i, j]

    copy()
    data[2, 5] = 42.0
    np.testing.assert_array_equal(out.to_numpy(), data * 2.0 + data[::-1])
    assert x[2, 5] == 42.0 and x[1, 3] == data[1, 3]


@test_archs(archs=exactly("cpu"))
def test_to_torch_zero_copy_is_a_strided_view(arch):
    torch, x, y, t = laid_out_pair_and_view(F, _values((3, 5)))

    @sd.kernel
    def read() -> sd.f32:
        return x[1, 2]

    assert read() == -7.0
    u = y.to_torch(copy=False)
    assert tuple(u.shape) == (2, 3, 4) and u.stride() == (3, 1, 6)


def _compiled_accesses(monkeypatch, kernel, *args):
    """The global accesses of what the backend compiles for `kernel(*args)`."""
    from spirad.compile import driver
    seen = []
    real = driver.taichi_addresses

    def keep(tl, layout_of, debug):
        out = real(tl, layout_of, debug)
        seen.append(out)
        return out
    monkeypatch.setattr(driver, "taichi_addresses", keep)
    kernel(*args)
    assert seen
    return [n for tl in seen for t in tl.tasks for n in walk(t.body)]


@test_archs(archs=exactly("cpu"), debug=False)
def test_accesses_index_the_storage_shape(arch, monkeypatch):
    x = sd.tensor(sd.f32, (6, 256), backend=F, layout=(1, 0))

    @sd.kernel
    def scale(k: sd.f32):
        for b in range(256):
            for d in range(6):
                x[d, b] = x[d, b] * k

    nodes = _compiled_accesses(monkeypatch, scale, 2.0)
    refs = [n.arg for n in nodes if n.op in GLOBAL_ACCESS and n.arg.kind == "field"]
    assert refs and all(tuple(r.shape) == (256, 6) for r in refs)
    arithmetic = {Op.DIV, Op.FLOORDIV, Op.MOD}
    assert not [n for n in nodes if n.op in arithmetic]


@test_archs(debug=False)
def test_out_of_range_index_is_checked_per_axis(arch):
    x = sd.tensor(sd.f32, (3, 5), backend=F, layout=(1, 0))
    x.fill(1.0)

    @sd.kernel
    def poke(i: sd.i32, j: sd.i32):
        x[i, j] = 9.0

    poke(2, 4)
    assert x[2, 4] == 9.0
    # (3, 0) is inside the storage's 15 cells (element 3 of a C-order (5, 3)) but outside axis 0
    poke(3, 0)
    with pytest.raises(SpiradOutOfBoundsError, match="kernel poke"):
        sd.sync()
    got = x.to_numpy()
    assert got[2, 4] == 9.0 and (np.delete(got.ravel(), 14) == 1.0).all()


@test_archs(debug_only="a named bounds error")
def test_out_of_range_index_named_under_debug(arch):
    x = sd.tensor(sd.f32, (3, 5), backend=F, layout=(1, 0))

    @sd.kernel
    def poke(i: sd.i32, j: sd.i32):
        x[i, j] = 9.0

    with pytest.raises(sd.SpiradBoundsError, match="indexed with 3 on axis 0"):
        poke(3, 0)
        sd.sync()


@test_archs()
def test_gradients_follow_the_layout(arch):
    x = sd.tensor(sd.f32, (3, 4), backend=F, layout=(1, 0), needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)
    data = _values((3, 4))
    x.from_numpy(data)

    @sd.kernel
    def cubes():
        for i, j in sd.ndrange(3, 4):
            loss[None] += x[i, j] ** 3 * (i + 1)

    with sd.ad.Tape(loss):
        cubes()
    want = 3 * data.astype(np.float64) ** 2 * (np.arange(3)[:, None] + 1)
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-5)
    if arch == "cpu":
        np.testing.assert_allclose(x.grad._flat_view(), want.T.ravel(), rtol=1e-5)


@test_archs(archs=exactly("cpu"))
def test_taichi_order_field_zero_copy_view(arch):
    pytest.importorskip("torch")
    x = sd.field(sd.f32, shape=(3, 5), order="ji")
    x.from_numpy(_values((3, 5)))
    t = x.to_torch(copy=False)
    assert t.stride() == (1, 3)
    np.testing.assert_array_equal(t.numpy(), _values((3, 5)))
    t[2, 1] = 5.0
    assert x[2, 1] == 5.0
