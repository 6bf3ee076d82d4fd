"""A store overwrites, `+=` accumulates (architecture §4, Taichi's rule in reverse mode).

The adjoint of `a[I] = v` adds `a.grad[I]` into the adjoint of `v` and then sets `a.grad[I]` to
zero: the old value of `a[I]` no longer reaches the output, so no gradient may flow past the
store. An atomic `a[I] += v` (or `sd.atomic_add`) leaves `a.grad[I]` as it is. Every case here
was silently wrong before (the adjoint accumulated), and is checked against analytic values or
float64 central differences, with the `.grad` of each stored-to global observed afterwards.
"""
import numpy as np
import pytest

import spirad as sd
from tests.autodiff.gradutil import central_diff
from tests.support.archs import EVERY_ARCH, exactly, test_archs

ND = sd.types.ndarray()
N = 5
XS = np.array([0.13, 0.29, 0.44, 0.61, 0.78])
WS = np.array([1.0, 0.6, 1.4, 0.8, 1.2])



def _close(got, want, what=""):
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8, err_msg=what)


# -- the three shapes -----------------------------------------------------------------------


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_scalar_stored_twice_in_one_kernel(arch):
    x = sd.field(sd.f64, shape=(), needs_grad=True)
    loss = sd.field(sd.f64, shape=(), needs_grad=True)

    @sd.kernel
    def k():
        loss[None] = x[None]
        loss[None] = 2 * x[None]

    x[None] = 1.0
    with sd.ad.Tape(loss=loss):
        k()
    assert loss[None] == 2.0
    assert x.grad[None] == 2.0
    assert loss.grad[None] == 0.0       # consumed by the store


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_tape_of_kernels_each_overwriting_the_loss(arch):
    x = sd.field(sd.f64, shape=(), needs_grad=True)
    loss = sd.field(sd.f64, shape=(), needs_grad=True)

    @sd.kernel
    def k(c: sd.f64):
        loss[None] = c * x[None]

    x[None] = 1.0
    with sd.ad.Tape(loss=loss):
        k(1.0)
        k(2.0)
        k(4.0)
    assert loss[None] == 4.0
    assert x.grad[None] == 4.0          # only the last store reaches the loss


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_parallel_loop_element_stored_twice(arch):
    x = sd.field(sd.f64, shape=N, needs_grad=True)
    y = sd.field(sd.f64, shape=N, needs_grad=True)
    loss = sd.field(sd.f64, shape=(), needs_grad=True)

    @sd.kernel
    def k():
        for i in x:
            y[i] = 2 * x[i]
            y[i] = 3 * x[i]

    @sd.kernel
    def reduce():
        for i in y:
            loss[None] += y[i]

    x.from_numpy(XS)
    with sd.ad.Tape(loss=loss):
        k()
        reduce()
    np.testing.assert_allclose(x.grad.to_numpy(), 3.0)
    np.testing.assert_array_equal(y.grad.to_numpy(), 0.0)


# -- scalar, ndarray and Vector / Matrix component stores -------------------------------------------


