"""`sd.math` helpers and constants, `sd.ceil` / `sd.round` / `sd.trunc`, vector / matrix types
called as constructors, matrix methods (determinant, inverse, trace, outer_product),
`sd.Vector` / `sd.Matrix` values in Python scope and as kernel constants, and
`sd.loop_config` (issue #13 item 8). Against numpy, gradients against central differences."""
import numpy as np
import pytest

import spirad as sd
import spirad.math as tm
from tests.support.archs import test_archs

C = sd.Vector([1.0, 2.0, 0.5])
M = sd.Matrix([[2.0, 1.0], [0.5, 3.0]])
M3 = sd.Matrix([[2.0, 1.0, 0.0], [0.5, 3.0, 1.0], [1.0, -1.0, 4.0]])
XS = np.linspace(-2.5, 2.5, 9)


def _round(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _smooth(x, e0, e1):
    t = np.clip((x - e0) / (e1 - e0), 0, 1)
    return t * t * (3 - 2 * t)


@test_archs()
def test_scalar_helpers(arch):
    x = sd.field(sd.f32, shape=XS.size)
    out = sd.field(sd.f32, shape=(XS.size, 14))

    @sd.kernel
    def k():
        for i in x:
            v = x[i]
            out[i, 0] = sd.ceil(v)
            out[i, 1] = sd.round(v)
            out[i, 2] = sd.trunc(v)
            out[i, 3] = tm.sign(v)
            out[i, 4] = tm.fract(v)
            out[i, 5] = tm.clamp(v, -0.5, 0.5)
            out[i, 6] = tm.smoothstep(-1.0, 1.0, v)
            out[i, 7] = tm.mix(v, 2.0, 0.25)
            out[i, 8] = tm.step(0.0, v)
            out[i, 9] = tm.degrees(v) + tm.radians(v * 90)
            out[i, 10] = sd.log2(v * v + 1) + sd.exp2(v)
            out[i, 11] = tm.log10(v * v + 1)
            out[i, 12] = tm.pi * tm.e
            out[i, 13] = sd.min(tm.inf, v)

    x.from_numpy(XS.astype(np.float32))
    k()
    v = XS.astype(np.float32).astype(np.float64)
    want = np.stack([np.ceil(v), _round(v), np.trunc(v), np.sign(v), v - np.floor(v),
                     np.clip(v, -0.5, 0.5), _smooth(v, -1, 1), v * 0.75 + 0.5, (v >= 0) * 1.0,
                     np.degrees(v) + np.radians(v * 90), np.log2(v * v + 1) + np.exp2(v),
                     np.log10(v * v + 1), np.full_like(v, np.pi * np.e), v], axis=1)
    np.testing.assert_allclose(out.to_numpy(), want, rtol=2e-6, atol=2e-6)


@test_archs()
def test_vector_helpers_types_and_constants(arch):
    x = sd.field(sd.f32, shape=XS.size)
    out = sd.field(sd.f32, shape=(XS.size, 6))
    vo = sd.Vector.field(3, sd.f32, shape=XS.size)
    mo = tm.mat3.field(shape=XS.size)

    @sd.kernel
    def k():
        for i in x:
            v = x[i]
            a = tm.vec3(v, 1.0, 2.0)
            out[i, 0] = tm.length(a) + tm.distance(a, C)
            out[i, 1] = (M.inverse() @ tm.vec2(v, 1.0))[0]
            out[i, 2] = tm.determinant(M) + C.dot(C) + M3.determinant()
            out[i, 3] = M3.inverse()[1, 2] * v + M3.trace()
            out[i, 4] = tm.reflect(a, tm.vec3(0.0, 0.0, 1.0)).z
            out[i, 5] = tm.vec2(v).sum() + tm.ivec2(3, 4)[1]
            vo[i] = tm.normalize(tm.cross(tm.vec3(v, 1, 0), C))
            mo[i] = a.outer_product(C) + sd.Matrix.identity(float, 3) * v

    x.from_numpy(XS.astype(np.float32))
    k()
    v = XS.astype(np.float32).astype(np.float64)
    c, m, m3 = np.asarray(C), np.asarray(M), np.asarray(M3)
    a = np.stack([v, np.ones_like(v), np.full_like(v, 2.0)], axis=1)
    want = np.stack([np.linalg.norm(a, axis=1) + np.linalg.norm(a - c, axis=1),
                     np.linalg.inv(m)[0, 0] * v + np.linalg.inv(m)[0, 1],
                     np.full_like(v, np.linalg.det(m) + c @ c + np.linalg.det(m3)),
                     np.linalg.inv(m3)[1, 2] * v + np.trace(m3),
                     -a[:, 2], 2 * v + 4], axis=1)
    np.testing.assert_allclose(out.to_numpy(), want, rtol=2e-5, atol=2e-5)
    cr = np.cross(np.stack([v, np.ones_like(v), 0 * v], axis=1), c)
    np.testing.assert_allclose(vo.to_numpy(), cr / np.linalg.norm(cr, axis=1, keepdims=True),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mo.to_numpy(), np.einsum("ni,j->nij", a, c) +
                               np.eye(3)[None] * v[:, None, None], rtol=1e-6, atol=1e-6)


@test_archs(require=("f64",), default_fp=sd.f64)  # vec2 is `float` = default_fp
def test_math_gradients(arch):
    x = sd.field(sd.f64, shape=XS.size, needs_grad=True)
    loss = sd.field(sd.f64, shape=(), needs_grad=True)

    @sd.kernel
    def k():
        for i in x:
            v = x[i]
            loss[None] += tm.smoothstep(-2.0, 2.0, v) + tm.length(tm.vec2(v, 1.0)) + \
                tm.clamp(v * v, 0.0, 2.0) + sd.exp2(v) * tm.fract(0.25)

    def f(v):
        return np.sum(_smooth(v, -2, 2) + np.sqrt(v * v + 1) + np.clip(v * v, 0, 2) +
                      np.exp2(v) * 0.25)

    xs = XS + 0.013  # keep clear of the clamp's kinks
    x.from_numpy(xs)
    with sd.ad.Tape(loss):
        k()
    np.testing.assert_allclose(loss[None], f(xs), rtol=1e-12)
    h = 1e-6
    want = np.array([(f(xs + h * e) - f(xs - h * e)) / (2 * h) for e in np.eye(xs.size)])
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-6, atol=1e-7)


