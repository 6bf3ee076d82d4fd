"""Reverse-mode diagnostics (architecture §4 "Diagnostics", seed 004): compile errors raised by
`kernel.grad` that quote the user's source line with a caret, each with positive and negative
cases. Negative cases also check that the gradient is right."""
import numpy as np
import pytest

import spirad as sd
from tests.autodiff.gradutil import central_diff
from tests.support.archs import EVERY_ARCH, exactly, test_archs
from tests.support.source_quotes import assert_quotes


# -- 1. a dynamic range nested in a loop, with the adstack disabled --------------------------------

NOSTACK = dict(default_fp=sd.f64, ad_stack_experimental_enabled=False)


@sd.func
def inner_dynamic(v, n):
    for j in range(n):
        v = sd.sin(v) * 0.9
    return v


@sd.func
def inner_static(v):
    for j in sd.static(range(3)):
        v = sd.sin(v) * 0.9
    return v


@sd.kernel
def nest_inline(x: sd.template(), y: sd.template(), n: sd.i32):
    for i in x:
        v = x[i]
        for j in range(n):
            v = sd.sin(v) * 0.9
        y[i] = v


@sd.kernel
def nest_in_func(x: sd.template(), y: sd.template(), n: sd.i32):
    for i in x:
        y[i] = inner_dynamic(x[i], n)


@sd.kernel
def nest_while(x: sd.template(), y: sd.template(), n: sd.i32):
    for i in x:
        v = x[i]
        j = 0
        while j < n:
            v = sd.sin(v) * 0.9
            j += 1
        y[i] = v


@sd.kernel
def nest_static(x: sd.template(), y: sd.template(), n: sd.i32):
    for i in x:
        v = x[i]
        for j in sd.static(range(3)):
            v = sd.sin(v) * 0.9
        y[i] = inner_static(v)


def _xy():
    x = sd.field(sd.f64, shape=4, needs_grad=True)
    y = sd.field(sd.f64, shape=4, needs_grad=True)
    x.from_numpy(np.array([0.1, 0.3, 0.5, 0.7]))
    return x, y


@pytest.mark.parametrize("kernel, fn, line", [
    (nest_inline, nest_inline, "for j in range(n):"),
    (nest_in_func, inner_dynamic, "for j in range(n):"),     # the call boundary cannot hide it
    (nest_while, nest_while, "while j < n:"),
], ids=["inline", "in_func", "while"])
@test_archs(archs=exactly("interp") | EVERY_ARCH, **NOSTACK)
def test_dynamic_nesting_without_adstack_is_an_error(arch, kernel, fn, line):
    x, y = _xy()
    kernel(x, y, 3)                                # the forward kernel is fine
    y.grad.fill(1.0)
    with pytest.raises(sd.SpiradAutodiffError) as e:
        kernel.grad(x, y, 3)
    assert_quotes(e.value, fn, line, "ad_stack_experimental_enabled", "static")


@test_archs(archs=exactly("interp") | EVERY_ARCH, **NOSTACK)
def test_static_ranges_without_adstack_are_allowed(arch):
    x, y = _xy()
    nest_static(x, y, 3)
    y.grad.fill(1.0)
    nest_static.grad(x, y, 3)

    def ref(v):
        for _ in range(6):
            v = np.sin(v) * 0.9
        return v
    xs = np.array([0.1, 0.3, 0.5, 0.7])
    np.testing.assert_allclose(y.to_numpy(), ref(xs), rtol=1e-12)
    np.testing.assert_allclose(x.grad.to_numpy(), central_diff(ref, xs, 1.0), rtol=1e-6)


@test_archs(archs=exactly("cpu"), **NOSTACK)
def test_dynamic_parallel_loop_without_adstack_is_allowed(arch):
    """Only *nested* dynamic loops need the adstack: the parallel loop's bound may be dynamic."""
    y = sd.field(sd.f64, shape=8, needs_grad=True)
    x = sd.field(sd.f64, shape=8, needs_grad=True)

    @sd.kernel
    def k(n: sd.i32):
        for i in range(n):
            y[i] = sd.sin(x[i])

    x.fill(0.4)
    k(5)
    y.grad.fill(1.0)
    k.grad(5)
    np.testing.assert_allclose(x.grad.to_numpy(), [np.cos(0.4)] * 5 + [0.0] * 3, rtol=1e-12)


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_dynamic_nesting_with_adstack_is_allowed(arch):
    x, y = _xy()
    for k in (nest_inline, nest_in_func):
        x.grad.fill(0.0)
        k(x, y, 3)
        y.grad.fill(1.0)
        k.grad(x, y, 3)
        xs = np.array([0.1, 0.3, 0.5, 0.7])

        def ref(v):
            for _ in range(3):
                v = np.sin(v) * 0.9
            return v
        np.testing.assert_allclose(x.grad.to_numpy(), central_diff(ref, xs, 1.0), rtol=1e-6)