@sd.kernel
def k_self_update(x: ND, y: ND):
    for i in x:
        y[i] = x[i] * x[i]
        y[i] = 3.0 * y[i] + sd.sin(x[i])    # reads its own first store (linearly), then overwrites


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_store_reading_its_own_earlier_store(arch):
    x = sd.ndarray(sd.f64, N, needs_grad=True)
    y = sd.ndarray(sd.f64, N, needs_grad=True)
    x.from_numpy(XS)
    k_self_update(x, y)
    np.testing.assert_allclose(y.to_numpy(), 3 * XS * XS + np.sin(XS), rtol=1e-12)
    y.grad.from_numpy(WS)
    k_self_update.grad(x, y)
    _close(x.grad.to_numpy(), WS * (6 * XS + np.cos(XS)))
    np.testing.assert_array_equal(y.grad.to_numpy(), 0.0)


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_vector_component_overwrite(arch):
    x = sd.field(sd.f64, shape=N, needs_grad=True)
    v = sd.Vector.field(2, sd.f64, shape=N, needs_grad=True)

    @sd.kernel
    def k():
        for i in x:
            v[i] = sd.Vector([x[i] * x[i], sd.cos(x[i])])
            v[i][1] = 5.0 * x[i]             # overwrites component 1 only

    x.from_numpy(XS)
    k()
    np.testing.assert_allclose(v.to_numpy(), np.stack([XS * XS, 5 * XS], 1), rtol=1e-12)
    w = np.stack([WS, 0.5 * WS], 1)
    v.grad.from_numpy(w)
    k.grad()
    _close(x.grad.to_numpy(), w[:, 0] * 2 * XS + w[:, 1] * 5.0)
    np.testing.assert_array_equal(v.grad.to_numpy(), 0.0)


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_matrix_component_overwrite(arch):
    x = sd.field(sd.f64, shape=N, needs_grad=True)
    m = sd.Matrix.field(2, 2, sd.f64, shape=N, needs_grad=True)

    @sd.kernel
    def k():
        for i in x:
            a = x[i]
            m[i] = sd.Matrix([[a, a * a], [sd.sin(a), 2.0 * a]])
            m[i][0, 1] = sd.exp(a)           # component (0, 1) overwritten
            m[i][1, 0] = m[i][1, 0] * 4.0    # in place, linear: keeps the path (times 4)

    x.from_numpy(XS)
    k()
    want = np.stack([XS, np.exp(XS), 4 * np.sin(XS), 2 * XS], 1).reshape(N, 2, 2)
    np.testing.assert_allclose(m.to_numpy(), want, rtol=1e-12)
    m.grad.fill(1.0)
    k.grad()
    _close(x.grad.to_numpy(), 1.0 + np.exp(XS) + 4 * np.cos(XS) + 2.0)
    np.testing.assert_array_equal(m.grad.to_numpy(), 0.0)


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_stored_target_zeroed_atomic_target_kept(arch):
    """After the grad launch the stored-to global's .grad is zero; an atomically added target's
    .grad is left as it was (an accumulation does not end the old value's path)."""
    x = sd.field(sd.f64, shape=N, needs_grad=True)
    y = sd.field(sd.f64, shape=N, needs_grad=True)
    acc = sd.field(sd.f64, shape=(), needs_grad=True)
    tot = sd.ndarray(sd.f64, 2, needs_grad=True)

    @sd.kernel
    def k(tot: ND):
        for i in x:
            y[i] = sd.sin(x[i])
            acc[None] += x[i] * x[i]
            sd.atomic_add(tot[i % 2], 3.0 * x[i])

    x.from_numpy(XS)
    k(tot)
    y.grad.from_numpy(WS)
    acc.grad[None] = 0.5
    tot.grad.from_numpy(np.array([2.0, -1.0]))
    k.grad(tot)
    _close(x.grad.to_numpy(), WS * np.cos(XS) + 0.5 * 2 * XS + np.where(np.arange(N) % 2, -3.0, 6.0))
    np.testing.assert_array_equal(y.grad.to_numpy(), 0.0)
    assert acc.grad[None] == 0.5
    np.testing.assert_array_equal(tot.grad.to_numpy(), [2.0, -1.0])


# -- an element stored on several iterations of a loop ----------------------------------------------


@sd.kernel
def k_serial_loop(x: ND, y: ND):
    for i in x:
        v = x[i]
        for j in range(4):
            v = sd.sin(v) * 0.9 + 0.1
            y[i] = v * (j + 1)               # only the last trip's value survives


@sd.kernel
def k_dynamic_loop(x: ND, y: ND, n: sd.template()):
    for i in x:
        y[i] = x[i] * 0.5
        for j in range(n[None]):
            y[i] = 0.8 * y[i] + sd.sin(x[i] + j * 0.1)   # a chain through the global
        for j in range(n[None]):
            if j % 2 == 1:
                y[i] = y[i] * 0.5 + sd.cos(x[i] * (j + 1))


@sd.kernel
def k_while_loop(x: ND, y: ND, n: sd.template()):
    for i in x:
        v = x[i]
        j = 0
        while j < n[None] + i % 2:
            v = sd.tanh(v * 1.3 + 0.2)
            y[i] = v * v + j * 0.1
            j += 1


