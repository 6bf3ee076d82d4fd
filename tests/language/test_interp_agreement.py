"""The same kernels on each arch and on the reference interpreter (`arch="interp"`) agree.

Each case builds its data in the current `init`, runs kernels and returns numpy arrays; the test
runs it on the arch under test, re-inits with the interpreter and runs it again. Integer results
must match exactly; float results to a few ulps (libm transcendental functions may differ).
"""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


@sd.func
def collatz_steps(n):
    steps = 0
    while n != 1 and steps < 200:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


@sd.kernel
def int_control(a: sd.types.ndarray(), out: sd.types.ndarray()):
    for i in a:
        v = a[i]
        out[i, 0] = collatz_steps(i + 1)
        acc = 0
        for j in range(v % 17):
            if (j ^ v) & 3 == 0:
                continue
            acc += j * v - (acc >> 2)
            if acc > 10000:
                break
        out[i, 1] = acc
        out[i, 2] = (v // 7) * 7 + v % 7 - v
        out[i, 3] = (v << 3) | (v & 5)
        out[i, 4] = sd.max(v, 3 * i - 50, -v)


def case_int_control():
    a = sd.ndarray(sd.i32, 64)
    a.from_numpy(np.random.default_rng(0).integers(-500, 500, 64).astype(np.int32))
    out = sd.ndarray(sd.i32, (64, 5))
    int_control(a, out)
    return [out.to_numpy()]


@sd.func
def smooth(x):
    return sd.tanh(x) * 0.5 + sd.exp(-x * x)


@sd.kernel
def float_math(p: sd.types.ndarray(), out: sd.types.ndarray(), mat: sd.template()):
    for i in p:
        q = p[i]
        r = q.norm() + 1e-3
        d = q / r
        out[i, 0] = smooth(q[0])
        out[i, 1] = sd.atan2(d.y, d.x) + sd.sqrt(r)
        out[i, 2] = sd.select(q[2] > 0, sd.log(r), sd.pow(r, 1.5))
        w = mat[None] @ q
        out[i, 3] = w.dot(d) - sd.floor(w[1])
        t = q[0] * 0.0  # the element type: an f32 local would round f64 results
        for k in sd.static(range(4)):
            t = t * 0.5 + sd.sin(q[k % 3] * k) * sd.cos(t)
        out[i, 4] = t


def case_float_math(dt):
    def run():
        p = sd.Vector.ndarray(3, dt, 32)
        p.from_numpy(np.random.default_rng(1).uniform(-2, 2, (32, 3)).astype(dt.np))
        out = sd.ndarray(dt, (32, 5))
        mat = sd.Matrix.field(3, 3, dt, shape=())
        mat.from_numpy(np.array([[1, 2, 0], [0.5, -1, 3], [2, 0, 1]], dt.np))
        float_math(p, out, mat)
        return [out.to_numpy()]
    return run


hist = None


@sd.kernel
def tasks_and_atomics(x: sd.types.ndarray(), h: sd.template(), total: sd.template()):
    total[None] = 0
    base = x.shape[0] // 4
    for i in x:
        h[x[i] % 8] += 1
        total[None] += x[i]
    m = total[None] + base
    for i in h:
        h[i] = h[i] * 10 + m % 7


def case_tasks_and_atomics():
    x = sd.ndarray(sd.i32, 200)
    x.from_numpy(np.random.default_rng(2).integers(0, 1000, 200).astype(np.int32))
    h = sd.field(sd.i32, shape=8)
    total = sd.field(sd.i64, shape=())
    tasks_and_atomics(x, h, total)
    tasks_and_atomics(x, h, total)
    return [h.to_numpy(), total.to_numpy()]


@sd.kernel
def grids(g: sd.types.ndarray(), f: sd.template()):
    for i, j in sd.ndrange(g.shape[0], g.shape[1]):
        g[i, j] = sd.cast(i * 3 - j, sd.f32) / 2
    for I in sd.grouped(f):
        f[I] = I[0] * I[1] + sd.cast(I.sum() % 3 == 0, sd.i32)


def case_grids():
    g = sd.ndarray(sd.f32, (5, 7))
    f = sd.field(sd.i64, shape=(4, 3, 2))
    grids(g, f)
    return [g.to_numpy(), f.to_numpy()]


@sd.kernel
def casts_and_wraps(u: sd.types.ndarray(), out_u: sd.types.ndarray(), out_i: sd.types.ndarray()):
    for i in u:
        a = u[i]
        out_u[i, 0] = a * 2654435761            # u32 wraps
        out_u[i, 1] = a >> 3
        out_u[i, 2] = a - 1000                  # wraps below zero
        b = sd.cast(a, sd.i64) * 100000 - 7
        out_i[i, 0] = b
        out_i[i, 1] = b // -3
        out_i[i, 2] = b % -3
        out_i[i, 3] = sd.cast(sd.cast(b, sd.f64) * 0.001, sd.i64)


def case_casts_and_wraps():
    u = sd.ndarray(sd.u32, 40)
    u.from_numpy(np.random.default_rng(3).integers(0, 2 ** 32 - 1, 40).astype(np.uint32))
    out_u, out_i = sd.ndarray(sd.u32, (40, 3)), sd.ndarray(sd.i64, (40, 4))
    casts_and_wraps(u, out_u, out_i)
    return [out_u.to_numpy(), out_i.to_numpy()]


CASES = {
    "int_control": case_int_control,
    "float_math_f32": case_float_math(sd.f32),
    "float_math_f64": case_float_math(sd.f64),
    "tasks_and_atomics": case_tasks_and_atomics,
    "grids": case_grids,
    "casts_and_wraps": case_casts_and_wraps,
}


@test_archs(require=("f64", "i64"))
@pytest.mark.parametrize("name", list(CASES))
def test_agrees_with_interpreter(arch, name):
    got = CASES[name]()
    sd.init(arch="interp", debug=True)
    want = CASES[name]()
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype.kind == "f":
            rtol = 1e-5 if g.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)
        else:
            np.testing.assert_array_equal(g, w)


def test_interp_matches_numpy_directly():
    """The interpreter itself is checked against numpy on one case (it is the oracle elsewhere)."""
    sd.init(arch="interp", debug=True)
    out, _ = case_casts_and_wraps()
    u = np.random.default_rng(3).integers(0, 2 ** 32 - 1, 40).astype(np.uint32)
    np.testing.assert_array_equal(out[:, 0], (u.astype(np.uint64) * 2654435761) % 2 ** 32)
    np.testing.assert_array_equal(out[:, 1], u >> 3)
    np.testing.assert_array_equal(out[:, 2], (u.astype(np.int64) - 1000) % 2 ** 32)
