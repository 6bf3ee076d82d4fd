"""Forward mode (`sd.ad.FwdMode`, `needs_dual`, `.dual`): Jacobian-vector products.

The reverse-mode tables (test_grad_loops: nested / triangular / ragged dynamic loops, while,
break / continue, if, funcs, Vector, several tasks, stores on every trip; test_grad_ops: every
differentiable op in a dynamic loop) run again in forward mode. For a random direction v, each
output's dual must equal the float64 central difference of the reference in direction v, and
sum(w * dual) must equal x.grad . v from reverse mode on the same kernel (the two modes agree).
Plus Taichi's FwdMode semantics: seeds, clear_gradients, the cleared seed, lazy_dual, fields,
0-d params, errors.
"""
import numpy as np
import pytest

import spirad as sd
from tests.autodiff import test_grad_loops as loops
from tests.autodiff import test_grad_ops as ops
from tests.autodiff.gradutil import FP, TOL, extra_args, weights
from tests.support.archs import EVERY_ARCH, exactly, test_archs


def directional(ref, xs, v, eps=1e-6):
    """d/dt ref(xs + t v) at t = 0, float64 central differences (all outputs, flattened)."""
    hi = np.concatenate([np.ravel(r) for r in ref(xs + eps * v)])
    lo = np.concatenate([np.ravel(r) for r in ref(xs - eps * v)])
    return (hi - lo) / (2 * eps)


def run_fwd_case(case, fp):
    dt = FP[fp]
    rt, at, grt, gat = TOL[fp]
    x = sd.ndarray(dt, case.x.shape, needs_grad=True, needs_dual=True)
    x.from_numpy(case.x.astype(dt.np))
    outs = [sd.ndarray(dt, s, needs_grad=True, needs_dual=True) for s in case.outs]
    extra, extra_np = extra_args(case.extra, dt)
    if case.ref_extra is not None:
        extra_np = list(case.ref_extra)
    args = (x, *outs, *extra)
    v = np.random.default_rng(7).uniform(-1.0, 1.0, case.x.shape)
    with sd.ad.FwdMode(loss=outs, param=x, seed=v):
        case.kernel(*args)
    np.testing.assert_array_equal(x.dual.to_numpy(), 0.0, err_msg="the seed is cleared on exit")
    xs = case.x.astype(dt.np).astype(np.float64)

    def ref(xv):
        return case.ref(xv, *extra_np)

    fwd = np.concatenate([np.ravel(o.to_numpy()) for o in outs])
    want = np.concatenate([np.ravel(r) for r in ref(xs)])
    np.testing.assert_allclose(fwd, want, rtol=rt, atol=at, err_msg="forward (in FwdMode)")
    jvp = np.concatenate([np.ravel(o.dual.to_numpy()) for o in outs])
    v_seen = v.astype(dt.np).astype(np.float64)
    np.testing.assert_allclose(jvp, directional(ref, xs, v_seen), rtol=grt, atol=gat,
                               err_msg="dual vs central differences")
    # reverse mode on the same kernel: w . (J v) == (J^T w) . v
    for o in outs:
        o.fill(0)
    case.kernel(*args)
    ws = [weights(o.shape, seed=k) for k, o in enumerate(outs)]
    for o, w in zip(outs, ws):
        o.grad.from_numpy(w.astype(dt.np))
    case.kernel.grad(*args)
    w_all = np.concatenate([np.ravel(w) for w in ws])
    rev = float(np.sum(x.grad.to_numpy() * v_seen))
    np.testing.assert_allclose(float(np.sum(w_all * jvp)), rev, rtol=grt, atol=gat * len(jvp),
                               err_msg="forward vs reverse mode")


LOOP_CASES = {k: c for k, c in loops.CASES.items() if not c.xfail}


@pytest.mark.parametrize("name", sorted(LOOP_CASES))
@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_fwd_loops_f64(arch, name):
    if arch == "interp" and not LOOP_CASES[name].interp:
        pytest.skip("interp: a representative subset (slow)")
    run_fwd_case(LOOP_CASES[name], "f64")


@pytest.mark.parametrize("name", sorted(LOOP_CASES))
@test_archs(archs=EVERY_ARCH)
def test_fwd_loops_f32(arch, name):
    run_fwd_case(LOOP_CASES[name], "f32")


@pytest.mark.parametrize("name", sorted(loops.WHILE_CASES))
@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64, default_ad_stack_size=64)
def test_fwd_while(arch, name):
    run_fwd_case(loops.WHILE_CASES[name], "f64")