# -- 2. cross-iteration read-after-write of a needs_grad global in the parallel loop ---------------

N = 6
XS = np.linspace(0.2, 0.7, N)


@sd.kernel
def raw_prev(x: sd.template(), out: sd.template()):
    for i in range(1, N):
        out[i] = out[i - 1] + x[i]


@sd.kernel
def raw_prev_scalar(x: sd.template(), out: sd.template()):
    for i in range(1, N):
        out[i] = out[i - 1] + x[0]


@sd.kernel
def raw_next(x: sd.template(), out: sd.template()):
    for i in range(N - 1):
        out[i] = out[i + 1] * x[i]


@sd.func
def chain(x: sd.template(), out: sd.template(), i):
    out[i] = out[i - 1] + x[i]


@sd.kernel
def raw_in_func(x: sd.template(), out: sd.template()):
    for i in range(1, N):
        chain(x, out, i)


@sd.kernel
def raw_constant_slot(x: sd.template(), out: sd.template()):
    for i in range(N):
        out[i] = out[0] * x[i]                 # out[0] is written by iteration 0


@pytest.mark.parametrize("kernel, fn, line", [
    (raw_prev, raw_prev, "out[i] = out[i - 1] + x[i]"),
    (raw_prev_scalar, raw_prev_scalar, "out[i] = out[i - 1] + x[0]"),
    (raw_next, raw_next, "out[i] = out[i + 1] * x[i]"),
    (raw_in_func, chain, "out[i] = out[i - 1] + x[i]"),
    (raw_constant_slot, raw_constant_slot, "out[i] = out[0] * x[i]"),
], ids=["prev", "prev_scalar", "next", "in_func", "constant_slot"])
@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_cross_iteration_raw_is_an_error(arch, kernel, fn, line):
    x = sd.field(sd.f64, shape=N, needs_grad=True)
    out = sd.field(sd.f64, shape=N, needs_grad=True)
    with pytest.raises(sd.SpiradAutodiffError) as e:
        kernel.grad(x, out)
    assert_quotes(e.value, fn, line, "another iteration", at=line.split(" = ")[1])


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_cross_iteration_raw_other_axis_is_an_error(arch):
    x = sd.field(sd.f64, shape=N, needs_grad=True)
    out = sd.field(sd.f64, shape=(N, 2), needs_grad=True)

    @sd.kernel
    def k():
        for i in range(1, N):
            out[i, 1] = x[i]
            out[i, 0] = out[i - 1, 1] * 2.0     # a sibling component of *another* iteration

    with pytest.raises(sd.SpiradAutodiffError) as e:
        k.grad()
    assert_quotes(e.value, k.fn, "out[i, 0] = out[i - 1, 1] * 2.0", "another iteration",
                  at="out[i - 1, 1]")


@pytest.mark.parametrize("slot", ["below", "above"])
@test_archs(archs=exactly("cpu"), default_fp=sd.f64)
def test_read_of_a_slot_the_loop_never_writes_is_allowed(arch, slot):
    x = sd.field(sd.f64, shape=N + 1, needs_grad=True)
    out = sd.field(sd.f64, shape=N + 1, needs_grad=True)

    @sd.kernel
    def k_below():
        for i in range(1, N + 1):
            out[i] = out[0] * x[i]              # out[0] is never written by the loop

    @sd.kernel
    def k_above():
        for i in range(N):
            out[i] = out[N] * x[i]              # nor is out[N]

    k = k_below if slot == "below" else k_above
    fixed = 0 if slot == "below" else N
    xs = np.linspace(0.2, 0.9, N + 1)
    x.from_numpy(xs)
    out.fill(0.0)
    out[fixed] = 1.5
    k()
    out.grad.fill(1.0)
    k.grad()
    want = np.full(N + 1, 1.5)
    want[fixed] = 0.0
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("form", ["ndrange", "struct_for"])
@test_archs(archs=exactly("cpu"), default_fp=sd.f64)
def test_cross_iteration_raw_multidim_parallel_loop_is_an_error(arch, form):
    x = sd.field(sd.f64, shape=(), needs_grad=True)
    out = sd.field(sd.f64, shape=(2, 4), needs_grad=True)

    @sd.kernel
    def k_ndrange():
        for a, b in sd.ndrange(2, 4):
            if b > 0:
                out[a, b] = out[a, b - 1] + x[None]

    @sd.kernel
    def k_struct():
        for a, b in out:
            if b > 0:
                out[a, b] = out[a, b - 1] + x[None]

    k = k_ndrange if form == "ndrange" else k_struct
    with pytest.raises(sd.SpiradAutodiffError) as e:
        k.grad()
    assert_quotes(e.value, k.fn, "out[a, b] = out[a, b - 1] + x[None]", "another iteration",
                  at="out[a, b - 1]")