def test_python_scope_values():
    sd.init(arch="cpu")
    v = sd.Vector([3.0, 4.0])
    assert v.norm() == 5.0 and v.x == 3.0 and v.y == 4.0 and v.n == 2
    np.testing.assert_allclose(v.normalized().to_numpy(), [0.6, 0.8])
    np.testing.assert_allclose((v * 2 + 1).to_numpy(), [7.0, 9.0])
    assert v.dot(sd.Vector([1.0, 1.0])) == 7.0
    m = sd.Matrix([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose((m @ v).to_numpy(), [11.0, 25.0])
    np.testing.assert_allclose(m.transpose().to_numpy(), [[1, 3], [2, 4]])
    assert abs(m.determinant() - (-2.0)) < 1e-12
    np.testing.assert_allclose((m.inverse() @ m).to_numpy(), np.eye(2), atol=1e-12)
    np.testing.assert_allclose(tm.vec3(1).to_numpy(), [1, 1, 1])
    np.testing.assert_allclose(tm.vec3(tm.vec2(1, 2), 3).to_numpy(), [1, 2, 3])
    assert tm.clamp(3.0, 0.0, 1.0) == 1.0 and tm.sign(-2.0) == -1.0
    np.testing.assert_allclose(tm.cross(tm.vec3(1, 0, 0), tm.vec3(0, 1, 0)).to_numpy(), [0, 0, 1])
    np.testing.assert_allclose(sd.round(np.array([-2.5, -0.4, 0.5, 1.49])), [-3, -0.0, 1, 1])
    f = tm.vec2.field(shape=3)
    f.from_numpy(np.ones((3, 2), np.float32))
    np.testing.assert_allclose(f[1], [1, 1])
    with pytest.raises(sd.SpiradTypeError, match="components"):
        tm.vec3(1, 2)


@test_archs()
def test_loop_config_serialize(arch):
    x = sd.field(sd.i32, shape=16)
    stop = sd.field(sd.i32, shape=())

    @sd.kernel
    def prefix_sum():
        sd.loop_config(serialize=True)
        for i in range(1, 16):   # each iteration reads the previous one: only correct serially
            x[i] += x[i - 1]
        sd.loop_config(block_dim=64, block_dim_adaptive=False)
        for i in range(16):      # block_dim is a hint: still parallel
            sd.block_local(x)    # hints: no effect
            x[sd.assume_in_range(i, 0, 0, 16)] *= 2

    @sd.kernel
    def first_over(t: sd.i32):
        stop[None] = -1
        sd.loop_config(serialize=True)
        for i in range(16):
            if x[i] > t:
                stop[None] = i
                break            # allowed: the loop is serial

    x.from_numpy(np.arange(16, dtype=np.int32))
    prefix_sum()
    want = 2 * np.cumsum(np.arange(16))
    np.testing.assert_array_equal(x.to_numpy(), want)
    first_over(50)
    assert stop[None] == int(np.argmax(want > 50))


@test_archs(require=("f64",), default_fp=sd.f64)
def test_polar_decompose_and_atomic_sub(arch):
    F = sd.Matrix.field(2, 2, sd.f64, shape=4, needs_grad=True)
    R = sd.Matrix.field(2, 2, sd.f64, shape=4)
    S = sd.Matrix.field(2, 2, sd.f64, shape=4)
    loss = sd.field(sd.f64, shape=(), needs_grad=True)
    cnt = sd.field(sd.i32, shape=())

    @sd.kernel
    def k():
        for i in F:
            r, s = sd.polar_decompose(F[i])
            R[i] = r
            S[i] = s
            loss[None] += (r @ sd.Vector([1.0, 2.0])).dot(sd.Vector([0.5, -1.0]))
            sd.atomic_sub(cnt[None], 2)

    rng = np.random.RandomState(1)
    fs = np.eye(2)[None] + 0.3 * rng.randn(4, 2, 2)
    F.from_numpy(fs)
    with sd.ad.Tape(loss):
        k()
    for i in range(4):
        r, s = sd.polar_decompose(fs[i])
        np.testing.assert_allclose(R[i], r, atol=1e-12)
        np.testing.assert_allclose(S[i], s, atol=1e-12)
        np.testing.assert_allclose(r @ s, fs[i], atol=1e-12)
        np.testing.assert_allclose(r.T @ r, np.eye(2), atol=1e-12)
        np.testing.assert_allclose(s, s.T, atol=1e-12)
    assert cnt[None] == -8

    def f(a):
        return sum((sd.polar_decompose(m)[0] @ [1.0, 2.0]) @ [0.5, -1.0] for m in a)

    h, g = 1e-6, np.zeros_like(fs)
    for idx in np.ndindex(fs.shape):
        d = np.zeros_like(fs)
        d[idx] = h
        g[idx] = (f(fs + d) - f(fs - d)) / (2 * h)
    np.testing.assert_allclose(F.grad.to_numpy(), g, rtol=1e-6, atol=1e-8)


@test_archs()
def test_isnan_isinf_vdir_static_assert(arch):
    x = sd.field(sd.f32, shape=4)
    out = sd.field(sd.i32, shape=(4, 2))
    d = sd.Vector.field(2, sd.f32, shape=4)
    N = 4

    @sd.kernel
    def k():
        sd.static_assert(N == 4, "N must be 4")
        for i in x:
            out[i, 0] = sd.cast(tm.isnan(x[i]), sd.i32)
            out[i, 1] = sd.cast(tm.isinf(x[i]), sd.i32)
            d[i] = tm.vdir(i * 0.5)

    x.from_numpy(np.array([1.0, np.nan, np.inf, -np.inf], np.float32))
    k()
    np.testing.assert_array_equal(out.to_numpy(), [[0, 0], [1, 0], [0, 1], [0, 1]])
    a = np.arange(4) * 0.5
    np.testing.assert_allclose(d.to_numpy(), np.stack([np.cos(a), np.sin(a)], axis=1), rtol=1e-6)

    @sd.kernel
    def bad():
        sd.static_assert(N == 3, "N must be 3")

    with pytest.raises(sd.SpiradValueError, match="N must be 3"):
        bad()


_Z = np.array([[1.5, -0.5], [-2.0, 0.25], [0.3, 1.7], [-0.8, -1.1]])
_W = np.array([[0.5, 2.0], [-1.0, -0.75], [2.2, 0.4], [0.9, -1.3]])


def _complex_ref(z, w):
    """numpy's complex functions, float64: cdiv, cinv, cexp, clog, cpow(., 2.5), csqrt."""
    z, w = z[..., 0] + 1j * z[..., 1], w[..., 0] + 1j * w[..., 1]
    r = np.stack([z / w, 1 / z, np.exp(z), np.log(z), np.exp(2.5 * np.log(z)), np.sqrt(z)], -1)
    return np.stack([r.real, r.imag], -1)


@test_archs()
def test_complex_functions_match_numpy_and_differentiate(arch):
    """`sd.math.cdiv / cinv / cexp / clog / cpow / csqrt` (Taichi's `ti.math` complex numbers
    as 2-vectors) against numpy's complex128 in kernels and in Python scope, with 0 for cpow /
    csqrt of 0; reverse-mode gradients of their sum against float64 central differences."""
    n = len(_Z)
    z = sd.Vector.field(2, sd.f32, shape=n, needs_grad=True)
    w = sd.Vector.field(2, sd.f32, shape=n)
    out = sd.Vector.field(2, sd.f32, shape=(n, 6))
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def run():
        for i in z:
            a, b = z[i], w[i]
            rs = [tm.cdiv(a, b), tm.cinv(a), tm.cexp(a), tm.clog(a), tm.cpow(a, 2.5), tm.csqrt(a)]
            for k in sd.static(range(6)):
                out[i, k] = rs[k]
                loss[None] += rs[k][0] + rs[k][1]

    z.from_numpy(_Z.astype(np.float32))
    w.from_numpy(_W.astype(np.float32))
    with sd.ad.Tape(loss=loss):
        run()
    want = _complex_ref(_Z, _W)
    np.testing.assert_allclose(out.to_numpy(), want, rtol=2e-5, atol=2e-5)
    h, g = 1e-6, np.zeros_like(_Z)
    for i in range(n):
        for c in range(2):
            e = np.zeros_like(_Z)
            e[i, c] = h
            g[i, c] = (_complex_ref(_Z + e, _W).sum() - _complex_ref(_Z - e, _W).sum()) / (2 * h)
    np.testing.assert_allclose(z.grad.to_numpy(), g, rtol=1e-4, atol=1e-4)
    py = np.array([[tm.cdiv(a, b), tm.cinv(a), tm.cexp(a), tm.clog(a), tm.cpow(a, 2.5),
                    tm.csqrt(a)] for a, b in zip(_Z, _W)], np.float64)
    np.testing.assert_allclose(py, want, rtol=1e-12, atol=1e-12)
    zero = np.zeros(2)
    assert np.all(tm.cpow(zero, 2.5) == 0) and np.all(tm.csqrt(zero) == 0)
@test_archs(default_ip=sd.i64, default_fp=sd.f64)
def test_uvec_follows_default_ip(arch):
    """`sd.math.uvec2` holds Taichi's default unsigned type: u64 under default_ip=i64 (u32 with
    the default i32), so a u64 value keeps all its bits (Taichi's test_vector_types_f64)."""
    big = 2**63 - 1

    @sd.kernel
    def ids() -> sd.math.uvec2:
        n = sd.u64(2**63 - 1)
        return sd.math.uvec2(n, 7)

    assert list(ids()) == [big, 7]
    assert sd.math.uvec3.field(shape=2).dtype == sd.u64
    sd.init(arch=arch, default_ip=sd.i32)
    assert sd.math.uvec3.field(shape=2).dtype == sd.u32
