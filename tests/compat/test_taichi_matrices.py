"""Taichi's vector / matrix surface (issue #36): swizzles in kernels (`v.zyx`, `v.rgb += 1`,
`v.bgr = w`), `sd.math`'s transform matrices (translate, scale, rotations, mod) against numpy
in both scopes, `Matrix.one`, and the host shapes of vector / n x 1 matrix fields
(`to_numpy(keep_dims=)`, `from_numpy` of `(n,)` / `(n, 1)` elements), as Taichi 1.7.4 has them."""
import math

import numpy as np
import pytest

import spirad as sd
import spirad.math as tm
from tests.support.archs import exactly, test_archs


@test_archs()
def test_kernel_swizzles(arch):
    out = sd.Vector.field(3, sd.i32, shape=4)

    @sd.kernel
    def k():
        v = sd.Vector([1, 2, 3])
        out[0] = v.zyx                # read, reordered
        w = tm.ivec4(v.xx, v.bg)      # repeated components; another letter group
        out[1] = w.wzy
        v.brg += 1                    # read-modify-write through the swizzle
        v.zx = sd.Vector([10, 20])    # write two components
        out[2] = v
        u = sd.Vector([1, 2, 3])
        u.zxy += [u.z, u.y, u.x]      # Taichi's test: the right side is read first
        out[3] = u.stp

    k()
    np.testing.assert_array_equal(out.to_numpy(), [[3, 2, 1], [2, 3, 1], [20, 3, 10], [3, 3, 6]])


@test_archs()
def test_kernel_swizzle_out_of_range(arch):
    @sd.kernel
    def bad():
        b = tm.ivec2(1, 2)
        b.xyz = [1, 2, 3]

    with pytest.raises(sd.SpiradSyntaxError,
                       match=r"vec2 only has attributes=\('x', 'y'\), got=\('x', 'y', 'z'\)") as e:
        bad()
    assert "b.xyz = [1, 2, 3]" in str(e.value)


def _yaw_pitch_roll(yaw, pitch, roll):
    """Taichi's Euler convention from elementary rotations: R = Rz(roll) Rx(pitch) Ry(yaw),
    transposed (rows are images of the axes)."""
    cy, sy, cp, sp, cr, sr = (math.cos(yaw), math.sin(yaw), math.cos(pitch), math.sin(pitch),
                              math.cos(roll), math.sin(roll))
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    rx = np.array([[1, 0, 0], [0, cp, -sp], [0, sp, cp]])
    rz = np.array([[cr, -sr, 0], [sr, cr, 0], [0, 0, 1]])
    m = np.eye(4)
    m[:3, :3] = (ry @ rx @ rz).T
    return m


def _axis_angle(axis, angle):
    """Rodrigues' rotation about `axis`, transposed (Taichi's layout)."""
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    m = np.eye(4)
    m[:3, :3] = (np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * k @ k).T
    return m


def _expected():
    t = np.eye(4)
    t[:3, 3] = [1.5, -2.0, 0.25]
    r2 = np.array([[math.cos(0.3), -math.sin(0.3)], [math.sin(0.3), math.cos(0.3)]])
    return [t, np.diag([2.0, 3.0, 0.5, 1.0]), _yaw_pitch_roll(0.5, -0.7, 1.1),
            _yaw_pitch_roll(-0.7, 0.5, 1.1), _axis_angle([1.0, 2.0, -0.5], 0.8)], r2


def test_transform_matrices_python_scope():
    mats, r2 = _expected()
    got = [tm.translate(1.5, -2.0, 0.25), tm.scale(2.0, 3.0, 0.5),
           tm.rot_yaw_pitch_roll(0.5, -0.7, 1.1), tm.rotation3d(0.5, 1.1, -0.7),
           tm.rot_by_axis(sd.Vector([1.0, 2.0, -0.5]), 0.8)]
    for g, want in zip(got, mats):
        np.testing.assert_allclose(np.asarray(g), want, atol=1e-12)
    np.testing.assert_allclose(np.asarray(tm.rotation2d(0.3)), r2, atol=1e-12)
    assert tm.mod(-7.5, 2.0) == 0.5