def r_serial_loop(x):
    v = x.copy()
    for j in range(4):
        v = np.sin(v) * 0.9 + 0.1
        y = v * (j + 1)
    return y


def r_dynamic_loop(x, n):
    y = x * 0.5
    for j in range(n):
        y = 0.8 * y + np.sin(x + j * 0.1)
    for j in range(n):
        if j % 2 == 1:
            y = y * 0.5 + np.cos(x * (j + 1))
    return y


def r_while_loop(x, n, y0):
    y = y0.copy()
    for i in range(len(x)):
        v = x[i]
        for j in range(n + i % 2):
            v = np.tanh(v * 1.3 + 0.2)
            y[i] = v * v + j * 0.1
    return y


def _grad_case(kernel, args, x, y, ref):
    kernel(*args)
    _close(y.to_numpy(), ref(XS), "forward")
    y.grad.from_numpy(WS)
    kernel.grad(*args)
    _close(x.grad.to_numpy(), central_diff(ref, XS, WS), "gradient")
    np.testing.assert_array_equal(y.grad.to_numpy(), 0.0)


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_element_stored_on_each_trip_of_a_static_loop(arch):
    x = sd.ndarray(sd.f64, N, needs_grad=True)
    y = sd.ndarray(sd.f64, N, needs_grad=True)
    x.from_numpy(XS)
    _grad_case(k_serial_loop, (x, y), x, y, r_serial_loop)


@pytest.mark.parametrize("n", [0, 1, 4])
@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_element_stored_on_each_trip_of_a_dynamic_loop(arch, n):
    if arch == "interp" and n != 4:
        pytest.skip("interp: one case")
    x = sd.ndarray(sd.f64, N, needs_grad=True)
    y = sd.ndarray(sd.f64, N, needs_grad=True)
    steps = sd.field(sd.i32, shape=())
    steps[None] = n
    x.from_numpy(XS)
    _grad_case(k_dynamic_loop, (x, y, steps), x, y, lambda xv: r_dynamic_loop(xv, n))


@pytest.mark.parametrize("n", [0, 3])
@test_archs(archs=EVERY_ARCH, default_fp=sd.f64, default_ad_stack_size=16)
def test_element_stored_on_each_trip_of_a_while_loop(arch, n):
    """With n = 0 the even rows are never stored: their seed passes through (y.grad stays w)."""
    x = sd.ndarray(sd.f64, N, needs_grad=True)
    y = sd.ndarray(sd.f64, N, needs_grad=True)
    y0 = np.linspace(-0.3, 0.3, N)
    steps = sd.field(sd.i32, shape=())
    steps[None] = n
    x.from_numpy(XS)
    y.from_numpy(y0)
    k_while_loop(x, y, steps)
    ref = lambda xv: r_while_loop(xv, n, y0)  # noqa: E731
    _close(y.to_numpy(), ref(XS), "forward")
    y.grad.from_numpy(WS)
    k_while_loop.grad(x, y, steps)
    _close(x.grad.to_numpy(), central_diff(ref, XS, WS), "gradient")
    stored = np.array([n + i % 2 > 0 for i in range(N)])
    np.testing.assert_array_equal(y.grad.to_numpy(), np.where(stored, 0.0, WS))


# -- stores under `if`, in @funcs, in a serial task ---------------------------------------------------


