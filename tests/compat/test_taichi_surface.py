"""The Taichi surface that DiffTaichi-style programs use (issue #23), each with Taichi 1.7.4's
meaning; expected values that needed Taichi were measured with Taichi 1.7.4 on the CPU and are
written here as numbers. The three results that were silently wrong before have their own tests:
axis-label order, `x[i][c] = v` from Python, and `eps` in `norm` / `normalized` in kernels."""
import math

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


# -- axis labels -------------------------------------------------------------------------------
@test_archs()
def test_axis_labels_follow_axis_order(arch):
    """Silent wrong result (1): `dense(l, T).dense(i, n)` is indexed `[i, t]` (axis order), not
    in nesting order. Shapes as Taichi 1.7.4 reports them."""
    x = sd.field(sd.f32)
    sd.root.dense(sd.l, 3).dense(sd.i, 5).place(x)
    y = sd.field(sd.f32)
    sd.root.dense(sd.jk, (2, 3)).dense(sd.i, 4).place(y)
    z = sd.field(sd.f32)
    sd.root.dense(sd.axes(2), 3).dense(sd.axes(0, 1), (4, 5)).place(z)
    w = sd.field(sd.f32)
    sd.root.dense(sd.j, 3).place(w)
    assert (x.shape, y.shape, z.shape, w.shape) == ((5, 3), (4, 2, 3), (4, 5, 3), (3,))

    @sd.kernel
    def fill():
        for a, b in x:
            x[a, b] = a * 10 + b

    fill()
    np.testing.assert_array_equal(x.to_numpy(), np.arange(5)[:, None] * 10 + np.arange(3))


@test_archs()
def test_axis_split_over_levels_and_all_labels(arch):
    """An axis named at two levels has the product of their extents; every label Taichi has."""
    a = sd.field(sd.i32)
    sd.root.dense(sd.i, 2).dense(sd.i, 3).place(a)
    assert a.shape == (6,)
    for lab, dims in ((sd.ij, (0, 1)), (sd.ik, (0, 2)), (sd.il, (0, 3)), (sd.jl, (1, 3)),
                      (sd.kl, (2, 3)), (sd.ijl, (0, 1, 3)), (sd.ikl, (0, 2, 3)),
                      (sd.jkl, (1, 2, 3)), (sd.ijkl, (0, 1, 2, 3))):
        assert lab.dims == dims
    with pytest.raises(sd.SpiradValueError):
        sd.axes()


# -- gradient slots -----------------------------------------------------------------------------
@test_archs()
def test_grad_placed_in_its_own_place_call(arch):
    x = sd.field(sd.f32)
    loss = sd.field(sd.f32)
    sd.root.dense(sd.i, 4).place(x)
    sd.root.dense(sd.i, 4).place(x.grad)  # later, in its own place() call
    sd.root.place(loss)
    sd.root.place(loss.grad)

    @sd.kernel
    def f():
        for i in x:
            loss[None] += x[i] ** 3

    x.from_numpy(np.array([1, 2, 3, 4], np.float32))
    with sd.ad.Tape(loss):
        f()
    np.testing.assert_allclose(x.grad.to_numpy(), 3 * np.array([1, 4, 9, 16]))


@test_archs()
def test_every_real_field_has_a_grad_slot(arch):
    x = sd.field(sd.f32, shape=3)
    n = sd.field(sd.i32, shape=3)
    assert x.grad is not None and not x.needs_grad and n.grad is None
    with pytest.raises(sd.SpiradValueError, match="has no gradient"):
        x.grad.to_numpy()  # an unplaced slot is refused, never read
    sd.root.lazy_grad()
    assert x.needs_grad and x.grad.to_numpy().tolist() == [0, 0, 0]


# -- math module and builtins -------------------------------------------------------------------
@test_archs()
def test_python_math_and_builtins(arch):
    """On constants, `math.*` folds in double precision (as Taichi); on kernel values it is the
    spirad function. Builtins pow / abs / min / max / int / float likewise."""
    x = sd.field(sd.f32, shape=4)
    out = sd.field(sd.f32, shape=(4, 9))
    k = sd.field(sd.i32, shape=4)
    dt, damping = 0.004, 15

    @sd.kernel
    def f():
        for i in x:
            v = x[i]
            out[i, 0] = math.exp(-dt * damping)
            out[i, 1] = math.exp(v) + math.sin(v) + math.cos(v)
            out[i, 2] = math.sqrt(v + 1) + math.log(v + 2) + math.tanh(v)
            out[i, 3] = pow(v, 3) + pow(2, 3) + math.pow(v + 1, 0.5)
            out[i, 4] = abs(v - 1) + min(v, 0.5) + max(v, 0.25, 0.3)
            out[i, 5] = float(i) / 2 + math.floor(v * 3) + math.ceil(v * 3)
            out[i, 6] = math.atan2(v, 2.0) + math.atan(v) + math.pi
            out[i, 7] = math.fabs(-v) + math.log(v + 4, 2) + math.acos(v * 0.5) + math.asin(v * 0.5)
            out[i, 8] = math.trunc(-v * 3) + math.tan(v)
            k[i] = int(v * 10)

    xs = np.array([0.1, 0.5, 0.9, 1.3], np.float32)
    x.from_numpy(xs)
    f()
    v = xs.astype(np.float64)
    want = np.stack([
        np.full(4, math.exp(-dt * damping)), np.exp(v) + np.sin(v) + np.cos(v),
        np.sqrt(v + 1) + np.log(v + 2) + np.tanh(v), v ** 3 + 8 + np.sqrt(v + 1),
        np.abs(v - 1) + np.minimum(v, 0.5) + np.maximum(np.maximum(v, 0.25), 0.3),
        np.arange(4) / 2 + np.floor(v * 3) + np.ceil(v * 3),
        np.arctan2(v, 2) + np.arctan(v) + math.pi,
        v + np.log2(v + 4) + np.arccos(v / 2) + np.arcsin(v / 2),
        np.trunc(-v * 3) + np.tan(v)], axis=1)
    np.testing.assert_allclose(out.to_numpy(), want, rtol=2e-6, atol=2e-6)
    np.testing.assert_array_equal(k.to_numpy(), [1, 5, 9, 13])


