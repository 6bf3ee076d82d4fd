"""Taichi's layout API (issue #13 item 1): `root.dense(...).place(x, x.grad)`, `lazy_grad`,
`dense(ij, n)`, `place(..., needs_grad=True)`, gradients enabled after kernels were compiled, and
the "not supported" errors of hash / bit_struct SNodes."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, exactly, test_archs


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


@test_archs(archs=exactly("cpu"))
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


# -- Taichi's physical layout (spirad.data.snode_layout): hierarchy order, indices outside the
# shape going where Taichi's go. Expected values: Taichi 1.7.4 on the CPU (the same program).

@test_archs()
def test_hierarchy_order_rigid_body_toi(arch):
    """DiffTaichi's rigid_body_toi: `dense(l, T).dense(i, 1)` gives shape (1, T), and the
    program writes `x[t, 0]` (i = t, beyond its extent 1): Taichi's address is that of
    `x[0, t]`, so the write and the read meet there; the field placed beside it is untouched."""
    sd.init(arch=arch, debug=False)
    x = sd.Vector.field(2, sd.f32)
    v = sd.field(sd.f32)
    sd.root.dense(sd.l, 8).dense(sd.i, 1).place(x, v)
    assert x.shape == v.shape == (1, 8)

    @sd.kernel
    def write():
        for t in range(8):
            x[t, 0] = sd.Vector([t * 1.0, -t * 1.0])

    @sd.kernel
    def shifted(t: sd.i32) -> sd.f32:
        return x[t, 0][0] + x[0, t][1] * 10

    write()
    got = x.to_numpy()
    np.testing.assert_array_equal(got[0, :, 0], np.arange(8))
    np.testing.assert_array_equal(got[0, :, 1], -np.arange(8))
    assert shifted(5) == 5 - 50 and x[0, 3][1] == -3
    np.testing.assert_array_equal(v.to_numpy(), 0)


@test_archs()
def test_hierarchy_order_addresses_match_taichi(arch):
    """Writes through indices inside and outside the shape land where Taichi 1.7.4 puts them
    (`dense(l, 6).dense(i, 2)`, shape (2, 6)); host writes and reads agree with kernels."""
    sd.init(arch=arch, debug=False)
    x = sd.field(sd.i32)
    y = sd.field(sd.i32)
    sd.root.dense(sd.l, 6).dense(sd.i, 2).place(x, y)

    @sd.kernel
    def w(a: sd.i32, b: sd.i32, val: sd.i32):
        x[a, b] = val

    @sd.kernel
    def r(a: sd.i32, b: sd.i32) -> sd.i32:
        return x[a, b]

    for k, idx in enumerate([(0, 1), (1, 2), (3, 0), (5, 1), (2, 0), (1, 5), (7, 0)]):
        w(*idx, 100 + k)
    taichi = [0, 104, 0, 0, 0, 0, 0, 102, 101, 106, 0, 105]  # Taichi 1.7.4's x.to_numpy()
    np.testing.assert_array_equal(x.to_numpy().ravel(), taichi)
    np.testing.assert_array_equal(y.to_numpy(), 0)
    assert r(7, 0) == 106 and r(3, 0) == x[1, 1] == 102
    x[1, 4] = 7  # a host write: kernels read it at its element
    assert r(1, 4) == 7
    data = np.arange(12, dtype=np.int32).reshape(2, 6)
    x.from_numpy(data)
    np.testing.assert_array_equal(x.to_numpy(), data)
    assert all(r(a, b) == data[a, b] for a in range(2) for b in range(6))


@test_archs()
def test_split_axis_blocking(arch):
    """`dense(i, 4).dense(i, 8)`: one axis over two levels (Taichi's blocking) and a 2-D block
    `dense(ij, (2, 3)).dense(ij, (4, 2))`: the addresses of indices outside the shape are
    Taichi's; one outside the field's cells is skipped and reported (never a write outside)."""
    sd.init(arch=arch, debug=False)
    a = sd.field(sd.i32)
    sd.root.dense(sd.i, 4).dense(sd.i, 8).place(a)
    b = sd.field(sd.i32)
    sd.root.dense(sd.ij, (2, 3)).dense(sd.ij, (4, 2)).place(b)
    assert a.shape == (32,) and b.shape == (8, 6)

    @sd.kernel
    def wb(i: sd.i32, j: sd.i32, val: sd.i32):
        b[i, j] = val

    for k, idx in enumerate([(0, 1), (1, 6), (5, 0), (9, 0), (0, 9)]):
        wb(*idx, 100 + k)
    with pytest.raises(sd.SpiradOutOfBoundsError, match="'b'"):
        sd.sync()  # b[1, 6] and b[9, 0] are outside b's cells
    got = b.to_numpy().ravel()
    expect = np.zeros(48, np.int32)
    expect[[1, 30, 27]] = [100, 102, 104]  # Taichi 1.7.4's b.to_numpy()
    np.testing.assert_array_equal(got, expect)

    @sd.kernel
    def fill_a():
        for i in a:
            a[i] = i * 3

    fill_a()
    np.testing.assert_array_equal(a.to_numpy(), np.arange(32) * 3)
    assert a[31] == 93


@test_archs(debug_only="release sends an index outside the shape whose address is inside the cells where Taichi sends it (passes/taichi_layout, rigid_body_toi); debug names it")
def test_layout_debug_names_index(arch):
    """Under debug=True an index outside the shape is an error naming it, as for any field."""
    x = sd.field(sd.f32)
    sd.root.dense(sd.l, 4).dense(sd.i, 1).place(x)

    @sd.kernel
    def w(t: sd.i32):
        x[t, 0] = 1.0

    w(0)
    with pytest.raises(sd.SpiradIndexError, match="indexed with 2 on axis 0"):
        w(2)
        sd.sync()


@test_archs()
def test_layout_gradients_against_finite_differences(arch):
    """Reverse mode through fields in hierarchy order (`x.grad` placed beside x, and one from
    lazy_grad): the gradients against central differences of the same kernel."""
    sd.init(arch=arch, debug=False)
    x = sd.field(sd.f32)
    w = sd.field(sd.f32)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)
    sd.root.dense(sd.l, 5).dense(sd.i, 1).place(x, x.grad)
    sd.root.dense(sd.j, 3).dense(sd.i, 2).place(w)
    sd.root.lazy_grad()

    @sd.kernel
    def f():
        for t in range(5):
            loss[None] += x[t, 0] * x[t, 0] * (t + 1) * w[t % 2, t % 3]

    xs = np.linspace(-1, 1, 5).astype(np.float32).reshape(1, 5)
    ws = np.arange(1, 7, dtype=np.float32).reshape(2, 3) / 4
    x.from_numpy(xs)
    w.from_numpy(ws)
    with sd.ad.Tape(loss):
        f()

    def value(xv, wv):
        x.from_numpy(xv.astype(np.float32))
        w.from_numpy(wv.astype(np.float32))
        loss[None] = 0
        f()
        return float(loss[None])

    eps = 1e-2
    for field, data, other in ((x, xs, ws), (w, ws, xs)):
        fd = np.zeros(data.shape)
        for idx in np.ndindex(data.shape):
            hi, lo = data.astype(np.float64), data.astype(np.float64)
            hi[idx] += eps
            lo[idx] -= eps
            args = (hi, other) if field is x else (other, hi)
            args_lo = (lo, other) if field is x else (other, lo)
            fd[idx] = (value(*args) - value(*args_lo)) / (2 * eps)
        np.testing.assert_allclose(field.grad.to_numpy(), fd, rtol=2e-3, atol=2e-3)
    assert np.abs(x.grad.to_numpy()).max() > 0.1


@test_archs()
def test_field_order(arch):
    """`sd.field(..., order="ji")` (Taichi's): j outermost in memory, one level per axis, so
    `b[5, 0]` (i beyond its extent 4) is Taichi's cell 5, the element b[1, 1]."""
    sd.init(arch=arch, debug=False)
    b = sd.field(sd.f32, shape=(4, 3), order="ji", needs_grad=True)
    assert b.shape == b.grad.shape == (4, 3)

    @sd.kernel
    def fill():
        for i, j in b:
            b[i, j] = i * 10 + j

    @sd.kernel
    def at(i: sd.i32, j: sd.i32) -> sd.f32:
        return b[i, j]

    fill()
    np.testing.assert_array_equal(b.to_numpy(), np.arange(4)[:, None] * 10 + np.arange(3))
    assert at(5, 0) == b[1, 1] == 11
    with pytest.raises(sd.SpiradSyntaxError, match="must be different"):
        sd.field(sd.f32, shape=(2, 2), order="ii")


@test_archs()
def test_vector_field_soa_and_order(arch):
    """`Vector.field(..., layout=sd.Layout.SOA)` stores each component apart (component-major),
    so an index past one component's cells reaches the next component's, and `order="ji"` with
    either layout puts j outermost; the values below are Taichi 1.7.4's for the same writes."""
    sd.init(arch=arch, debug=False)
    x = sd.Vector.field(2, sd.i32, shape=4, layout=sd.Layout.SOA)
    y = sd.Vector.field(3, sd.i32, shape=(2, 3), order="ji", layout=sd.Layout.SOA)
    z = sd.Vector.field(2, sd.i32, shape=(2, 3), order="ji")
    m = sd.Matrix.field(2, 2, sd.i32, shape=3, layout=sd.Layout.SOA)

    @sd.kernel
    def w():
        x[4][0] = 7
        x[5][0] = 8
        x[-1][1] = 9
        y[2, 0][0] = 5
        y[0, 3][1] = 6
        z[2, 0][1] = 4
        m[3][0, 0] = 3  # past component (0, 0)'s cells: component (0, 1) of m[0]

    w()
    assert x.to_numpy().tolist() == [[0, 7], [0, 8], [0, 0], [9, 0]]
    assert y.to_numpy().tolist() == [[[0, 0, 6], [5, 0, 0], [0, 0, 0]], [[0] * 3] * 3]
    assert z.to_numpy().tolist() == [[[0, 0], [0, 4], [0, 0]], [[0, 0]] * 3]
    assert m.to_numpy()[0].tolist() == [[0, 3], [0, 0]]
    x[1] = [11, 12]
    assert list(x[1]) == [11, 12] and x.to_numpy()[1].tolist() == [11, 12]
    with pytest.raises(sd.SpiradTypeError, match="layout"):
        sd.Vector.field(2, sd.f32, shape=2, layout="soa")


@test_archs()
def test_soa_gradients_against_finite_differences(arch):
    """Reverse mode through a component-major (SOA) vector field and its gradient (the
    gradient is stored as its field is): against central differences."""
    sd.init(arch=arch, debug=False)
    v = sd.Vector.field(3, sd.f32, shape=4, layout=sd.Layout.SOA, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def f():
        for i in v:
            loss[None] += v[i].dot(v[i]) * (i + 1) + v[i][0] * v[i][2]

    data = np.linspace(-1, 1, 12).astype(np.float32).reshape(4, 3)
    v.from_numpy(data)
    with sd.ad.Tape(loss):
        f()
    got = v.grad.to_numpy()

    def value(arr):
        v.from_numpy(arr.astype(np.float32))
        loss[None] = 0
        f()
        return float(loss[None])

    eps, fd = 1e-2, np.zeros((4, 3))
    for idx in np.ndindex(4, 3):
        hi, lo = data.astype(np.float64), data.astype(np.float64)
        hi[idx] += eps
        lo[idx] -= eps
        fd[idx] = (value(hi) - value(lo)) / (2 * eps)
    np.testing.assert_allclose(got, fd, rtol=2e-3, atol=2e-3)


@test_archs(archs=EVERY_ARCH)
def test_layout_tape_validation(arch):
    """`Tape(validation=True)` over a field in hierarchy order indexed past its extent as
    rigid_body_toi does: the checkbits follow the field's addresses (no false out-of-range),
    and an overwrite of an element a recorded kernel read is still reported."""
    sd.init(arch=arch, debug=False)
    x = sd.field(sd.f32)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)
    sd.root.dense(sd.l, 4).dense(sd.i, 1).place(x, x.grad)

    @sd.kernel
    def step(t: sd.i32):  # reads t, writes t + 1 (allowed)
        x[t + 1, 0] = x[t, 0] * 2 + 1

    @sd.kernel
    def reduce():
        loss[None] += x[3, 0]

    @sd.kernel
    def clobber():
        for t in range(2):
            x[t, 0] = 0.0  # x[0, 0] was read by step(0)

    x[0, 0] = 0.5
    with sd.ad.Tape(loss=loss, validation=True):
        for t in range(3):
            step(t)
        reduce()
    assert loss[None] == 11.0 and x.grad[0, 0] == 8.0
    with pytest.raises(sd.SpiradAutodiffError, match=r"kernel clobber overwrote elements of x "
                                                      r"\(1 element"):
        with sd.ad.Tape(loss=loss, validation=True):
            step(0)
            clobber()


@test_archs(archs=exactly("cpu"))
def test_cell_sizes_and_offsets_match_taichi(arch):
    """Taichi's `_cell_size_bytes` / `_offset_bytes_in_parent_cell` / `_physical_index_position`
    of a tree with a shape= field, a vector field, mixed widths and axes out of order: every
    number below is what Taichi 1.7.4 prints for the same program (arch=cpu)."""
    sd.field(sd.u8, shape=3)                       # root.dense(i, 3).place(a), made first
    v, w, s, b = sd.Vector.field(3, sd.f32), sd.field(sd.f64), sd.field(sd.i16), sd.field(sd.u8)
    n1 = sd.root.dense(sd.ij, (2, 5))
    n1.place(s)
    n2 = n1.dense(sd.i, 3)
    n2.place(v, w)                                 # cell {f32 x3, f64}: 24 bytes
    n3 = sd.root.dense(sd.k, 3).dense(sd.j, 2)
    n3.place(b)
    assert (n1._cell_size_bytes, n1._offset_bytes_in_parent_cell) == (80, 8)
    assert (n2._cell_size_bytes, n2._offset_bytes_in_parent_cell) == (24, 8)
    assert (v.snode._offset_bytes_in_parent_cell, w.snode._offset_bytes_in_parent_cell,
            s.snode._offset_bytes_in_parent_cell, v.snode._cell_size_bytes) == (0, 16, 0, 0)
    assert n3.parent()._cell_size_bytes == 2
    assert b.snode._physical_index_position() == {0: 1, 1: 2}
    p = sd.field(sd.f32)
    sd.root.pointer(sd.i, 4).place(p)
    with pytest.raises(sd.SpiradNotSupportedError, match="sparse SNode"):
        p.snode.parent()._cell_size_bytes


@test_archs(archs=exactly("cpu"))
def test_snode_tree_ids_follow_launches(arch):
    """Taichi's `x.snode._snode_tree_id`: fields declared between two launches share a tree
    (0 first); a launch before any field opens none. A kernel body of `...` is empty."""
    @sd.kernel
    def touch(_: sd.template()): ...

    touch(0)
    a, b = sd.field(sd.i32, shape=()), sd.field(sd.f32)
    sd.root.dense(sd.i, 4).place(b)
    touch(a)
    c = sd.field(sd.i32, shape=2)
    touch(c)
    assert (a.snode._snode_tree_id, b.snode._snode_tree_id, c.snode._snode_tree_id) == (0, 0, 1)
    assert b.snode.parent()._snode_tree_id == 0