@test_archs(archs=exactly("cpu"), default_fp=sd.f64)
def test_cross_iteration_raw_ndarray(arch):
    @sd.kernel
    def k(x: sd.types.ndarray(), out: sd.types.ndarray()):
        for i in range(1, N):
            out[i] = out[i - 1] + x[i]

    x = sd.ndarray(sd.f64, N, needs_grad=True)
    out = sd.ndarray(sd.f64, N, needs_grad=True)
    with pytest.raises(sd.SpiradAutodiffError) as e:
        k.grad(x, out)
    assert_quotes(e.value, k.fn, "out[i] = out[i - 1] + x[i]", "another iteration", at="out[i - 1]")
    # without a gradient on `out` the recurrence has nothing to chain: allowed
    out2 = sd.ndarray(sd.f64, N)
    k.grad(x, out2)


@sd.kernel
def ok_in_place(x: sd.template(), out: sd.template(), other: sd.template(), c: sd.template()):
    for i in range(N):
        out[i] = out[i] + x[i] * x[i]          # in place: the same element


@sd.kernel
def ok_sibling(x: sd.template(), out: sd.template(), other: sd.template(), c: sd.template()):
    for i in range(N):
        out2d_1 = x[i] * 3.0
        other[i, 1] = out2d_1
        other[i, 0] = other[i, 1] * 2.0        # a sibling component of the same iteration


@sd.kernel
def ok_other_grad_field(x: sd.template(), out: sd.template(), other: sd.template(), c: sd.template()):
    for i in range(1, N):
        out[i] = x[i - 1] * x[i]               # reading another needs_grad field at i - 1


@sd.kernel
def ok_non_grad_field(x: sd.template(), out: sd.template(), other: sd.template(), c: sd.template()):
    for i in range(1, N):
        out[i] = c[i - 1] * x[i]               # a field without gradient, read at i - 1
        # (writing c[i] here as well would make the read racy in the forward pass, and the
        # adjoint would see the overwritten values: test_hazards covers that diagnostic)


def _ok_refs():
    cs = np.arange(N) * 2.0
    return {
        "in_place": (ok_in_place, lambda v: v * v + 1.0, "out"),
        "sibling": (ok_sibling, lambda v: np.stack([6 * v, 3 * v], 1), "other"),
        "other_grad_field": (ok_other_grad_field, lambda v: np.concatenate([[1.0], v[:-1] * v[1:]]), "out"),
        "non_grad_field": (ok_non_grad_field, lambda v: np.concatenate([[1.0], cs[:-1] * v[1:]]), "out"),
    }