@test_archs()
def test_transform_matrices_in_kernels(arch):
    m4 = sd.Matrix.field(4, 4, sd.f32, shape=5)
    m2 = sd.Matrix.field(2, 3, sd.f32, shape=2)
    r = sd.field(sd.f32, shape=2)

    @sd.kernel
    def k(a: sd.f32):
        m4[0] = tm.translate(1.5, -2.0, 0.25)
        m4[1] = tm.scale(2.0, 3.0, a)
        m4[2] = tm.rot_yaw_pitch_roll(0.5, -0.7, 1.1)
        m4[3] = tm.rotation3d(0.5, 1.1, -0.7)
        m4[4] = tm.rot_by_axis(tm.vec3(1.0, 2.0, -0.5), 0.8)
        m2[0][0, 0] = tm.rotation2d(0.3)[1, 0]
        m2[1] = sd.Matrix.one(sd.f32, 2, 3) * a
        r[0] = tm.mod(-7.5, 2.0)
        r[1] = tm.mod(a * 15.0, -2.0)

    k(0.5)
    mats, r2 = _expected()
    np.testing.assert_allclose(m4.to_numpy(), np.stack(mats), atol=2e-6)
    assert m2.to_numpy()[0, 0, 0] == pytest.approx(r2[1, 0], abs=1e-6)
    np.testing.assert_array_equal(m2.to_numpy()[1], np.full((2, 3), 0.5))
    np.testing.assert_allclose(r.to_numpy(), [0.5, -0.5])


def test_vector_field_host_shapes():
    sd.init(arch="cpu")
    v = sd.Vector.field(3, sd.i32, shape=(2, 2))
    c = sd.Matrix.field(3, 1, sd.i32, shape=(2, 2))
    m = sd.Matrix.field(1, 3, sd.i32, shape=2)
    vals = np.arange(12, dtype=np.int32)
    for f in (v, c):  # Taichi: an n x 1 matrix is a vector on the host unless keep_dims=True
        for shape in ((2, 2, 3), (2, 2, 3, 1)):
            f.from_numpy(vals.reshape(shape) * len(shape))
            assert f.to_numpy().shape == (2, 2, 3)
            assert f.to_numpy(keep_dims=True).shape == (2, 2, 3, 1)
            np.testing.assert_array_equal(f.to_numpy().reshape(-1), vals * len(shape))
    v.from_numpy(vals.reshape(2, 2, 1, 3))  # a row of the same values: the same elements
    np.testing.assert_array_equal(v.to_numpy().reshape(-1), vals)
    assert m.to_numpy().shape == m.to_numpy(keep_dims=True).shape == (2, 1, 3)
    with pytest.raises(sd.SpiradValueError, match="does not match"):
        c.from_numpy(vals.reshape(2, 2, 1, 3))  # a 3 x 1 matrix field takes no 1 x 3 rows
    with pytest.raises(sd.SpiradValueError, match="does not match"):
        v.from_numpy(vals.reshape(2, 2, 3, 1)[:, :, :2])


@test_archs()
def test_element_type_argument_and_operator_functions(arch):
    import operator
    out = sd.Vector.field(3, sd.f32, shape=3)
    mo = sd.Matrix.field(2, 2, sd.i32, shape=2)
    m1 = sd.Matrix([[1, 2], [3, 4]])

    @sd.kernel
    def k():
        a = sd.Vector([1, 2, 3], sd.f32)      # Taichi's positional dtype
        a /= 2
        out[0] = a
        out[1] = sd.Vector([1.5, 2.5, -3.5], sd.i32)  # converted as a cast (toward zero)
        out[2] = operator.sub(operator.add(a, a), sd.Vector([1.0, 1.0, 1.0]))
        mo[0] = operator.matmul(m1, sd.Matrix([[2, 8], [-1, 3]], sd.i32))
        mo[1] = sd.Matrix([[1.9, 2.1], [3.0, -4.7]], sd.i32)

    k()
    np.testing.assert_allclose(out.to_numpy(), [[0.5, 1.0, 1.5], [1, 2, -3], [0, 1, 2]])
    np.testing.assert_array_equal(mo.to_numpy(), [np.array([[1, 2], [3, 4]]) @ [[2, 8], [-1, 3]],
                                                  [[1, 2], [3, -4]]])
    assert sd.types.vector(3, sd.f32)([0, 1, 2]).entries.dtype == np.float32


@test_archs()
def test_index_count_errors(arch):
    f = sd.Matrix.field(3, 3, sd.f32, shape=())

    @sd.kernel
    def few():
        f[None][0] = sd.Vector([1.0, 2.0, 3.0])

    @sd.kernel
    def many():
        v = sd.Vector([1, 2, 3])
        f[None][0, 0] = v[0, 0]

    @sd.kernel
    def transposed():
        v = sd.Vector([1, 2, 3])
        f[None][0, 0] = (v @ v.transpose())[0, 0]

    for k, pattern in ((few, "Expected 2 indices, got 1"), (many, "Expected 1 indices, got 2"),
                       (transposed, r"write `a\.outer_product\(b\)` instead")):
        with pytest.raises(sd.SpiradError, match=pattern) as e:
            k()
        assert "^" in str(e.value)
    x = sd.field(sd.f32, shape=(2, 3), name="x")
    with pytest.raises(AssertionError, match=r"Slicing is not supported on ti\.field: field x "):
        x[0] = 1.0
    with pytest.raises(TypeError, match="Detected illegal element of type: slice"):
        print(x[0, :])
    with pytest.raises(NotImplementedError, match="Struct for is only available in Taichi scope"):
        for _ in x:
            pass
    with pytest.raises(TypeError, match="copy_from takes a field or an ndarray"):
        x.copy_from(np.zeros((2, 3)))
    a = sd.ndarray(sd.f32, shape=(4, 4))
    with pytest.raises(IndexError, match=r"2d ndarray indexed with 1d indices: \(0,\)"):
        print(a[0])
    assert x._name == "x" and x.snode._name == "x"


