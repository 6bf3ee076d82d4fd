"""`sd.svd`, `sd.sym_eig`, `sd.eig` and 3x3 `sd.polar_decompose` in kernels (frontend/svd.py).

Taichi 1.7.4's outputs on a table of matrices (recorded from Taichi, f64; signs included), the
decomposition's properties on random matrices against numpy, and derivatives — reverse mode and
forward mode — against float64 central differences, on every arch; near-equal singular values
(the identity, a rotation) give finite derivatives, exact ones for what is unique there (S, U Vᵀ).
"""
import numpy as np
import pytest

import spirad as sd
from tests.autodiff.gradutil import central_diff
from tests.support.archs import test_archs

# Taichi 1.7.4, ti.svd(A, ti.f64) on the CPU: (A, U, S diagonal, V), rows of 2x2 / 3x3
TAICHI_SVD = [
    ([[1, 1], [2, 3]],
     [[-0.360597, 0.932722], [-0.932722, -0.360597]],
     [3.864328, 0.258777],
     [[-0.576048, 0.817416], [-0.817416, -0.576048]]),
    ([[1, 0], [0, 2]],
     [[0, 1], [-1, 0]],
     [2, 1],
     [[0, 1], [-1, 0]]),
    ([[0.5, -1.2], [0.3, 0.8]],
     [[0.868851, 0.495075], [-0.495075, 0.868851]],
     [1.466813, 0.51813],
     [[0.194914, 0.98082], [-0.98082, 0.194914]]),
    ([[-1, 0.2], [0.1, 0.7]],
     [[-0.997297, -0.073473], [-0.073473, 0.997297]],
     [1.021248, 0.70502],
     [[0.969353, 0.245671], [-0.245671, 0.969353]]),
    ([[0, 1], [1, 0]],
     [[0, 1], [1, 0]],
     [1, 1],
     [[1, 0], [0, 1]]),
    ([[3, 1], [1, 3]],
     [[-0.707107, 0.707107], [-0.707107, -0.707107]],
     [4, 2],
     [[-0.707107, 0.707107], [-0.707107, -0.707107]]),
    ([[1, 1, 3], [9, -3, 2], [-3, 4, 2]],
     [[0.083696, 0.648724, 0.756407], [0.917277, 0.246433, -0.312847], [-0.389355, 0.720019, -0.574434]],
     [10.485768, 4.829885, 0.849046],
     [[0.906682, 0.14629, -0.395635], [-0.40298, 0.57755, -0.70996], [0.124639, 0.803141, 0.582606]]),
    ([[2, 0, 0], [0, 3, 0], [0, 0, 1]],
     [[0, -1, 0], [1, 0, 0], [0, 0, 1]],
     [3, 2, 1],
     [[0, -1, 0], [1, 0, 0], [0, 0, 1]]),
    ([[0.3, -0.2, 0.9], [1.1, 0.4, -0.5], [0.2, 0.8, 0.1]],
     [[-0.198841, 0.967754, 0.154644], [0.904341, 0.120378, 0.409483], [0.377663, 0.221273, -0.899115]],
     [1.366969, 0.955424, 0.684514],
     [[0.73934, 0.488784, 0.463105], [0.514741, 0.033094, -0.856707], [-0.434071, 0.871777, -0.22713]]),
    ([[-1, 0, 0], [0, 1, 0], [0, 0, 1]],
     [[-1, 0, 0], [0, 1, 0], [0, 0, -1]],
     [1, 1, -1],
     [[1, 0, 0], [0, 1, 0], [0, 0, 1]]),
]
# Taichi 1.7.4 ti.sym_eig (2x2: values descending; 3x3: ascending) and ti.eig (2x2)
TAICHI_SYM_EIG = [
    ([[2, 1], [1, 3]], [3.618034, 1.381966], [[0.525731, -0.850651], [0.850651, 0.525731]]),
    ([[0.5, -0.3], [-0.3, -1.2]], [0.551388, -1.251388], [[0.985645, -0.168834], [-0.168834, -0.985645]]),
    ([[2, 1, 0.5], [1, 3, -0.2], [0.5, -0.2, 1]], [0.625254, 1.753266, 3.621480],
     [[-0.501472, 0.681630, 0.532830], [0.280109, -0.454780, 0.845408], [0.818575, 0.573198, 0.037129]]),
    ([[0.3, 0.1, -0.4], [0.1, -0.8, 0.25], [-0.4, 0.25, 0.6]], [-0.869181, 0.078469, 0.890712],
     [[0.153193, 0.822443, -0.547832], [-0.966452, 0.240349, 0.090574], [0.206163, 0.515578, 0.831671]]),
]
TAICHI_EIG = [
    ([[1, 2], [3, 4]], [[5.372281, 0], [-0.372281, 0]],
     [[0.415974, -0.824565], [0, 0], [0.909377, 0.565767], [0, 0]]),
    ([[0, -1], [1, 0]], [[0, 1], [0, -1]], [[0, 0], [0.707107, -0.707107], [0.707107, 0.707107], [0, 0]]),
    ([[0.5, 1.5], [-0.7, 0.2]], [[0.35, 1.013657], [0.35, -1.013657]],
     [[0.120873, 0.120873], [0.816828, -0.816828], [-0.564076, -0.564076], [0, 0]]),
]


