"""A vector / matrix field's components placed apart (Taichi's `v.get_scalar_field(i, j)`), the
launch check of their shapes, and Taichi's `v._get_dynamic_index_stride()` (numbers checked
against Taichi 1.7.4; spirad.data.matrix_members)."""
import numpy as np
import pytest

import spirad as sd
from spirad.runtime.program_hooks import get_runtime
from tests.support.archs import test_archs


@test_archs()
def test_components_on_different_nodes(arch):
    """Components on nodes of different depth: kernels (a run-time component index) and Python
    read and write the same elements."""
    v = sd.Vector.field(2, sd.i32)
    x, y = v.get_scalar_field(0), v.get_scalar_field(1)
    sd.root.dense(sd.i, 8).place(x)
    sd.root.dense(sd.i, 2).dense(sd.i, 4).place(y)
    assert v.shape == x.shape == y.shape == (8,)

    @sd.kernel
    def fill():
        for i in range(8):
            for j in range(2):
                v[i][j] = i * 10 + j

    fill()
    expect = np.array([[i * 10, i * 10 + 1] for i in range(8)])
    np.testing.assert_array_equal(v.to_numpy(), expect)
    np.testing.assert_array_equal(y.to_numpy(), expect[:, 1])
    assert x[3] == 30 and y[5] == 51
    y[2] = -7
    assert v[2][1] == -7 and v[2][0] == 20
    assert v._get_dynamic_index_stride() is None  # paths of different length


@test_archs()
def test_matrix_components_apart_gradient(arch):
    """A matrix field with a gradient, its columns in two blocks: the gradient of
    sum_i trace(m_i @ m_i) is the analytic 2 m_i^T."""
    m = sd.Matrix.field(2, 2, sd.f32, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)
    sd.root.dense(sd.i, 3).place(m.get_scalar_field(0, 0), m.get_scalar_field(1, 0))
    sd.root.dense(sd.i, 3).place(m.get_scalar_field(0, 1), m.get_scalar_field(1, 1))
    data = np.arange(12, dtype=np.float32).reshape(3, 2, 2) / 7
    m.from_numpy(data)

    @sd.kernel
    def trace_sq():
        for i in m:
            loss[None] += (m[i] @ m[i]).trace()

    with sd.ad.Tape(loss):
        trace_sq()
    d = data.astype(np.float64)
    np.testing.assert_allclose(loss[None], sum(np.trace(a @ a) for a in d), rtol=1e-5)
    np.testing.assert_allclose(m.grad.to_numpy(), 2 * d.transpose(0, 2, 1), rtol=1e-5)
    assert m._get_dynamic_index_stride() is None  # Taichi 1.7.4: None


@test_archs()
def test_dynamic_index_stride_numbers(arch):
    """Taichi 1.7.4's answers, field by field."""
    a = sd.Vector.field(3, sd.i32)
    sd.root.dense(sd.i, 8).place(*(a.get_scalar_field(k) for k in range(3)))
    b = sd.Vector.field(3, sd.f64, shape=5)
    c = sd.Vector.field(2, sd.i32, shape=6, layout=sd.Layout.SOA)
    e = sd.Vector.field(2, sd.i16)
    blk = sd.root.dense(sd.i, 4)
    blk.dense(sd.j, 2).place(e.get_scalar_field(0))
    blk.dense(sd.j, 2).place(e.get_scalar_field(1))
    g = sd.Vector.field(2, sd.i32, shape=(3, 4), layout=sd.Layout.SOA)
    s = sd.field(sd.f32, shape=3)
    w = sd.Vector.field(3, sd.i32)
    temp = sd.field(sd.f32)
    sd.root.dense(sd.i, 8).place(w.get_scalar_field(0), w.get_scalar_field(1), temp,
                                 w.get_scalar_field(2))
    get_runtime().materialize()
    assert [f._get_dynamic_index_stride() for f in (a, b, c, e, g, w)] == [4, 8, 24, 4, 48, None]
    with pytest.raises(sd.SpiradTypeError, match="scalar field"):
        s.get_scalar_field(0)
    with pytest.raises(sd.SpiradValueError, match="3 x 1 components"):
        a.get_scalar_field(3)


@test_archs()
def test_component_shapes_differ(arch):
    """Components placed on nodes of different shapes: Taichi's error at the next launch."""
    a = sd.Matrix.field(2, 2, sd.i32)
    for (r, c), n in {(0, 0): 10, (0, 1): 11, (1, 0): 10, (1, 1): 11}.items():
        sd.root.dense(sd.i, n).place(a.get_scalar_field(r, c))

    @sd.kernel
    def nothing():
        pass

    with pytest.raises(RuntimeError, match=r"Members of the following field have different "
                                           r"shapes \[\(10,\), \(11,\), \(10,\), \(11,\)\]"):
        nothing()


@test_archs()
def test_component_refusals(arch):
    """A component left unplaced, or components below different sparse nodes: refused where
    the field is used; a component of a field placed whole cannot be placed."""
    v = sd.Vector.field(2, sd.i32)
    sd.root.dense(sd.i, 4).place(v.get_scalar_field(0))
    with pytest.raises(RuntimeError, match=r"components \[1\] are not placed"):
        v.to_numpy()
    sd.root.dense(sd.i, 2).pointer(sd.i, 2).place(v.get_scalar_field(1))
    with pytest.raises(sd.SpiradNotSupportedError, match="below different sparse SNodes"):
        v.to_numpy()
    with pytest.raises(sd.SpiradValueError, match="already placed"):
        sd.root.dense(sd.i, 4).place(v.get_scalar_field(1))
    placed = sd.Vector.field(2, sd.i32, shape=4)
    with pytest.raises(sd.SpiradValueError, match="cannot be placed apart"):
        sd.root.dense(sd.i, 4).place(placed.get_scalar_field(0))
