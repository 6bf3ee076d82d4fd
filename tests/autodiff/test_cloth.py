"""A textbook mass-spring cloth (issue 22), differentiated through a Tape on every arch.

8 x 8 particles joined by 161 springs (horizontal, vertical, one diagonal per cell), the top row
pinned, gravity, damping, semi-implicit Euler over 100 steps: `compute_forces` (a parallel loop
over springs adding to both ends' forces) and `step` per time step, then the loss (a weighted
sum of the final heights): 201 launches on the Tape. The adjoint's gradients with respect to the
stiffness, the rest lengths and the initial state are checked against float64 central
differences of a numpy simulation (float64 on the CPU, tight; f32 everywhere, to f32 accuracy)
and against the CPU's f32 run (cross-arch agreement). This is the program that, ported from
Taichi by renaming the import, did not compile on Metal before fields shared root buffers.
"""
import numpy as np

import spirad as sd
from tests.support.archs import exactly, test_archs

SIDE, STEPS, DT, MASS, DAMP, GRAVITY, K0 = 8, 100, 2e-3, 1.0, 0.998, -9.8, 300.0
NP = SIDE * SIDE


def springs():
    """(a, b) particle pairs: 56 horizontal, 56 vertical, 49 diagonal."""
    pairs = []
    for r in range(SIDE):
        for c in range(SIDE):
            p = r * SIDE + c
            if c + 1 < SIDE:
                pairs.append((p, p + 1))
            if r + 1 < SIDE:
                pairs.append((p, p + SIDE))
            if r + 1 < SIDE and c + 1 < SIDE:
                pairs.append((p, p + SIDE + 1))
    return np.array(pairs, np.int32)


def initial_state():
    r, c = np.divmod(np.arange(NP), SIDE)
    x0 = np.stack([c * 0.1, np.zeros(NP), r * 0.1], axis=1) + 0.01 * np.sin(
        np.arange(NP * 3).reshape(NP, 3))
    v0 = 0.1 * np.cos(np.arange(NP * 3).reshape(NP, 3))
    ab = springs()
    rest = np.linalg.norm(x0[ab[:, 0]] - x0[ab[:, 1]], axis=1) * 1.02
    return x0, v0, rest, ab


def weights():
    return (np.arange(NP) + 1.0) / NP


def simulate_np(x0, v0, rest, k, ab):
    """The loss of the same simulation in float64 numpy."""
    x, v = x0.astype(np.float64).copy(), v0.astype(np.float64).copy()
    a, b = ab[:, 0], ab[:, 1]
    g = np.array([0.0, GRAVITY, 0.0])
    for _ in range(STEPS):
        d = x[a] - x[b]
        ln = np.linalg.norm(d, axis=1)
        fs = (k * (ln - rest) / ln)[:, None] * d
        f = np.zeros_like(x)
        np.add.at(f, a, -fs)
        np.add.at(f, b, fs)
        v = v * DAMP + DT * (f / MASS + g)
        v[:SIDE] = 0.0
        x = x + DT * v
    return float((x[:, 1] * weights()).sum())


def central_differences(x0, v0, rest, ab, eps=1e-6):
    """d loss / d (stiffness, rest[0:12], x0[5:9], v0[20:24]) in float64."""
    def d(f):
        return (f(eps) - f(-eps)) / (2 * eps)
    out = {"k": d(lambda e: simulate_np(x0, v0, rest, K0 + e, ab))}
    out["rest"] = np.array([d(lambda e: simulate_np(x0, v0, rest + e * np.eye(len(rest))[s], K0,
                                                    ab)) for s in range(12)])
    out["x0"] = np.array([[d(lambda e: simulate_np(x0 + e * _unit(p, c), v0, rest, K0, ab))
                           for c in range(3)] for p in range(5, 9)])
    out["v0"] = np.array([[d(lambda e: simulate_np(x0, v0 + e * _unit(p, c), rest, K0, ab))
                           for c in range(3)] for p in range(20, 24)])
    return out


def _unit(p, c):
    u = np.zeros((NP, 3))
    u[p, c] = 1.0
    return u


