"""The adjoint IR run on the reference interpreter (`arch="interp"`) agrees with the same adjoint
compiled for cpu and vulkan: forward results and gradients equal to ~1e-12 in f64.

Each case builds its data in the current init, runs the kernel and its gradient, and returns
numpy arrays; the test runs it on the arch under test, re-inits with the interpreter (same init
options) and runs it again."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, test_archs

ND = sd.types.ndarray()
RNG = np.random.default_rng(7)
XS = RNG.uniform(0.1, 0.9, 7)
STEPS = np.array([0, 3, 1, 6, 2, 4, 5], np.int32)


@sd.func
def damp(v, n):
    for j in range(n):
        v = v * 0.93 + sd.sin(v * (j + 1)) * 0.05
    return v


@sd.kernel
def k_loops(x: ND, y: ND, steps: ND, n: sd.i32):
    for i in x:
        v = x[i]
        acc = 0.0
        for j in range(n):
            for k in range(j):                          # triangular
                v = sd.tanh(v * 1.2) + 0.03 * k
            if v > 0.4:
                acc += sd.max(v, 0.55) * j
            else:
                acc -= sd.select(v > 0.2, v * v, 0.5 * v)
        for j in range(steps[i]):                       # ndarray-valued bound
            v = damp(v, 2)
            if v * acc > 3.0:
                break
            if j % 2 == 1:
                continue
            acc += sd.exp(-v)
        y[i] = acc + v


@sd.kernel
def k_vec_tasks(x: ND, y: ND, z: ND, m: sd.template(), n: sd.i32):
    for i in x:
        v = sd.Vector([x[i], 1.0 - x[i], 0.5 * x[i]])
        for j in range(n):
            v = m[None] @ v
            v = v / (v.norm() + 0.5)
        y[i] = v.dot(sd.Vector([1.0, 2.0, 3.0]))
    for i in x:
        a, b = x[i], y[i]
        for j in range(n + 1):
            a, b = b * 0.9 + sd.cos(a) * 0.1, a
        z[i] = a * b + sd.atan2(a, b + 2.0)


@sd.kernel
def k_while(x: ND, y: ND):
    for i in x:
        v = x[i]
        j = 0
        while v < 2.0 and j < 12:
            v = v * 1.25 + sd.sqrt(v) * 0.1
            j += 1
        y[i] = v * j


def case_loops():
    x = sd.ndarray(sd.f64, 7, needs_grad=True)
    y = sd.ndarray(sd.f64, 7, needs_grad=True)
    steps = sd.ndarray(sd.i32, 7)
    x.from_numpy(XS)
    steps.from_numpy(STEPS)
    k_loops(x, y, steps, 5)
    y.grad.from_numpy(np.linspace(0.5, 1.5, 7))
    k_loops.grad(x, y, steps, 5)
    return [y.to_numpy(), x.grad.to_numpy()]


def case_vec_tasks():
    x = sd.ndarray(sd.f64, 7, needs_grad=True)
    y = sd.ndarray(sd.f64, 7, needs_grad=True)
    z = sd.ndarray(sd.f64, 7, needs_grad=True)
    m = sd.Matrix.field(3, 3, sd.f64, shape=(), needs_grad=True)
    x.from_numpy(XS)
    m.from_numpy(np.array([[0.9, 0.2, -0.1], [0.1, 0.8, 0.3], [-0.2, 0.1, 1.1]]))
    k_vec_tasks(x, y, z, m, 4)
    y.grad.fill(0.5)
    z.grad.from_numpy(np.linspace(1.0, 2.0, 7))
    k_vec_tasks.grad(x, y, z, m, 4)
    return [y.to_numpy(), z.to_numpy(), x.grad.to_numpy(), m.grad.to_numpy()]


def case_while():
    x = sd.ndarray(sd.f64, 7, needs_grad=True)
    y = sd.ndarray(sd.f64, 7, needs_grad=True)
    x.from_numpy(XS)
    k_while(x, y)
    y.grad.fill(1.0)
    k_while.grad(x, y)
    return [y.to_numpy(), x.grad.to_numpy()]


def case_tape():
    x = sd.field(sd.f64, shape=7, needs_grad=True)
    y = sd.field(sd.f64, shape=7, needs_grad=True)
    loss = sd.field(sd.f64, shape=(), needs_grad=True)

    @sd.kernel
    def k1(n: sd.i32):
        for i in x:
            y[i] = damp(x[i], n)

    @sd.kernel
    def k2():
        for i in y:
            loss[None] += y[i] * y[i] * (i + 1)

    x.from_numpy(XS)
    with sd.ad.Tape(loss=loss):
        k1(6)
        k2()
    return [y.to_numpy(), np.array([loss[None]]), x.grad.to_numpy()]


CASES = {
    "loops": (case_loops, {}),
    "vector_tasks": (case_vec_tasks, {}),
    "while": (case_while, {}),  # its stacks measured by the counting pass
    "tape": (case_tape, {}),
}


def _run(arch, name):
    fn, kw = CASES[name]
    sd.init(arch=arch, debug=True, default_fp=sd.f64, **kw)
    return fn()


@pytest.mark.parametrize("name", sorted(CASES))
@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_adjoint_agrees_with_interp(arch, name):
    got = _run(arch, name)
    want = _run("interp", name)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert np.all(np.isfinite(w)), (k, w)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13, err_msg=f"{name}: output {k}")
    assert any(np.any(w != 0) for w in want[1:])     # the gradients are not trivially zero