def _decompose(kind, mats, dt):
    """Run `kind` (svd / sym_eig / eig) over matrices in one kernel; numpy outputs."""
    mats = np.asarray(mats, np.float64)
    k, n = len(mats), mats.shape[1]
    a = sd.Matrix.field(n, n, dt, shape=k)
    a.from_numpy(mats.astype(dt.np))
    if kind == "svd":
        outs = [sd.Matrix.field(n, n, dt, shape=k) for _ in range(3)]
    elif kind == "sym_eig":
        outs = [sd.Vector.field(n, dt, shape=k), sd.Matrix.field(n, n, dt, shape=k)]
    else:
        outs = [sd.Matrix.field(2, 2, dt, shape=k), sd.Matrix.field(4, 2, dt, shape=k)]

    @sd.kernel
    def run():
        for i in a:
            if sd.static(kind == "svd"):
                outs[0][i], outs[1][i], outs[2][i] = sd.svd(a[i], dt)
            elif sd.static(kind == "sym_eig"):
                outs[0][i], outs[1][i] = sd.sym_eig(a[i], dt)
            else:
                outs[0][i], outs[1][i] = sd.eig(a[i], dt)

    run()
    return [o.to_numpy().astype(np.float64) for o in outs]


@pytest.mark.parametrize("n", [2, 3])
@test_archs()
def test_svd_as_taichi(arch, n):
    rows = [r for r in TAICHI_SVD if len(r[0]) == n]
    u, s, v = _decompose("svd", [r[0] for r in rows], sd.f32)
    for k, (a, tu, ts, tv) in enumerate(rows):
        np.testing.assert_allclose(u[k], tu, atol=2e-5, err_msg=f"U of {a}")
        np.testing.assert_allclose(np.diag(s[k]), ts, atol=2e-5, err_msg=f"S of {a}")
        np.testing.assert_allclose(s[k] - np.diag(np.diag(s[k])), 0, atol=0)
        np.testing.assert_allclose(v[k], tv, atol=2e-5, err_msg=f"V of {a}")