@test_archs(archs=exactly("cpu"))
def test_array_argument_mismatches(arch):
    @sd.kernel
    def vec2(a: sd.types.ndarray(dtype=sd.types.vector(2, sd.i32))):
        pass

    @sd.kernel
    def scalar2d(a: sd.types.ndarray(dtype=sd.f32, ndim=2)):
        pass

    @sd.kernel
    def mat3(a: sd.types.ndarray(dtype=sd.types.matrix(3, 3, sd.f32), ndim=2)):
        pass

    cases = [
        (vec2, sd.Matrix.ndarray(2, 1, sd.i32, shape=3), ValueError,
         r"required element type: VectorType\[2, i32\], but MatrixType\[2,1, i32\] is provided"),
        (scalar2d, sd.ndarray(sd.i32, shape=(2, 2)), TypeError,
         r"Expect element type f32 for argument a, but get i32"),
        (scalar2d, sd.Vector.ndarray(3, sd.f32, shape=(2, 2)), TypeError,
         r"but get \[Tensor \(3\) f32\]"),
        (scalar2d, sd.ndarray(sd.f32, shape=3), ValueError,
         r"required ndim=2, but 1d ndarray with shape \(3,\) is provided"),
        (scalar2d, np.zeros((2, 2), np.float64), ValueError,
         r"required array has dtype=f32, array with dtype=f64 is provided"),
        (scalar2d, np.zeros((2, 2, 2), np.float32), ValueError,
         r"required array has ndim=2, array with 3 dimensions is provided"),
        (mat3, np.zeros((2, 2, 3), np.float32), ValueError,
         r"required array has ndim=2 element_dim=2, array with 3 dimensions is provided"),
        (mat3, np.zeros((2, 2, 2, 3), np.float32), ValueError,
         r"required element_shape=\(3, 3\), array with element shape of \(2, 3\) is provided"),
        (scalar2d, np.zeros((4, 4), np.float32)[::2], ValueError,
         "Non contiguous numpy arrays are not supported"),
    ]
    for k, arg, cls, pattern in cases:
        with pytest.raises(cls, match="Invalid value for argument a - " + pattern
                           if cls is ValueError and "contiguous" not in pattern else pattern) as e:
            k(arg)
        assert isinstance(e.value, sd.SpiradTypeError) and "^" in str(e.value)


@test_archs(archs=exactly("cpu"))
def test_any_size_vector_and_matrix_annotations(arch):
    @sd.kernel
    def ones(x: sd.types.ndarray(dtype=sd.types.matrix())):
        for i in sd.grouped(x):
            x[i] = 1.0

    a, b = sd.Matrix.ndarray(2, 2, sd.f32, 3), sd.Matrix.ndarray(3, 2, sd.i32, 2)
    ones(a)
    ones(b)
    np.testing.assert_array_equal(a.to_numpy(), np.ones((3, 2, 2)))
    np.testing.assert_array_equal(b.to_numpy(), np.ones((2, 3, 2)))
    with pytest.raises(ValueError, match="required element type: MatrixType, but "
                                         r"VectorType\[2, f32\] is provided"):
        ones(sd.Vector.ndarray(2, sd.f32, 3))
    assert (a._get_element_size(), a._get_nelement()) == (16, 3)


@test_archs()
def test_struct_field_copies_and_list_assignment_text(arch):
    S = sd.types.struct(i=sd.i32, f=sd.f32)
    x, y = S.field(shape=4), S.field(shape=4)
    y[2].i = 3
    y[0].f = 1.5
    x.copy_from(y)
    assert (x[2].i, x[0].f, x[1].i) == (3, 1.5, 0)
    with pytest.raises(TypeError, match="copy_from takes a struct field"):
        x.copy_from(y.i)
    v = sd.Vector.field(3, sd.i32, shape=2)

    @sd.kernel
    def bad():
        v[0] = [1, 2]

    with pytest.raises(sd.SpiradTypeError, match=r"cannot assign '\[Tensor \(2\) i32\]' to "
                                                 r"'\[Tensor \(3\) i32\]'"):
        bad()


