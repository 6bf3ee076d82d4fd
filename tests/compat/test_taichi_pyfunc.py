"""Plain Python functions and lambdas called in kernels are inlined at compile time, as in
Taichi (issue #13 item 2): module-level defs, closures, lambdas, defaults, functions passed as
`sd.template()` arguments, and their gradients."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs


def poly(x, a=2.0):
    y = x * x + a * x
    return y


def vec_scale(v, s):
    return v * s


square = lambda x: x * x  # noqa: E731
twice, thrice = (lambda x: x * 2), (lambda x: x * 3)  # noqa: E731


@test_archs()
def test_plain_functions_and_lambdas(arch):
    x = sd.field(sd.f32, shape=6)
    out = sd.field(sd.f32, shape=(6, 5))
    offset = 0.5
    local = lambda v: v + offset  # noqa: E731

    @sd.kernel
    def k():
        for i in x:
            out[i, 0] = poly(x[i])
            out[i, 1] = poly(x[i], a=-1.0)
            out[i, 2] = square(x[i]) + local(x[i])
            out[i, 3] = twice(x[i]) + thrice(1.0)
            out[i, 4] = vec_scale(sd.Vector([x[i], 1.0]), 3.0)[0]

    data = np.linspace(-2, 2, 6).astype(np.float32)
    x.from_numpy(data)
    k()
    d = data.astype(np.float64)
    want = np.stack([d * d + 2 * d, d * d - d, d * d + d + 0.5, 2 * d + 3, 3 * d], axis=1)
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-6, atol=1e-6)


@test_archs()
def test_function_as_template_argument_and_gradient(arch):
    x = sd.field(sd.f32, shape=5, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def apply(f: sd.template()):
        for i in x:
            loss[None] += f(x[i])

    data = np.linspace(0.1, 1.3, 5).astype(np.float32)
    x.from_numpy(data)
    for f, df in ((lambda v: sd.sin(v) * v, lambda v: np.cos(v) * v + np.sin(v)),
                  (poly, lambda v: 2 * v + 2)):
        loss[None] = 0
        with sd.ad.Tape(loss):
            apply(f)
        d = data.astype(np.float64)
        np.testing.assert_allclose(loss[None], np.sum(f(d)) if f is poly else
                                   np.sum(np.sin(d) * d), rtol=1e-5)
        np.testing.assert_allclose(x.grad.to_numpy(), df(d), rtol=1e-5, atol=1e-6)


def _bad(x):
    if x > 0:
        return x
    return -x


@test_archs(archs=exactly("cpu"))
def test_plain_function_errors(arch):
    x = sd.field(sd.f32, shape=2)

    @sd.kernel
    def k():
        for i in x:
            x[i] = _bad(x[i])

    with pytest.raises(sd.SpiradSyntaxError, match="return") as e:
        k()
    assert "return x" in str(e.value)

    @sd.kernel
    def k2():
        for i in x:
            x[i] = poly()

    with pytest.raises(sd.SpiradTypeError, match="parameters"):
        k2()


def cells(dx):
    return int(1.0 / dx) + 1


@test_archs()
def test_plain_function_of_constants_is_compile_time(arch):
    """As in Taichi, a plain function given Python values computes a Python value: usable in
    sd.static and as a static trip count."""
    out = sd.field(sd.i32, shape=8)

    @sd.kernel
    def k():
        for i in sd.static(range(cells(0.25))):
            out[i] = sd.static(cells(0.5)) * i

    k()
    np.testing.assert_array_equal(out.to_numpy(), [0, 3, 6, 9, 12, 0, 0, 0])


@test_archs()
def test_break_and_continue_in_static_loops(arch):
    x = sd.field(sd.f32, shape=6, needs_grad=True)
    out = sd.field(sd.f32, shape=6, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def k():
        for i in x:
            acc = 0.0
            for j in sd.static(range(5)):
                if j == 1:
                    continue
                if acc > x[i]:
                    break
                acc += x[i] * 0.5 + j
            out[i] = acc
            loss[None] += acc * acc

    xs = np.array([0.1, 0.7, 1.5, 2.5, 4.0, 9.0])

    def ref(v):
        acc = 0.0
        for j in range(5):
            if j == 1:
                continue
            if acc > v:
                break
            acc += v * 0.5 + j
        return acc

    x.from_numpy(xs.astype(np.float32))
    with sd.ad.Tape(loss):
        k()
    want = np.array([ref(v) for v in xs.astype(np.float32).astype(np.float64)])
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-6)
    h = 1e-6
    g = np.array([(ref(v + h) ** 2 - ref(v - h) ** 2) / (2 * h) for v in xs])
    np.testing.assert_allclose(x.grad.to_numpy(), g, rtol=1e-4)