def run_cloth():
    """The cloth on the current arch; returns (loss, {gradient name: values})."""
    x0, v0, rest_np, ab = initial_state()
    ns = len(ab)
    x = sd.Vector.field(3, float, shape=(STEPS + 1, NP), needs_grad=True)
    v = sd.Vector.field(3, float, shape=(STEPS + 1, NP), needs_grad=True)
    force = sd.Vector.field(3, float, shape=(STEPS, NP), needs_grad=True)
    spring_a = sd.field(sd.i32, shape=ns)
    spring_b = sd.field(sd.i32, shape=ns)
    rest = sd.field(float, shape=ns, needs_grad=True)
    stiff = sd.field(float, shape=(), needs_grad=True)
    w = sd.field(float, shape=NP)
    loss = sd.field(float, shape=(), needs_grad=True)

    @sd.kernel
    def compute_forces(t: sd.i32):
        for s in range(ns):
            a, b = spring_a[s], spring_b[s]
            d = x[t, a] - x[t, b]
            ln = d.norm()
            fs = stiff[None] * (ln - rest[s]) / ln * d
            force[t, a] += -fs
            force[t, b] += fs

    @sd.kernel
    def step(t: sd.i32):
        for p in range(NP):
            nv = v[t, p] * DAMP + DT * (force[t, p] / MASS + sd.Vector([0.0, GRAVITY, 0.0]))
            if p < SIDE:
                nv = sd.Vector([0.0, 0.0, 0.0])
            v[t + 1, p] = nv
            x[t + 1, p] = x[t, p] + DT * nv

    @sd.kernel
    def compute_loss():
        for p in range(NP):
            loss[None] += x[STEPS, p][1] * w[p]

    xs, vs = np.zeros((STEPS + 1, NP, 3)), np.zeros((STEPS + 1, NP, 3))
    xs[0], vs[0] = x0, v0
    x.from_numpy(xs)
    v.from_numpy(vs)
    spring_a.from_numpy(ab[:, 0].copy())
    spring_b.from_numpy(ab[:, 1].copy())
    rest.from_numpy(rest_np)
    stiff[None] = K0
    w.from_numpy(weights())
    with sd.ad.Tape(loss=loss):
        for t in range(STEPS):
            compute_forces(t)
            step(t)
        compute_loss()
    grads = {"k": float(stiff.grad[None]), "rest": rest.grad.to_numpy()[:12],
             "x0": x.grad.to_numpy()[0, 5:9], "v0": v.grad.to_numpy()[0, 20:24]}
    return float(loss[None]), {k: np.asarray(g, np.float64) for k, g in grads.items()}


_REFERENCE = {}


def reference():
    if not _REFERENCE:
        x0, v0, rest, ab = initial_state()
        _REFERENCE["loss"] = simulate_np(x0, v0, rest, K0, ab)
        _REFERENCE["grads"] = central_differences(x0, v0, rest, ab)
    return _REFERENCE["loss"], _REFERENCE["grads"]


def _close(got, want, rtol, what):
    for k in want:
        scale = np.abs(want[k]).max()
        np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=rtol * scale,
                                   err_msg=f"{what}: d loss / d {k}")


@test_archs(archs=exactly("cpu"), default_fp=sd.f64)
def test_cloth_gradients_f64(arch):
    loss, grads = run_cloth()
    want_loss, want = reference()
    assert abs(loss - want_loss) < 1e-10 * max(1.0, abs(want_loss))
    _close(grads, want, 2e-5, "f64 vs central differences")


@test_archs()
def test_cloth_gradients_every_arch(arch):
    """f32 on every arch: to f32 accuracy against the float64 central differences, and close to
    the CPU's f32 run."""
    loss, grads = run_cloth()
    want_loss, want = reference()
    assert abs(loss - want_loss) < 1e-4 * max(1.0, abs(want_loss))
    _close(grads, want, 1e-4, f"{arch} f32 vs central differences")
    sd.init(arch=sd.cpu)
    cpu_loss, cpu_grads = run_cloth()
    assert abs(loss - cpu_loss) < 1e-5 * max(1.0, abs(cpu_loss))
    _close(grads, cpu_grads, 3e-5, f"{arch} vs cpu, both f32")