@test_archs()
def test_raw_div(arch):
    q = sd.field(sd.i32, shape=4)
    f = sd.field(sd.f32, shape=2)
    v = sd.Vector.field(2, sd.i32, shape=())

    @sd.kernel
    def k(a: sd.i32, b: sd.i32):
        q[0] = sd.raw_div(a, b)
        q[1] = sd.raw_div(-a, b)
        q[2] = sd.raw_div(a, -b)
        q[3] = sd.raw_div(-7, 2)             # folded at compile time
        f[0] = sd.raw_div(sd.f32(a), b)      # a float operand: the true quotient
        f[1] = sd.raw_div(7.0, 2)
        w = sd.Vector([a, -a])
        v[None] = sd.raw_div(w, sd.Vector([b, b])) + sd.raw_mod(w, b)

    k(7, 2)
    np.testing.assert_array_equal(q.to_numpy(), [3, -3, -3, -3])   # C's: toward zero
    np.testing.assert_array_equal(f.to_numpy(), [3.5, 3.5])
    np.testing.assert_array_equal(v.to_numpy(), [3 + 1, -3 - 1])  # raw_mod: the sign of a
    assert sd.raw_div(-7, 2) == -3 and sd.raw_div(7.0, 2) == 3.5


@test_archs()
def test_twelve_axes(arch):
    # Taichi's `_lib.core.get_max_num_indices()` (12), which the alias reports
    x = sd.Vector.field(2, dtype=sd.i32, shape=(2,) * 12)

    @sd.kernel
    def fill():
        for I in sd.grouped(x):
            x[I] += sd.Vector([I.sum(), I[11]])

    fill()
    idx = np.indices((2,) * 12)
    np.testing.assert_array_equal(x.to_numpy(), np.stack([idx.sum(0), idx[11]], axis=-1))
    from spirad.compat import taichi_lang
    assert taichi_lang.lib_core.get_max_num_indices() == 12


@test_archs()
def test_fortran_ordered_numpy_argument(arch):
    # Taichi copies an F-ordered numpy array (a transpose) in and back out; other strided
    # arrays stay refused with Taichi's ValueError
    @sd.kernel
    def bump(a: sd.types.ndarray(dtype=sd.i32, ndim=2),
             out: sd.types.ndarray(dtype=sd.i32, ndim=2)):
        for i, j in a:
            out[i, j] = a[i, j]
            a[i, j] = i * 10 + j

    base = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = base.T                        # shape (4, 3), F-ordered, a view of `base`
    before = t.copy()
    out = np.zeros((4, 3), np.int32)
    with pytest.warns(sd.SpiradWarning, match="Fortran-ordered"):
        bump(t, out)
    np.testing.assert_array_equal(out, before)
    np.testing.assert_array_equal(base.T, np.add.outer(np.arange(4) * 10, np.arange(3)))
    with pytest.raises(ValueError, match="Non contiguous numpy arrays are not supported"):
        bump(np.zeros((4, 6), np.int32)[:, ::2], out)


@test_archs()
def test_ndarray_deepcopy(arch):
    import copy
    x = sd.Vector.ndarray(3, sd.f32, 4, needs_grad=True)
    x[1] = [1.0, 2.0, 3.0]
    x.grad[2] = [4.0, 5.0, 6.0]
    y = copy.deepcopy(x)
    x[1] = [0.0, 0.0, 0.0]
    x.grad.fill(0.0)
    assert (y.shape, y.n, y.dtype) == (x.shape, 3, sd.f32)
    np.testing.assert_array_equal(y.to_numpy()[1], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(y.grad.to_numpy()[2], [4.0, 5.0, 6.0])


@test_archs()
def test_boundary_clamp_of_components(arch):
    # Taichi 1.7.4: boundary="clamp" also clamps a run-time component index, a matrix's as the
    # flat index i * m + j into [0, n * m - 1]
    @sd.kernel
    def vec(x: sd.types.ndarray(boundary="clamp"), c: sd.i32) -> sd.f32:
        return x[1, 2][c]

    @sd.kernel
    def mat(x: sd.types.ndarray(boundary="clamp"), i: sd.i32, j: sd.i32) -> sd.f32:
        return x[1, 2][i, j]

    v = sd.Vector.ndarray(2, sd.f32, shape=(3, 3))
    v[1, 2] = [7.0, 8.0]
    assert [vec(v, c) for c in (-1, 0, 1, 5)] == [7.0, 7.0, 8.0, 8.0]
    m = sd.Matrix.ndarray(2, 2, sd.f32, shape=(3, 3))
    m[1, 2] = [[1.0, 2.0], [3.0, 4.0]]
    got = [mat(m, i, j) for i, j in ((-1, 0), (1, -1), (2, 0), (1, 2), (0, 1))]
    assert got == [1.0, 2.0, 4.0, 4.0, 2.0]   # flat -2 -> 0, 1, 4 -> 3, 4 -> 3, 1