@test_archs()
def test_sym_eig_and_eig_as_taichi(arch):
    for n in (2, 3):
        rows = [r for r in TAICHI_SYM_EIG if len(r[0]) == n]
        lam, vec = _decompose("sym_eig", [r[0] for r in rows], sd.f32)
        for k, (a, tl, tv) in enumerate(rows):
            np.testing.assert_allclose(lam[k], tl, atol=2e-5, err_msg=f"values of {a}")
            np.testing.assert_allclose(vec[k], tv, atol=2e-5, err_msg=f"vectors of {a}")
    lam, vec = _decompose("eig", [r[0] for r in TAICHI_EIG], sd.f32)
    for k, (a, tl, tv) in enumerate(TAICHI_EIG):
        np.testing.assert_allclose(lam[k], tl, atol=2e-5, err_msg=f"values of {a}")
        np.testing.assert_allclose(vec[k], tv, atol=2e-5, err_msg=f"vectors of {a}")
    # where Taichi divides by zero (its NaN): eigenvectors from the other column / unit vectors
    lam, vec = _decompose("sym_eig", [[[4, 0], [0, 1]], [[2, 0], [0, 2]]], sd.f32)
    np.testing.assert_allclose(lam, [[4, 1], [2, 2]])
    np.testing.assert_allclose(vec, [[[1, 0], [0, -1]], [[0, 1], [1, 0]]])


def _random(n, count, seed):
    return np.random.default_rng(seed).uniform(-1, 1, (count, n, n))


@pytest.mark.parametrize("n", [2, 3])
@test_archs(require=("f64",), default_fp=sd.f64)
def test_svd_properties(arch, n):
    mats = np.concatenate([_random(n, 40, n), [np.eye(n), -np.eye(n), np.zeros((n, n)),
                                               np.diag(np.arange(1.0, n + 1)[::-1] * 1e-3)]])
    u, s, v = _decompose("svd", mats, sd.f64)
    for a, uu, ss, vv in zip(mats, u, s, v):
        sig = np.diag(ss)
        np.testing.assert_allclose(uu @ ss @ vv.T, a, atol=1e-12)
        np.testing.assert_allclose(uu.T @ uu, np.eye(n), atol=1e-12)
        np.testing.assert_allclose(vv.T @ vv, np.eye(n), atol=1e-12)
        np.testing.assert_allclose(np.abs(sig), np.linalg.svd(a)[1], atol=1e-12)
        assert np.linalg.det(vv) > 0
        if n == 2:  # s1 >= s2 >= 0, U a reflection where det A < 0
            assert sig[0] >= sig[1] >= 0 and np.linalg.det(uu) * np.linalg.det(a) >= 0
        else:  # U, V rotations, s1 >= s2 >= |s3|, s3's sign that of det A
            assert np.linalg.det(uu) > 0 and sig[0] >= sig[1] >= abs(sig[2])
            assert sig[2] * np.linalg.det(a) >= 0


def _aligned_svd(a, u0, v0):
    """numpy's SVD with each singular pair's signs chosen nearest to (u0, v0): the branch the
    kernel's decomposition follows near `a` (the float64 reference of central differences)."""
    u, s, vt = np.linalg.svd(a)
    v = vt.T
    for i in range(len(s)):
        su, sv = np.sign(u[:, i] @ u0[:, i]), np.sign(v[:, i] @ v0[:, i])
        u[:, i] *= su
        v[:, i] *= sv
        s[i] *= su * sv
    return u, s, v


def _svd_loss_kernel(n, a, wu, ws, wv, loss):
    @sd.kernel
    def run():
        u, s, v = sd.svd(a[None])
        acc = (u * wu[None]).sum() + (v * wv[None]).sum()
        for i in sd.static(range(n)):
            acc += s[i, i] * ws[None][i]
        loss[None] = acc
    return run