@pytest.mark.parametrize("name", ["in_place", "sibling", "other_grad_field", "non_grad_field"])
@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_cross_iteration_allowed_shapes(arch, name):
    kernel, ref, which = _ok_refs()[name]
    x = sd.field(sd.f64, shape=N, needs_grad=True)
    out = sd.field(sd.f64, shape=N, needs_grad=True)
    other = sd.field(sd.f64, shape=(N, 2), needs_grad=True)
    c = sd.field(sd.f64, shape=N)
    x.from_numpy(XS)
    out.fill(1.0)
    c.from_numpy(np.arange(N) * 2.0)           # the values iteration i writes: no race on them
    kernel(x, out, other, c)
    res = {"out": out, "other": other}[which]
    np.testing.assert_allclose(res.to_numpy(), ref(XS), rtol=1e-12)
    w = np.random.default_rng(3).uniform(0.5, 1.5, res.shape)
    res.grad.from_numpy(w)
    kernel.grad(x, out, other, c)
    np.testing.assert_allclose(x.grad.to_numpy(), central_diff(ref, XS, w), rtol=1e-6, atol=1e-9)


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_recurrence_in_serial_inner_loop_is_allowed(arch):
    B, M = 3, 5
    x = sd.field(sd.f64, shape=B, needs_grad=True)
    out = sd.field(sd.f64, shape=(B, M), needs_grad=True)

    @sd.kernel
    def k():
        for b in range(B):
            out[b, 0] = x[b]
            for j in range(1, M):
                out[b, j] = out[b, j - 1] * 0.5 + x[b]

    xs = np.array([0.3, 0.6, 0.9])

    def ref(v):
        o = np.zeros((B, M))
        o[:, 0] = v
        for j in range(1, M):
            o[:, j] = o[:, j - 1] * 0.5 + v
        return o

    x.from_numpy(xs)
    k()
    np.testing.assert_allclose(out.to_numpy(), ref(xs), rtol=1e-12)
    out.grad.fill(1.0)
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), central_diff(ref, xs, np.ones((B, M))), rtol=1e-6)


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_time_axis_offset_is_allowed(arch):
    T = 3
    pos = sd.field(sd.f64, shape=(T + 1, N), needs_grad=True)

    @sd.kernel
    def step(t: sd.i32):
        for i in range(N):
            pos[t + 1, i] = sd.sin(pos[t, i]) + 0.1

    pos.from_numpy(np.concatenate([XS[None], np.zeros((T, N))]))
    for t in range(T):
        step(t)
    pos.grad.fill(0.0)
    pos.grad.from_numpy(np.concatenate([np.zeros((T, N)), np.ones((1, N))]))
    for t in reversed(range(T)):
        step.grad(t)
    g = np.ones(N)
    v = [XS]
    for t in range(T):
        v.append(np.sin(v[-1]) + 0.1)
    for t in reversed(range(T)):
        g = g * np.cos(v[t])
    np.testing.assert_allclose(pos.grad.to_numpy()[0], g, rtol=1e-12)


# -- 3. a loop bound read from a field the same kernel writes --------------------------------------


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_bound_written_by_same_kernel_is_an_error(arch):
    x, y = _xy()
    steps = sd.field(sd.i32, shape=())

    @sd.kernel
    def k(n: sd.i32):
        steps[None] = n
        for i in x:
            v = x[i]
            for j in range(steps[None]):
                v = sd.sin(v)
            y[i] = v

    k(3)
    y.grad.fill(1.0)
    with pytest.raises(sd.SpiradAutodiffError) as e:
        k.grad(3)
    assert_quotes(e.value, k.fn, "for j in range(steps[None]):", "the same kernel writes")


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_bound_written_by_another_kernel_is_allowed(arch):
    x, y = _xy()
    steps = sd.field(sd.i32, shape=())

    @sd.kernel
    def set_steps(n: sd.i32):
        steps[None] = n

    @sd.kernel
    def k():
        for i in x:
            v = x[i]
            for j in range(steps[None]):
                v = sd.sin(v)
            y[i] = v

    set_steps(3)
    k()
    y.grad.fill(1.0)
    k.grad()
    xs = np.array([0.1, 0.3, 0.5, 0.7])
    np.testing.assert_allclose(x.grad.to_numpy(), np.cos(xs) * np.cos(np.sin(xs)) * np.cos(np.sin(np.sin(xs))),
                               rtol=1e-12)


# -- 4. while loops: measured at launch, or a fixed default_ad_stack_size ---------------------------


@sd.kernel
def k_while(x: sd.template(), y: sd.template(), n: sd.i32):
    for i in x:
        v = x[i]
        j = 0
        while j < n:
            v = sd.sin(v) + 0.05
            j += 1
        y[i] = v


def _check_while_grad():
    """k_while's gradient for 3 trips against central differences (the stacks sized either way)."""
    x, y = _xy()
    k_while(x, y, 3)
    y.grad.fill(1.0)
    k_while.grad(x, y, 3)
    xs = np.array([0.1, 0.3, 0.5, 0.7])

    def ref(v):
        for _ in range(3):
            v = np.sin(v) + 0.05
        return v
    np.testing.assert_allclose(x.grad.to_numpy(), central_diff(ref, xs, 1.0), rtol=1e-6)


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_while_without_default_size_is_measured(arch):
    """No size expression: the counting pass sizes the stacks (no hint, no error)."""
    _check_while_grad()


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64, default_ad_stack_size=16)
def test_while_with_default_size_works(arch):
    _check_while_grad()


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64, default_ad_stack_size=4)
def test_while_beyond_default_size_overflows(arch):
    """default_ad_stack_size is a capacity, not a promise: more trips raise an overflow."""
    x, y = _xy()
    k_while(x, y, 10)
    y.grad.fill(1.0)
    with pytest.raises(sd.SpiradAdStackOverflow, match="holds 4 entries"):
        k_while.grad(x, y, 10)  # the CPU: raised by the launch; a GPU: by the sync
        sd.sync()