def _fwd_op(op, dtype, n=5):
    x = sd.field(dtype, shape=ops.N, needs_dual=True)
    y = sd.field(dtype, shape=ops.N, needs_dual=True)
    k = ops.op_kernel(x, y)
    xs = ops.XS
    x.from_numpy(xs)
    with sd.ad.FwdMode(loss=y, param=x, seed=[1.0] * ops.N):
        k(ops.FUNCS[op], n)
    return xs, y.to_numpy(), y.dual.to_numpy()


@pytest.mark.parametrize("op", sorted(ops.NP))
@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_fwd_op_f64(arch, op):
    if arch == "interp" and op not in ("sin", "pow", "ifelse", "select", "atan2"):
        pytest.skip("interp: a representative subset (slow)")
    xs, fwd, d = _fwd_op(op, sd.f64)
    np.testing.assert_allclose(fwd, ops.reference(op, xs, 5), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(d, ops.central_diff(op, xs, 5), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("op", sorted(ops.NP))
@test_archs(archs=EVERY_ARCH)
def test_fwd_op_f32(arch, op):
    xs, fwd, d = _fwd_op(op, sd.f32)
    np.testing.assert_allclose(d, ops.central_diff(op, xs, 5), rtol=2e-3, atol=2e-4)


# -- Taichi's FwdMode semantics ---------------------------------------------------------------


@test_archs(archs=exactly("interp") | EVERY_ARCH)
def test_seed_selects_elements_and_lazy_dual(arch):
    n = 5
    x = sd.field(sd.f32, shape=n)
    loss = sd.field(sd.f32, shape=n)
    sd.root.lazy_dual()
    x.from_numpy(np.arange(n, dtype=np.float32))

    @sd.kernel
    def k():
        loss[1] += x[3] * x[4] + 2 * x[3]

    with sd.ad.FwdMode(loss=loss, param=x, seed=[0, 0, 0, 1, 0]):
        k()
    assert loss.dual[1] == 4 + 2          # d/dx3 = x4 + 2
    assert loss[1] == 3 * 4 + 6
    with sd.ad.FwdMode(loss=loss, param=x, seed=[0, 0, 0, 1, 1]):
        k()
    assert loss.dual[1] == 4 + 2 + 3      # the duals were cleared on entry: one launch's worth
    np.testing.assert_array_equal(x.dual.to_numpy(), 0)


@test_archs(archs=EVERY_ARCH)
def test_clear_gradients_false_keeps_duals(arch):
    a = sd.field(sd.f32, shape=4, needs_dual=True)
    p = sd.field(sd.f32, shape=4, needs_dual=True)
    a.fill(3.0)

    @sd.kernel
    def k():
        for i in a:
            p[i] += a[i] * a[i]

    with sd.ad.FwdMode(loss=p, param=a, seed=[1.0] * 4):
        k()
    np.testing.assert_allclose(p.dual.to_numpy(), 6.0)
    with sd.ad.FwdMode(loss=p, param=a, seed=[1.0] * 4, clear_gradients=False):
        k()
    np.testing.assert_allclose(p.dual.to_numpy(), 12.0)  # accumulated, like the primal
    np.testing.assert_allclose(p.to_numpy(), 18.0)


@test_archs(archs=EVERY_ARCH)
def test_scalar_param_default_seed_and_several_kernels(arch):
    x = sd.field(sd.f32, shape=(), needs_dual=True)
    y = sd.field(sd.f32, shape=8, needs_dual=True)
    loss = sd.field(sd.f32, shape=(), needs_dual=True)
    x[None] = 0.7

    @sd.kernel
    def spread():
        for i in y:
            y[i] = sd.sin(x[None] * i)

    @sd.kernel
    def total():
        for i in y:
            loss[None] += y[i] * y[i]

    with sd.ad.FwdMode(loss=loss, parameters=x):   # seed [1.0] for a one-element param
        spread()
        total()
    i = np.arange(8)
    want = np.sum(2 * np.sin(0.7 * i) * np.cos(0.7 * i) * i)
    np.testing.assert_allclose(loss.dual[None], want, rtol=1e-5)
    np.testing.assert_allclose(y.dual.to_numpy(), np.cos(0.7 * i) * i, rtol=1e-5, atol=1e-6)


@test_archs(archs=EVERY_ARCH)
def test_vector_field_and_temps(arch):
    n = 4
    x = sd.Vector.field(2, sd.f32, shape=n, needs_dual=True)
    out = sd.field(sd.f32, shape=(), needs_dual=True)
    xs = np.random.default_rng(1).uniform(0.2, 0.9, (n, 2)).astype(np.float32)
    x.from_numpy(xs)

    @sd.kernel
    def k(m: sd.i32):
        s = 0.0
        if m > 0:                          # a serial task computes s ...
            for i in range(m):
                s += x[i].dot(x[i]) * x[i][0]
        for _ in range(1):                 # ... a parallel task reads it: a kernel temporary
            out[None] = s * 2.0

    seed = np.zeros((n, 2))
    seed[2, 1] = 1.0
    with sd.ad.FwdMode(loss=out, param=x, seed=seed):
        k(n)
    want = 2.0 * 2 * xs[2, 1] * xs[2, 0]
    np.testing.assert_allclose(out.dual[None], want, rtol=1e-5)


@test_archs(archs=EVERY_ARCH)
def test_dual_read_in_kernel_and_int_fields(arch):
    x = sd.field(sd.f32, shape=3, needs_dual=True)
    idx = sd.field(sd.i32, shape=3)
    y = sd.field(sd.f32, shape=3, needs_dual=True)
    x.from_numpy(np.array([1.0, 2.0, 3.0], np.float32))
    idx.from_numpy(np.array([2, 0, 1], np.int32))

    @sd.kernel
    def k():
        for i in y:
            y[i] = x[idx[i]] ** 2

    @sd.kernel
    def copy_dual(d: sd.types.ndarray()):
        for i in y:
            d[i] = y.dual[i]

    with sd.ad.FwdMode(loss=y, param=x, seed=[1.0, 10.0, 100.0]):
        k()
    want = np.array([2 * 3 * 100, 2 * 1 * 1, 2 * 2 * 10], np.float32)
    np.testing.assert_allclose(y.dual.to_numpy(), want)
    d = sd.ndarray(sd.f32, 3)
    copy_dual(d)                            # outside FwdMode: the plain program
    np.testing.assert_allclose(d.to_numpy(), want)


@test_archs()
def test_dual_placed_by_hand(arch):
    """As in Taichi, every real field has a `.dual` slot: `place(x, y, x.dual, y.dual)` (also in
    later place() calls, also after kernels compiled) enables it; before that it is refused with
    the three ways to enable it."""
    a = sd.field(sd.f32)
    b = sd.field(sd.f32)
    sd.root.dense(sd.i, 1).place(a, b, a.dual, b.dual)

    @sd.kernel
    def noop():
        pass

    with sd.ad.FwdMode(loss=b, param=a):  # Taichi's test_handle_shape_accessed_by_zero
        noop()
    x = sd.field(sd.f32, shape=3)
    y = sd.field(sd.f32, shape=3)

    @sd.kernel
    def square():
        for i in x:
            y[i] = x[i] * x[i]

    x.from_numpy(np.array([1.0, 2.0, 3.0], np.float32))
    square()                                  # compiled before the duals exist
    assert not x.needs_dual and not y.needs_dual and x.dual is not None
    with pytest.raises(sd.SpiradValueError, match=r"place x\.dual"):
        x.dual.to_numpy()
    sd.root.dense(sd.i, 3).place(x.dual)
    sd.root.dense(sd.i, 3).place(y.dual)
    with sd.ad.FwdMode(loss=y, param=x, seed=[1.0, 1.0, 1.0]):
        square()
    np.testing.assert_allclose(y.dual.to_numpy(), [2.0, 4.0, 6.0])
    assert sd.field(sd.i32, shape=2).dual is None


def test_errors():
    sd.init(arch="cpu")
    x = sd.field(sd.f32, shape=3)
    y = sd.field(sd.f32, shape=3, needs_dual=True)
    with pytest.raises(sd.SpiradAutodiffError, match="needs_dual=True"):
        with sd.ad.FwdMode(loss=y, param=x, seed=[1, 0, 0]):
            pass
    with pytest.raises(ValueError, match="seed= is needed"):
        with sd.ad.FwdMode(loss=y, param=y):
            pass
    with pytest.raises(ValueError, match="seed has 2 values"):
        with sd.ad.FwdMode(loss=y, param=y, seed=[1, 0]):
            pass
    with pytest.raises(TypeError, match="float dtype"):
        sd.field(sd.i32, shape=3, needs_dual=True)
    with sd.ad.FwdMode(loss=y, param=y, seed=[1, 0, 0]):
        with pytest.raises(sd.SpiradAutodiffError, match="nested"):
            with sd.ad.FwdMode(loss=y, param=y, seed=[1, 0, 0]):
                pass
    assert sd.ad.FwdMode.active is None
