"""Taichi's field offsets (`sd.field(..., offset=)`, `Vector.field` / `Matrix.field` /
`Struct.field(..., offset=)`, `root.dense(...).place(x, offset=)`): indices run over
[offset, offset + shape) in kernels, struct-for loops and Python scope; storage, `to_numpy` and
`from_numpy` are those of the field without an offset; bounds checks test the offset range and
name the user's index; gradients (reverse and forward mode) see the same indices."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs


@test_archs()
def test_struct_for_and_python_scope(arch):
    a = sd.field(sd.i32, shape=(4, 3), offset=(-2, 5))
    assert a.offset == (-2, 5) and a.shape == (4, 3)

    @sd.kernel
    def fill():
        for i, j in a:
            a[i, j] = i * 10 + j

    fill()
    want = np.add.outer(np.arange(-2, 2) * 10, np.arange(5, 8))
    np.testing.assert_array_equal(a.to_numpy(), want)  # element 0 is index (-2, 5)
    assert a[-2, 5] == -15 and a[1, 7] == 17
    a[0, 6] = 99
    assert a.to_numpy()[2, 1] == 99
    with pytest.raises(IndexError, match=r"offset \(-2, 5\)"):
        a[2, 6]
    with pytest.raises(IndexError):
        a[0, 4] = 1


@test_archs()
def test_grouped_range_ndrange_and_from_numpy(arch):
    v = sd.Vector.field(2, sd.f32, shape=6, offset=10)
    m = sd.Matrix.field(2, 2, sd.f32, shape=(3, 3), offset=(-1, -1))
    s = sd.field(sd.f32, shape=(), offset=None)
    v.from_numpy(np.arange(12, dtype=np.float32).reshape(6, 2))

    @sd.kernel
    def k():
        for I in sd.grouped(v):
            v[I] += sd.Vector([I[0], -I[0]])
        for i, j in sd.ndrange((-1, 2), (-1, 2)):
            m[i, j] = sd.Matrix([[i, j], [i * j, 1.0]])
        for i in range(10, 16):
            s[None] += v[i][0]

    k()
    base = np.arange(12, dtype=np.float32).reshape(6, 2)
    want = base + np.stack([np.arange(10, 16), -np.arange(10, 16)], 1)
    np.testing.assert_allclose(v.to_numpy(), want)
    assert s[None] == pytest.approx(want[:, 0].sum())
    mm = m.to_numpy()
    for i in range(-1, 2):
        for j in range(-1, 2):
            np.testing.assert_allclose(mm[i + 1, j + 1], [[i, j], [i * j, 1]])
    assert m[1, -1][1, 0] == -1.0
    m[1, -1][0, 1] = 7.0  # the element read from Python writes through, at the same index
    v[12][1] = -3.0
    assert m.to_numpy()[2, 0, 0, 1] == 7.0 and v.to_numpy()[2, 1] == -3.0


@test_archs()
def test_place_with_offset(arch):
    a = sd.field(sd.f32)
    b = sd.field(sd.f32)
    sd.root.dense(sd.ij, (4, 2)).place(a, b, offset=(16, -16))
    assert a.offset == b.offset == (16, -16)

    @sd.kernel
    def k():
        for i, j in a:
            a[i, j] = i + j * 10
            b[i, j] = a[i, j] * 2

    k()
    for i in range(16, 20):
        for j in range(-16, -14):
            assert a[i, j] == i + j * 10 and b[i, j] == 2 * (i + j * 10)


@test_archs()
def test_struct_field_offset(arch):
    p = sd.Struct.field({"x": sd.f32, "offset": sd.i32}, shape=5, offset=-3)  # a member 'offset'

    @sd.kernel
    def k():
        for i in p:
            p[i].x = i * 0.5
            p[i].offset = i

    k()
    np.testing.assert_array_equal(p.offset.to_numpy(), np.arange(-3, 2))
    np.testing.assert_allclose(p.x.to_numpy(), np.arange(-3, 2) * 0.5)


@test_archs()
def test_gradients_reverse_and_forward(arch):
    n, off = 8, -4
    x = sd.field(sd.f32, shape=n, offset=off, needs_grad=True, needs_dual=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True, needs_dual=True)

    @sd.kernel
    def f():
        for i in x:
            loss[None] += sd.sin(x[i]) * i
            if i > off:
                loss[None] += x[i] * x[i - 1]

    data = np.linspace(-1, 1, n)
    x.from_numpy(data.astype(np.float32))

    def ref(d):
        idx = np.arange(off, off + n)
        return np.sum(np.sin(d) * idx) + np.sum(d[1:] * d[:-1])

    with sd.ad.Tape(loss=loss):
        f()
    assert loss[None] == pytest.approx(ref(data), rel=1e-5, abs=1e-5)
    h = 1e-6
    fd = np.array([(ref(data + h * e) - ref(data - h * e)) / (2 * h) for e in np.eye(n)])
    np.testing.assert_allclose(x.grad.to_numpy(), fd, rtol=1e-4, atol=1e-4)
    assert x.grad[off] == pytest.approx(fd[0], rel=1e-4, abs=1e-4)  # the grad's offset: x's
    seed = np.zeros(n)
    seed[3] = 1.0
    loss[None] = 0
    with sd.ad.FwdMode(loss=loss, param=x, seed=list(seed)):
        f()
    assert loss.dual[None] == pytest.approx(fd[3], rel=1e-4, abs=1e-4)


@test_archs(debug_only="the named bounds check (the user's index, valid range) is debug=True's")
def test_debug_bounds_check_names_users_index(arch):
    a = sd.field(sd.f32, shape=(4, 3), offset=(-2, 5))

    @sd.kernel
    def k(i: sd.i32):
        a[i, 6] = 1.0

    k(1)
    assert a[1, 6] == 1.0
    k(2)
    with pytest.raises(IndexError, match=r"indexed with 2 on axis 0 .*valid -2\.\.1") as e:
        sd.sync()
    assert "offset (-2, 5)" in str(e.value)
    k(-3)
    with pytest.raises(IndexError, match=r"indexed with -3 on axis 0"):
        sd.sync()


@test_archs()
def test_default_bounds_check_uses_offset_range(arch):
    sd.init(arch=arch)  # debug off: the default check
    a = sd.field(sd.f32, shape=4, offset=100)

    @sd.kernel
    def k(i: sd.i32):
        a[i] = 1.0

    k(103)
    assert a[103] == 1.0
    k(3)  # index 3 < offset: out of range, skipped, reported at the next sync
    with pytest.raises(IndexError, match=r"field 'a' of shape \(4,\) and offset \(100,\)"):
        sd.sync()
    assert a.to_numpy().tolist() == [0, 0, 0, 1]


@test_archs(archs=exactly("cpu"))
def test_offset_errors(arch):
    with pytest.raises(sd.SpiradSyntaxError, match=r"dimensionality of shape and offset must be "
                                                   r"the same \(1 != 2\)"):
        sd.field(sd.f32, shape=3, offset=(3, 4))
    with pytest.raises(sd.SpiradSyntaxError, match="shape cannot be None when offset is set"):
        sd.Vector.field(3, sd.f32, shape=None, offset=(3,))
    with pytest.raises(sd.SpiradSyntaxError, match=r"\(3 != 2\)"):
        sd.Matrix.field(2, 2, sd.f32, shape=(4, 4, 4), offset=(1, 2))
    with pytest.raises(sd.SpiradSyntaxError, match=r"\(2 != 1\)"):
        sd.root.dense(sd.ij, 4).place(sd.field(sd.f32), offset=3)
    with pytest.raises(sd.SpiradTypeError, match="offset"):
        sd.field(sd.f32, shape=3, offset=1.5)