# -- vectors and matrices -----------------------------------------------------------------------
@test_archs()
def test_matrix_helpers_in_kernels(arch):
    out = sd.field(sd.f32, shape=12)
    c = sd.Vector.field(2, sd.f32, shape=())
    m = sd.Matrix.field(2, 3, sd.f32, shape=())
    assert (c.n, c.m, m.n, m.m) == (2, 1, 2, 3)

    @sd.kernel
    def f(s: sd.f32):
        d = sd.Matrix.diag(dim=3, val=s) + sd.Matrix.diag(3, 1.0)
        v = sd.Matrix([s, 2.0])              # a flat list: a vector
        a = sd.Vector([1.0, 2.0])
        out[0] = d[0, 0] + d[1, 1] * 10 + d[0, 1] * 100
        out[1] = v.cross(a)                  # 2-d cross: a scalar
        out[2] = v.n + a.m * 10
        w = (v * 1.7).cast(sd.i32)
        out[3] = w[0] + w[1] * 10
        out[4] = sd.Vector.normalized(a, 1.0)[1]
        out[5] = sd.Vector.norm(a)
        out[6] = sd.Matrix.diag(2, s).trace()
        out[7] = sd.Vector([3.0, 4.0]).norm(11.0)
        out[8] = sd.Vector([3.0, 4.0]).normalized(5.0)[0]
        out[9] = sd.Vector([3.0, 4.0]).norm_inv()
        out[10] = sd.Vector([3.0, -4.0, 1.0]).max() + sd.Vector([3.0, -4.0]).min() * 10
        out[11] = sd.Matrix([sd.Vector([1.0, 2.0]), sd.Vector([3.0, 4.0])]).determinant()

    f(2.0)
    np.testing.assert_allclose(out.to_numpy(), [33, 2, 2 + 10, 3 + 30, 2 / (math.sqrt(5) + 1),
                                                math.sqrt(5), 4, 6, 0.3, 0.2, -37, -2], rtol=1e-6)


def test_matrix_helpers_in_python():
    sd.init(arch=sd.cpu)
    v = sd.Vector([3.0, 4.0])
    assert v.cross(sd.Vector([1.0, 2.0])) == 2.0  # Taichi 1.7.4: 2.0
    assert v.norm(1.0) == pytest.approx(5.0990195135927845)
    np.testing.assert_allclose(v.normalized(1.0), [0.5, 2 / 3])  # eps outside the root
    np.testing.assert_allclose(sd.Vector.normalized(v, 1.0), [0.5, 2 / 3])
    np.testing.assert_array_equal(sd.Matrix.diag(2, 3.0), [[3, 0], [0, 3]])
    assert v.cast(sd.i32).dtype == np.int32 and (v.n, v.m) == (2, 1)