@test_archs(archs=exactly("cpu"), default_fp=sd.f64)
def test_unboundable_range_is_measured(arch):
    """A range bound outside the sizer grammar is measured by the counting pass (never a
    silent default)."""
    x, y = _xy()

    @sd.kernel
    def k(n: sd.i32):
        for i in x:
            v = x[i]
            for j in range(n % 5):
                v = sd.sin(v)
            y[i] = v

    k(8)
    y.grad.fill(1.0)
    k.grad(8)
    xs = np.array([0.1, 0.3, 0.5, 0.7])

    def ref(v):
        for _ in range(3):
            v = np.sin(v)
        return v
    np.testing.assert_allclose(x.grad.to_numpy(), central_diff(ref, xs, 1.0), rtol=1e-6)


# -- an ndarray's gradient read or written in a differentiated kernel (Taichi refuses it too) -----

@sd.kernel
def sum_grads(x: sd.types.ndarray(), b: sd.types.ndarray()):
    for i in x:
        b[None] += x.grad[i]


@sd.kernel
def clear_then_sum(x: sd.types.ndarray(), b: sd.types.ndarray()):
    for i in x:
        x.grad[i] = 0.0
        b[None] += x[i]


@sd.kernel
def weighted(g: sd.types.ndarray(), c: sd.types.ndarray(), b: sd.types.ndarray()):
    for i in c:
        b[None] += g[i] * c[i] * c[i]


@test_archs()
def test_ndarray_gradient_in_differentiated_kernel_is_an_error(arch):
    """Reading `x.grad` runs (the forward launch sees the values), but differentiating it is
    refused at the adjoint's compile: the adjoint adds into those gradients while it replays the
    kernel (Taichi 1.7.4: a RuntimeError at the same point). Writing one is refused too."""
    n = 10
    a = sd.ndarray(sd.f32, shape=n, needs_grad=True)
    b = sd.ndarray(sd.f32, shape=(), needs_grad=True)
    a.grad.fill(2.0)
    sum_grads(a, b)
    assert b[None] == n * 2.0
    with pytest.raises(sd.SpiradAutodiffError) as e:
        sum_grads.grad(a, b)
    assert_quotes(e.value, sum_grads, "b[None] += x.grad[i]", "reads 'x.grad'",
                  "argument of its own")
    with pytest.raises(sd.SpiradAutodiffError) as e:
        with sd.ad.Tape(loss=b):
            sum_grads(a, b)
    assert "reads 'x.grad'" in str(e.value)
    a.fill(1.0)
    clear_then_sum(a, b)
    np.testing.assert_array_equal(a.grad.to_numpy(), 0.0)
    with pytest.raises(sd.SpiradAutodiffError) as e:
        clear_then_sum.grad(a, b)
    assert_quotes(e.value, clear_then_sum, "x.grad[i] = 0.0", "writes 'x.grad'")


@test_archs()
def test_ndarray_gradient_passed_as_its_own_argument_is_a_constant(arch):
    """The way out the message names: `k(a.grad, ...)` makes the gradient an ndarray of its own
    (without a gradient): d b / d c_i = 2 g_i c_i, with g read as a constant."""
    n = 5
    a = sd.ndarray(sd.f32, shape=n, needs_grad=True)
    c = sd.ndarray(sd.f32, shape=n, needs_grad=True)
    b = sd.ndarray(sd.f32, shape=(), needs_grad=True)
    g = np.arange(1, n + 1, dtype=np.float32)
    cs = np.linspace(-1, 1, n).astype(np.float32)
    a.grad.from_numpy(g)
    c.from_numpy(cs)
    weighted(a.grad, c, b)
    assert b[None] == pytest.approx(float((g * cs * cs).sum()), rel=1e-6)
    b.grad.fill(1.0)
    weighted.grad(a.grad, c, b)
    np.testing.assert_allclose(c.grad.to_numpy(), 2 * g * cs, rtol=1e-6)
    np.testing.assert_array_equal(a.grad.to_numpy(), g)  # a constant: unchanged
