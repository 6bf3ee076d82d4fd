"""Small Vector / Matrix values: construction, indexing, arithmetic, dot, norm, @, methods."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs

M = 5


@sd.kernel
def vec_ops(p: sd.types.ndarray(), q: sd.types.ndarray(), out: sd.types.ndarray()):
    for i in p:
        a = p[i]
        b = q[i]
        out[i, 0] = a.dot(b)
        out[i, 1] = a.norm()
        out[i, 2] = a.norm_sqr()
        out[i, 3] = (a + b)[0]
        out[i, 4] = (a - b).y
        out[i, 5] = (a * b)[2]
        out[i, 6] = (a / 2.0).z
        out[i, 7] = (2 * a + 1)[1]
        out[i, 8] = a.cross(b)[0]
        out[i, 9] = a.cross(b)[2]
        out[i, 10] = a.normalized()[1]
        out[i, 11] = a.sum()
        out[i, 12] = (-a).x
        out[i, 13] = sd.sqrt(a * a)[2]


@test_archs()
def test_vector_ops(arch):
    rng = np.random.default_rng(0)
    P = rng.uniform(-2, 2, (M, 3)).astype(np.float32)
    Q = rng.uniform(-2, 2, (M, 3)).astype(np.float32)
    p, q, out = sd.Vector.ndarray(3, sd.f32, M), sd.Vector.ndarray(3, sd.f32, M), sd.ndarray(sd.f32, (M, 14))
    p.from_numpy(P)
    q.from_numpy(Q)
    vec_ops(p, q, out)
    P64, Q64 = P.astype(np.float64), Q.astype(np.float64)
    cr = np.cross(P64, Q64)
    nrm = np.linalg.norm(P64, axis=1)
    want = np.stack([(P64 * Q64).sum(1), nrm, nrm ** 2, P64[:, 0] + Q64[:, 0], P64[:, 1] - Q64[:, 1],
                     P64[:, 2] * Q64[:, 2], P64[:, 2] / 2, 2 * P64[:, 1] + 1, cr[:, 0], cr[:, 2],
                     P64[:, 1] / nrm, P64.sum(1), -P64[:, 0], np.abs(P64[:, 2])], 1)
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-5, atol=1e-5)


@sd.kernel
def mat_ops(A: sd.types.ndarray(), B: sd.types.ndarray(), v: sd.types.ndarray(),
            C: sd.types.ndarray(), w: sd.types.ndarray(), s: sd.types.ndarray()):
    for i in A:
        a = A[i]
        b = B[i]
        C[i] = a @ b + a.transpose()
        w[i] = a @ v[i]
        s[i, 0] = a[0, 1]
        s[i, 1] = a[1][0]            # row, then component
        s[i, 2] = (a * 2.0)[1, 1]
        s[i, 3] = a.sum()


@test_archs()
def test_matrix_ops(arch):
    rng = np.random.default_rng(1)
    A = rng.standard_normal((M, 2, 2)).astype(np.float32)
    B = rng.standard_normal((M, 2, 2)).astype(np.float32)
    V = rng.standard_normal((M, 2)).astype(np.float32)
    a, b = sd.Matrix.ndarray(2, 2, sd.f32, M), sd.Matrix.ndarray(2, 2, sd.f32, M)
    v, w = sd.Vector.ndarray(2, sd.f32, M), sd.Vector.ndarray(2, sd.f32, M)
    C, s = sd.Matrix.ndarray(2, 2, sd.f32, M), sd.ndarray(sd.f32, (M, 4))
    for arr, data in ((a, A), (b, B), (v, V)):
        arr.from_numpy(data)
    mat_ops(a, b, v, C, w, s)
    np.testing.assert_allclose(C.to_numpy(), A @ B + A.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(w.to_numpy(), np.einsum("nij,nj->ni", A, V), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s.to_numpy(), np.stack([A[:, 0, 1], A[:, 1, 0], 2 * A[:, 1, 1],
                                                       A.sum((1, 2))], 1), rtol=1e-5, atol=1e-6)


@test_archs()
def test_non_square_matmul_and_locals(arch):
    out = sd.field(sd.f32, shape=(2, 3))
    outv = sd.Vector.field(2, sd.f32, shape=())

    @sd.kernel
    def k():
        A = sd.Matrix([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])     # 3x2
        B = sd.Matrix([[1.0, 0.0, -1.0], [2.0, 1.0, 0.0]])       # 2x3
        C = (A @ B).transpose()                                   # 3x3 -> 3x3
        for r in sd.static(range(2)):
            for c in sd.static(range(3)):
                out[r, c] = C[r, c]
        v = sd.Vector([1, 2])            # int vector
        v[0] = 5                          # component store into a local
        v += sd.Vector([1, 1])
        outv[None] = B @ sd.Vector([1.0, 1.0, 1.0]) + v

    k()
    A = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    B = np.array([[1.0, 0.0, -1.0], [2.0, 1.0, 0.0]])
    np.testing.assert_allclose(out.to_numpy(), (A @ B).T[:2], rtol=1e-6)
    np.testing.assert_allclose(outv[None], B @ np.ones(3) + np.array([6, 3]), rtol=1e-6)


@test_archs()
def test_vector_field_elements(arch):
    pos = sd.Vector.field(3, sd.f32, shape=4)
    vel = sd.Vector.field(3, sd.f32, shape=4)

    @sd.kernel
    def step(dt: sd.f32):
        for i in pos:
            vel[i] += sd.Vector([0.0, -9.8, 0.0]) * dt   # vector += on a global: per-component atomic
            pos[i] = pos[i] + vel[i] * dt
            pos[i][0] = i                              # component store into a global element
            pos[i].z += 1.0

    P = np.arange(12, dtype=np.float32).reshape(4, 3)
    pos.from_numpy(P)
    step(0.5)
    V = np.tile([0.0, -4.9, 0.0], (4, 1))
    want = P + V * 0.5
    want[:, 0] = np.arange(4)
    want[:, 2] += 1
    np.testing.assert_allclose(pos.to_numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(vel.to_numpy(), V, rtol=1e-6)


@test_archs()
def test_vector_typing(arch):
    out = sd.field(sd.f64, shape=4)

    @sd.kernel
    def k():
        a = sd.Vector([1, 2, 3])                # int vector: default_ip
        b = sd.Vector([1, 2.5])                 # a float literal makes it default_fp
        c = sd.Vector([1, 2], dt=sd.f64)
        d = a / 2                               # true division: float
        out[0] = a[2] // 2
        out[1] = b[1]
        out[2] = c[0] / 3
        out[3] = d[0]

    k()
    np.testing.assert_allclose(out.to_numpy(), [1, 2.5, 1 / 3, 0.5], rtol=1e-15)


@test_archs()
def test_static_loop_over_components_and_len(arch):
    out = sd.field(sd.f32, shape=3)

    @sd.kernel
    def k():
        v = sd.Vector([3.0, 4.0, 5.0])
        for j in sd.static(range(len(v))):
            out[j] = v[j] * j

    k()
    np.testing.assert_array_equal(out.to_numpy(), [0, 4, 10])


@test_archs()
def test_vector_errors(arch):
    out = sd.field(sd.f32, shape=2)

    @sd.kernel
    def dyn_index(i: sd.i32):
        v = sd.Vector([1.0, 2.0])
        out[0] = v[i]

    @sd.kernel
    def bad_shape():
        v = sd.Vector([1.0, 2.0]) + sd.Vector([1.0, 2.0, 3.0])
        out[0] = v[0]

    @sd.kernel
    def out_of_range():
        v = sd.Vector([1.0, 2.0])
        out[0] = v[2]

    @sd.kernel
    def no_z():
        v = sd.Vector([1.0, 2.0])
        out[0] = v.z

    assert dyn_index(1) is None and out[0] == 2.0  # run-time indices work (test_quadrants_surface)
    for k, args, pattern, kind in [(bad_shape, (), "shape", sd.SpiradTypeError),
                                   (out_of_range, (), "out of range", IndexError),
                                   (no_z, (), r"vec2 only has attributes=\('x', 'y'\), got=\('z',\)",
                                    sd.SpiradSyntaxError)]:
        with pytest.raises(kind, match=pattern) as ei:
            k(*args)
        assert "^" in str(ei.value)