@test_archs()
def test_norm_eps_keeps_gradients_finite(arch):
    """Silent wrong result (3): `norm(eps)` keeps eps under the root in kernels, so at v = 0 the
    value is sqrt(eps) and the gradient is 0, not -inf / NaN. Numbers: Taichi 1.7.4, CPU."""
    v = sd.Vector.field(2, sd.f32, shape=2, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def f():
        for i in v:
            loss[None] += sd.log(v[i].norm(1e-3)) + v[i].norm_inv(1e-2) + v[i].norm(1e-4) ** 2

    v.from_numpy(np.array([[0, 0], [3, 4]], np.float32))
    with sd.ad.Tape(loss):
        f()
    assert loss[None] == pytest.approx(33.35573959350586, rel=1e-6)
    np.testing.assert_allclose(v.grad.to_numpy(), [[0, 0], [6.096009254455566, 8.128012657165527]],
                               rtol=1e-6)


@test_archs()
def test_normalized_eps_gradient(arch):
    """`normalized(eps)` is v / (|v| + eps) in kernels too. Numbers: Taichi 1.7.4, CPU."""
    v = sd.Vector.field(2, sd.f32, shape=2, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def f():
        for i in v:
            loss[None] += v[i].normalized(1e-2).x + sd.Vector.normalized(v[i], 0.5).y

    v.from_numpy(np.array([[3, 4], [1e-3, 0]], np.float32))
    with sd.ad.Tape(loss):
        f()
    g = v.grad.to_numpy()
    assert np.isfinite(g).all()
    r = v.to_numpy().astype(np.float64)
    n = np.linalg.norm(r, axis=1)
    want = [(r[:, 0] / (n + 1e-2) + r[:, 1] / (n + 0.5)).sum()]
    assert loss[None] == pytest.approx(want[0], rel=1e-5)


# -- Python-scope element writes ----------------------------------------------------------------
@test_archs()
def test_host_element_component_writes(arch):
    """Silent wrong result (2): `x[i][c] = v` from Python writes the field (Taichi's host
    accessor), as do `x[None][c] -= v`, `m[i][r, c] = v` and `x[i].y = v`."""
    x = sd.Vector.field(2, sd.f32, shape=3)
    p = sd.Vector.field(2, sd.f32, shape=())
    m = sd.Matrix.field(2, 2, sd.f32, shape=2)
    nd = sd.Vector.ndarray(3, sd.f32, shape=2)
    x[1][0] = 5
    x[2].y = 7
    p[None] = [1.0, 2.0]
    p[None][1] -= 0.5
    m[1][1, 0] = 3
    nd[0][2] = 4
    np.testing.assert_array_equal(x.to_numpy(), [[0, 0], [5, 0], [0, 7]])
    np.testing.assert_array_equal(p.to_numpy(), [1, 1.5])
    assert m.to_numpy()[1].tolist() == [[0, 0], [3, 0]]
    assert nd.to_numpy()[0].tolist() == [0, 0, 4]
    e = x[1] + 1  # arithmetic gives plain values: no write-back
    e[0] = 100
    assert x[1][0] == 5


# -- random, no_grad, ndarray element_dim, 0-d grouped loops ------------------------------------
@test_archs()
def test_randn_statistics(arch):
    x = sd.field(sd.f32, shape=4096)

    @sd.kernel
    def f():
        for i in x:
            x[i] = sd.randn()

    f()
    a = x.to_numpy()
    assert abs(a.mean()) < 0.08 and abs(a.std() - 1) < 0.05 and np.isfinite(a).all()
    assert isinstance(sd.randn(), float)


@test_archs()
def test_no_grad_kernel_under_tape(arch):
    """`@sd.ad.no_grad` on a kernel: it runs, the Tape skips its adjoint (Taichi's meaning)."""
    x = sd.field(sd.f32, shape=3, needs_grad=True)
    y = sd.field(sd.f32, shape=3, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.ad.no_grad
    @sd.kernel
    def copy():
        for i in x:
            y[i] = x[i] * 2

    @sd.kernel
    def total():
        for i in x:
            loss[None] += x[i] * y[i]

    x.from_numpy(np.array([1, 2, 3], np.float32))
    with sd.ad.Tape(loss):
        copy()
        total()
    assert loss[None] == 28
    np.testing.assert_array_equal(x.grad.to_numpy(), [2, 4, 6])  # through total only
    copy.grad()  # an empty gradient


@test_archs()
def test_ndarray_element_dim_from_numpy(arch):
    x = sd.Vector.field(3, sd.f32, shape=4)

    @sd.kernel
    def load(a: sd.types.ndarray(element_dim=1)):
        for i in range(a.shape[0]):
            x[i] = a[i] * 2

    src = np.arange(12, dtype=np.float32).reshape(4, 3)
    load(src)
    np.testing.assert_array_equal(x.to_numpy(), src * 2)


@test_archs()
def test_zero_d_grouped_loop_and_gradient(arch):
    x = sd.field(sd.f32, shape=(), needs_grad=True)
    y = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def f():
        for I in sd.grouped(x):
            y[I] = x[I] ** 2

    x[None] = 3.0
    f()
    assert y[None] == 9
    y.grad[None] = 1
    f.grad()
    assert x.grad[None] == 6


# -- names ----------------------------------------------------------------------------------------
def test_taichi_names():
    assert issubclass(sd.TaichiAssertionError, AssertionError)
    assert issubclass(sd.TaichiIndexError, sd.SpiradError)
    assert sd.is_extension_supported(sd.cpu, sd.extension.adstack)
    assert sd.is_extension_supported(sd.cpu, sd.extension.sparse)  # tests/sparse
    assert sd.is_extension_supported(sd.cpu, sd.extension.quant)  # tests/language/test_quant.py
    assert not sd.is_extension_supported(sd.metal, sd.extension.quant)  # no compare-and-swap
    with pytest.raises(sd.SpiradArchError):
        sd.init(arch=sd.opengl)
    sd.init(arch=sd.cpu, flatten_if=True, enable_fallback=False)  # Taichi knobs are accepted
    assert callable(sd.bit_cast)  # tests/language/test_bit_cast.py
    assert callable(sd.svd) and callable(sd.sym_eig) and callable(sd.eig)  # tests/language/test_svd.py