@sd.func
def store_pair(y: sd.template(), i, a):
    y[i] = a * a
    y[i] = y[i] + sd.sin(a)                  # overwrite inside the func


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_store_under_if(arch):
    """y[i] = a; if c: y[i] = b -- the seed reaches a only where c is false."""
    x = sd.field(sd.f64, shape=N, needs_grad=True)
    y = sd.field(sd.f64, shape=N, needs_grad=True)

    @sd.kernel
    def k():
        for i in x:
            y[i] = sd.exp(x[i])
            if x[i] > 0.5:
                y[i] = sd.cos(x[i])
            elif i == 1:
                y[i] = x[i] * x[i] * x[i]

    x.from_numpy(XS)
    k()
    y.grad.from_numpy(WS)
    k.grad()
    big = XS > 0.5
    want = np.where(big, -np.sin(XS), np.where(np.arange(N) == 1, 3 * XS * XS, np.exp(XS)))
    _close(x.grad.to_numpy(), WS * want)
    np.testing.assert_array_equal(y.grad.to_numpy(), 0.0)


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_store_in_func(arch):
    x = sd.field(sd.f64, shape=N, needs_grad=True)
    y = sd.field(sd.f64, shape=N, needs_grad=True)

    @sd.kernel
    def k():
        for i in x:
            store_pair(y, i, x[i] * 0.5)

    x.from_numpy(XS)
    k()
    _close(y.to_numpy(), (XS * 0.5) ** 2 + np.sin(XS * 0.5))
    y.grad.from_numpy(WS)
    k.grad()
    _close(x.grad.to_numpy(), WS * 0.5 * (XS + np.cos(XS * 0.5)))
    np.testing.assert_array_equal(y.grad.to_numpy(), 0.0)


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_serial_task_stores_then_parallel_accumulation(arch):
    """One kernel, two tasks: a serial store of loss, then a parallel `+=` into it (the seed
    passes through the accumulation and ends at the store)."""
    x = sd.field(sd.f64, shape=N, needs_grad=True)
    loss = sd.field(sd.f64, shape=(), needs_grad=True)

    @sd.kernel
    def k():
        loss[None] = sd.sin(x[0]) + 7.0 * x[1]
        for i in x:
            loss[None] += x[i] * x[i]

    x.from_numpy(XS)
    loss[None] = 100.0
    with sd.ad.Tape(loss=loss):
        k()
    want = 2 * XS
    want[0] += np.cos(XS[0])
    want[1] += 7.0
    _close(loss[None], np.sin(XS[0]) + 7 * XS[1] + np.sum(XS * XS))
    _close(x.grad.to_numpy(), want)
    assert loss.grad[None] == 0.0


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_two_tasks_store_the_same_element(arch):
    x = sd.field(sd.f64, shape=N, needs_grad=True)
    y = sd.field(sd.f64, shape=N, needs_grad=True)

    @sd.kernel
    def k():
        for i in x:
            y[i] = sd.sin(x[i])
        for i in x:
            y[i] = y[i] * 2.0 + x[i] * x[i]   # the second task reads, then overwrites

    x.from_numpy(XS)
    k()
    y.grad.from_numpy(WS)
    k.grad()
    _close(x.grad.to_numpy(), WS * (2 * np.cos(XS) + 2 * XS))
    np.testing.assert_array_equal(y.grad.to_numpy(), 0.0)


# -- across kernels: Tape chains and grad() called by hand -------------------------------------------


def _chain():
    x = sd.field(sd.f64, shape=N, needs_grad=True)
    y = sd.field(sd.f64, shape=N, needs_grad=True)
    z = sd.field(sd.f64, shape=N, needs_grad=True)
    loss = sd.field(sd.f64, shape=(), needs_grad=True)

    @sd.kernel
    def k_a():
        for i in x:
            y[i] = sd.sin(x[i])              # dead: k_b overwrites y before anyone reads it

    @sd.kernel
    def k_b(c: sd.f64):
        for i in x:
            y[i] = sd.cos(x[i] * c)
            z[i] = x[i] * x[i]

    @sd.kernel
    def k_c():
        for i in x:
            z[i] += y[i] * y[i]              # accumulates into z (its path continues to k_b)

    @sd.kernel
    def k_loss():
        loss[None] = 0.5 * z[0]              # overwritten ...
        for i in z:
            loss[None] += z[i] * (i + 1)     # ... then accumulated

    x.from_numpy(XS)
    return x, y, z, loss, k_a, k_b, k_c, k_loss