@pytest.mark.parametrize("n", [2, 3])
@test_archs(require=("f64",), default_fp=sd.f64)
def test_svd_gradients(arch, n):
    """Reverse mode (Tape) and forward mode (FwdMode) against float64 central differences of
    sum(wU * U) + sum(ws * s) + sum(wV * V)."""
    rng = np.random.default_rng(10 + n)
    a0 = rng.uniform(-1, 1, (n, n))
    w = [rng.uniform(-1, 1, (n, n)), rng.uniform(-1, 1, n), rng.uniform(-1, 1, (n, n))]
    a = sd.Matrix.field(n, n, sd.f64, shape=(), needs_grad=True, needs_dual=True)
    wu, wv = sd.Matrix.field(n, n, sd.f64, shape=()), sd.Matrix.field(n, n, sd.f64, shape=())
    ws = sd.Vector.field(n, sd.f64, shape=())
    loss = sd.field(sd.f64, shape=(), needs_grad=True, needs_dual=True)
    wu[None], ws[None], wv[None] = w[0].tolist(), w[1].tolist(), w[2].tolist()
    a.from_numpy(a0)
    run = _svd_loss_kernel(n, a, wu, ws, wv, loss)
    with sd.ad.Tape(loss):
        run()
    grad = a.grad.to_numpy()
    u0, s0, v0 = (x[0] for x in _decompose("svd", [a0], sd.f64))

    def ref(m):
        u, s, v = _aligned_svd(m, u0, v0)
        return (u * w[0]).sum() + (s * w[1]).sum() + (v * w[2]).sum()

    assert loss[None] == pytest.approx(ref(a0), abs=1e-12)
    cd = central_diff(ref, a0, 1.0)
    np.testing.assert_allclose(grad, cd, rtol=1e-6, atol=1e-7)
    seed = rng.uniform(-1, 1, (n, n))
    with sd.ad.FwdMode(loss=loss, param=a, seed=seed.reshape(-1).tolist()):
        run()
    np.testing.assert_allclose(loss.dual[None], (cd * seed).sum(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("n", [2, 3])
@test_archs(require=("f64",), default_fp=sd.f64)
def test_repeated_singular_values_give_finite_gradients(arch, n):
    """At the identity and at a rotation every singular value is 1: U and V are not unique, their
    derivatives are clamped (finite); S and the polar factor U Vᵀ keep exact ones."""
    a = sd.Matrix.field(n, n, sd.f64, shape=(), needs_grad=True)
    out = sd.field(sd.f64, shape=2, needs_grad=True)  # out[0]: U, V and S; out[1]: U Vᵀ and S
    w = np.random.default_rng(3).uniform(-1, 1, (n, n))
    wf = sd.Matrix.field(n, n, sd.f64, shape=())
    wf[None] = w.tolist()

    @sd.kernel
    def losses():
        u, s, v = sd.svd(a[None])
        out[0] = (u * wf[None]).sum() + (v * wf[None]).sum() + s.trace()
        out[1] = ((u @ v.transpose()) * wf[None]).sum() + s.trace() * 0.5

    c, s_ = np.cos(0.3), np.sin(0.3)
    rot = np.eye(n)
    rot[:2, :2] = [[c, -s_], [s_, c]]
    for m in (np.eye(n), rot):
        a.from_numpy(m)
        losses()
        for k in (0, 1):
            a.grad.fill(0.0)
            out.grad.from_numpy(np.eye(2)[k])
            losses.grad()
            assert np.isfinite(a.grad.to_numpy()).all()
        # d/dA of <w, polar(A)> + tr(S)/2 at an orthogonal A (the last grad: out[1]): central
        # differences of numpy's polar factor
        def ref(x):
            uu, ss, vt = np.linalg.svd(x)
            return ((uu @ vt) * w).sum() + ss.sum() * 0.5
        cd = central_diff(ref, m, 1.0)
        np.testing.assert_allclose(a.grad.to_numpy(), cd, rtol=1e-5, atol=1e-6)


@test_archs()
def test_polar_decompose_3x3(arch):
    """R S = A, R a rotation, S symmetric; the gradient of <w, R> + <w2, S> matches central
    differences (float64 numpy reference; f32 kernel)."""
    rng = np.random.default_rng(5)
    a0 = np.eye(3) + 0.3 * rng.uniform(-1, 1, (3, 3))
    w1, w2 = rng.uniform(-1, 1, (3, 3)), rng.uniform(-1, 1, (3, 3))
    a = sd.Matrix.field(3, 3, sd.f32, shape=(), needs_grad=True)
    r_out = sd.Matrix.field(3, 3, sd.f32, shape=())
    s_out = sd.Matrix.field(3, 3, sd.f32, shape=())
    loss = sd.field(sd.f32, shape=(), needs_grad=True)
    wa, wb = sd.Matrix.field(3, 3, sd.f32, shape=()), sd.Matrix.field(3, 3, sd.f32, shape=())
    wa[None], wb[None] = w1.tolist(), w2.tolist()

    @sd.kernel
    def run():
        r, s = sd.polar_decompose(a[None])
        r_out[None], s_out[None] = r, s
        loss[None] = (r * wa[None]).sum() + (s * wb[None]).sum()

    a.from_numpy(a0.astype(np.float32))
    with sd.ad.Tape(loss):
        run()
    r, s = r_out.to_numpy(), s_out.to_numpy()
    np.testing.assert_allclose(r @ s, a0, atol=2e-5)
    np.testing.assert_allclose(r.T @ r, np.eye(3), atol=2e-5)
    np.testing.assert_allclose(s, s.T, atol=2e-5)
    assert np.linalg.det(r) > 0

    def ref(x):
        uu, ss, vt = np.linalg.svd(x)
        return ((uu @ vt) * w1).sum() + ((vt.T @ np.diag(ss) @ vt) * w2).sum()

    cd = central_diff(ref, a0, 1.0)
    np.testing.assert_allclose(a.grad.to_numpy(), cd, rtol=2e-3, atol=2e-4)


@test_archs(require=("f64",), default_fp=sd.f64)
def test_sym_eig_gradient(arch):
    """d/dA of sum(w_l * values) + sum(w_v * vectors) for a symmetric 3x3 A, against central
    differences of numpy's eigh of A's symmetric part (what the derivative is taken of: a
    perturbation of A_ij alone counts half for A_ij, half for A_ji)."""
    rng = np.random.default_rng(8)
    b = rng.uniform(-1, 1, (3, 3))
    a0 = b + b.T
    wl, wv = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, (3, 3))
    a = sd.Matrix.field(3, 3, sd.f64, shape=(), needs_grad=True)
    loss = sd.field(sd.f64, shape=(), needs_grad=True)
    fl, fv = sd.Vector.field(3, sd.f64, shape=()), sd.Matrix.field(3, 3, sd.f64, shape=())
    fl[None], fv[None] = wl.tolist(), wv.tolist()

    @sd.kernel
    def run():
        lam, vec = sd.sym_eig(a[None])
        loss[None] = (lam * fl[None]).sum() + (vec * fv[None]).sum()

    a.from_numpy(a0)
    with sd.ad.Tape(loss):
        run()
    _, q0 = (x[0] for x in _decompose("sym_eig", [a0], sd.f64))

    def ref(x):
        lam, q = np.linalg.eigh((x + x.T) / 2)
        q = q * np.sign((q * q0).sum(0))
        return (lam * wl).sum() + (q * wv).sum()

    cd = central_diff(ref, a0, 1.0)
    np.testing.assert_allclose(a.grad.to_numpy(), cd, rtol=1e-6, atol=1e-7)


def test_python_scope_and_refusals():
    sd.init(arch=sd.cpu)
    a = np.array([[1.0, 2.0, 0.5], [0.3, -1.0, 2.0], [0.0, 0.4, 1.5]])
    u, s, v = (np.asarray(x) for x in sd.svd(a))
    np.testing.assert_allclose(u @ s @ v.T, a, atol=1e-12)
    assert np.linalg.det(u) > 0 and np.linalg.det(v) > 0
    r, p = (np.asarray(x) for x in sd.polar_decompose(a))
    np.testing.assert_allclose(r @ p, a, atol=1e-12)
    lam, q = (np.asarray(x) for x in sd.sym_eig([[2.0, 1.0], [1.0, 3.0]]))
    np.testing.assert_allclose(lam, [3.618034, 1.381966], atol=1e-6)
    m = sd.Matrix.field(4, 4, sd.f32, shape=())

    @sd.kernel
    def four():
        sd.svd(m[None])

    with pytest.raises(sd.SpiradNotSupportedError, match="2x2 and 3x3"):
        four()
    with pytest.raises(sd.SpiradNotSupportedError, match="2x2"):
        sd.eig(np.eye(3))