def _chain_grad(c):
    ii = np.arange(N) + 1.0
    wz = ii.copy()
    wz[0] += 0.5
    # z = x^2 + cos(c x)^2
    return wz * (2 * XS - 2 * np.cos(c * XS) * np.sin(c * XS) * c)


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_tape_chain_overwriting_an_intermediate(arch):
    x, y, z, loss, k_a, k_b, k_c, k_loss = _chain()
    with sd.ad.Tape(loss=loss):
        k_a()
        k_b(1.5)
        k_c()
        k_loss()
    _close(x.grad.to_numpy(), _chain_grad(1.5))
    np.testing.assert_array_equal(y.grad.to_numpy(), 0.0)
    np.testing.assert_array_equal(z.grad.to_numpy(), 0.0)
    assert loss.grad[None] == 0.0


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_grad_called_by_hand_in_reverse_order(arch):
    x, y, z, loss, k_a, k_b, k_c, k_loss = _chain()
    k_a()
    k_b(0.7)
    k_c()
    k_loss()
    loss.grad[None] = 1.0
    k_loss.grad()
    np.testing.assert_allclose(z.grad.to_numpy(), np.arange(N) + 1.0 + np.eye(N)[0] * 0.5)
    assert loss.grad[None] == 0.0
    k_c.grad()
    np.testing.assert_allclose(z.grad.to_numpy(), np.arange(N) + 1.0 + np.eye(N)[0] * 0.5)  # kept
    k_b.grad(0.7)
    np.testing.assert_array_equal(z.grad.to_numpy(), 0.0)
    np.testing.assert_array_equal(y.grad.to_numpy(), 0.0)
    k_a.grad()                                # y.grad is already consumed: adds nothing
    _close(x.grad.to_numpy(), _chain_grad(0.7))
    # calling a grad again without a new seed adds nothing either
    k_loss.grad()
    k_b.grad(0.7)
    _close(x.grad.to_numpy(), _chain_grad(0.7))


# -- SPIRAD_AD_OVERWRITTEN_READS=warn: Quadrants' behaviour for reads spirad cannot prove safe --

@test_archs(archs=EVERY_ARCH)
def test_overwritten_reads_warn_switch(arch, monkeypatch):
    """Each thread (r, b) walks its own span of elements (`start[r]`..`start[r + 1]`, data
    spirad cannot see through): it writes `p[j, b]`, then reads it back into a mass-weighted sum
    (Genesis' centre-of-mass walk). Another thread could write `p[j, b]` as far as the compiler
    can prove, so reverse mode refuses it by default; with SPIRAD_AD_OVERWRITTEN_READS=warn it
    warns and differentiates the program as it stands, which is right here (the spans are
    disjoint): d out / d m against float64 central differences."""
    start = sd.field(sd.i32, shape=3)
    x = sd.field(sd.f64, shape=(N, 2))
    m = sd.field(sd.f64, shape=N, needs_grad=True)
    p = sd.field(sd.f64, shape=(N, 2))
    out = sd.field(sd.f64, shape=(2, 2), needs_grad=True)
    start.from_numpy(np.array([0, 2, N], np.int32))

    @sd.kernel
    def walk():
        for r, b in sd.ndrange(2, 2):
            for j in range(start[r], start[r + 1]):
                p[j, b] = sd.sin(x[j, b])
            out[r, b] = 0.0
            for j in range(start[r], start[r + 1]):
                out[r, b] = out[r, b] + m[j] * p[j, b]

    xs = np.stack([XS, XS[::-1]], 1)

    def ref(ms):
        s = ms[:, None] * np.sin(xs)
        return np.stack([s[:2].sum(0), s[2:].sum(0)])

    x.from_numpy(xs)
    m.from_numpy(WS)
    walk()
    _close(out.to_numpy(), ref(WS))
    w = np.array([[1.0, 0.5], [2.0, -1.0]])
    out.grad.from_numpy(w)
    with pytest.raises(sd.SpiradAutodiffError, match="reads 'p' and also overwrites it"):
        walk.grad()
    monkeypatch.setenv("SPIRAD_AD_OVERWRITTEN_READS", "warn")
    with pytest.warns(sd.SpiradWarning, match="differentiated as it is"):
        walk.grad()
    _close(m.grad.to_numpy(), central_diff(ref, WS, w))
