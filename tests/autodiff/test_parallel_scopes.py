"""The global-access diagnostics of reverse mode follow which loops are parallel
(docs/parallel_loops.md):

* the cross-iteration read-after-write error fires only across iterations of a parallel loop —
  a serial recurrence inside `for _ in range(1):`, sibling serial loops, and reads of cells no
  iteration writes (directly or through a @func's parameters) compile and differentiate;
* the overwritten-read error fires only when a write to the element read can execute after the
  read — writes that all precede it, or that a serial loop provably sends elsewhere later, are
  fine; each refusal has a legal twin here.

Every gradient is checked against float64 central differences. Each output element is stored
once, so the results do not depend on whether a store's adjoint zeroes `a.grad[I]`.
"""
import numpy as np
import pytest

import spirad as sd
from tests.autodiff.gradutil import central_diff, weights
from tests.autodiff.test_diagnostics import assert_quotes
from tests.support.archs import EVERY_ARCH, exactly, test_archs

N = 6
X0 = 0.83


def _check_scalar_x(kernel, x, out, ref):
    """Run `kernel` forward (x = X0) and backward with loss sum(w * out); compare out with
    `ref(X0)` and x.grad with float64 central differences of that loss."""
    x[None] = X0
    kernel()
    np.testing.assert_allclose(out.to_numpy(), ref(X0), rtol=1e-12)
    w = weights(out.shape, seed=5)
    out.grad.from_numpy(w)
    kernel.grad()
    want = central_diff(lambda v: ref(float(v)), np.array(X0), w)
    assert x.grad[None] == pytest.approx(float(want), rel=1e-6)


# -- 1. a serial recurrence inside `for _ in range(1):` ---------------------------------------------


@sd.func
def power_chain(x: sd.template(), out: sd.template()):
    out[0] = x[None]
    for i in range(1, N):
        out[i] = out[i - 1] * x[None]      # non-linear in the value read


@pytest.mark.parametrize("form", ["add", "mul", "mul_in_func"])
@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_serial_recurrence_in_one_iteration_loop(arch, form):
    x = sd.field(sd.f64, shape=(), needs_grad=True)
    out = sd.field(sd.f64, shape=N, needs_grad=True)

    @sd.kernel
    def k_add():
        for _ in range(1):
            for i in range(N):
                if i == 0:
                    out[i] = x[None]
                else:
                    out[i] = out[i - 1] + x[None]

    @sd.kernel
    def k_mul():
        for _ in range(1):
            out[0] = x[None]
            for i in range(1, N):
                out[i] = out[i - 1] * x[None]

    @sd.kernel
    def k_mul_in_func():
        for _ in range(1):
            power_chain(x, out)

    k = {"add": k_add, "mul": k_mul, "mul_in_func": k_mul_in_func}[form]
    if form == "add":
        def ref(v):
            return v * np.arange(1, N + 1)
    else:
        def ref(v):
            return v ** np.arange(1, N + 1)
    _check_scalar_x(k, x, out, ref)


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_serial_recurrence_per_parallel_slice(arch):
    """Several parallel iterations, each with its own row: no pair of iterations shares an
    element, so the recurrence along the row is a serial one."""
    B = 3
    x = sd.field(sd.f64, shape=B, needs_grad=True)
    out = sd.field(sd.f64, shape=(B, N), needs_grad=True)

    @sd.kernel
    def k():
        for b in range(B):
            out[b, 0] = x[b]
            for j in range(1, N):
                out[b, j] = sd.sin(out[b, j - 1]) * x[b]

    def ref(v):
        o = np.zeros((B, N))
        o[:, 0] = v
        for j in range(1, N):
            o[:, j] = np.sin(o[:, j - 1]) * v
        return o

    xs = np.array([0.3, 0.6, 0.9])
    x.from_numpy(xs)
    k()
    np.testing.assert_allclose(out.to_numpy(), ref(xs), rtol=1e-12)
    w = weights((B, N), seed=2)
    out.grad.from_numpy(w)
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), central_diff(ref, xs, w), rtol=1e-6)


# -- 2. sibling serial loops: the second reads what the first wrote --------------------------------


@pytest.mark.parametrize("parallel_rows", [False, True], ids=["one_iteration", "rows"])
@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_sibling_serial_loops(arch, parallel_rows):
    B = 2 if parallel_rows else 1
    x = sd.field(sd.f64, shape=(B, N), needs_grad=True)
    a = sd.field(sd.f64, shape=(B, N), needs_grad=True)
    b = sd.field(sd.f64, shape=(B, N), needs_grad=True)

    @sd.kernel
    def k():
        for r in range(B):
            for j in range(N):
                a[r, j] = sd.sin(x[r, j])
            for j in range(N):
                b[r, j] = a[r, j] ** 2     # reads a value the sibling loop wrote

    xs = np.linspace(0.2, 1.3, B * N).reshape(B, N)
    x.from_numpy(xs)
    k()
    np.testing.assert_allclose(b.to_numpy(), np.sin(xs) ** 2, rtol=1e-12)
    w = weights((B, N), seed=4)
    b.grad.from_numpy(w)
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), central_diff(lambda v: np.sin(v) ** 2, xs, w),
                               rtol=1e-6)


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_sibling_loops_brief_shape(arch):
    """The shape of issue #9, literally: `for _ in range(1):` around two sibling loops."""
    x = sd.field(sd.f64, shape=N, needs_grad=True)
    a = sd.field(sd.f64, shape=N, needs_grad=True)
    b = sd.field(sd.f64, shape=N, needs_grad=True)

    @sd.kernel
    def k(n: sd.i32):
        for _ in range(1):
            for j in range(n):
                a[j] = sd.sin(x[j])
            for j in range(n):
                b[j] = a[j] ** 2

    xs = np.linspace(0.1, 1.1, N)
    x.from_numpy(xs)
    k(N)
    w = weights(N, seed=6)
    b.grad.from_numpy(w)
    k.grad(N)
    np.testing.assert_allclose(x.grad.to_numpy(), central_diff(lambda v: np.sin(v) ** 2, xs, w),
                               rtol=1e-6)


# -- 3. reads of cells no iteration writes ---------------------------------------------------------


@sd.func
def from_fixed(x: sd.template(), out: sd.template(), i, src):
    out[i] = out[src] * x[None]            # both indices are func parameters (local slots)


@sd.func
def from_fixed_add(x: sd.template(), out: sd.template(), i):
    out[i] = out[4] + x[None]


@pytest.mark.parametrize("form", ["direct", "func_index", "func_both", "direct_mul"])
@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_read_of_a_cell_no_iteration_writes(arch, form):
    x = sd.field(sd.f64, shape=(), needs_grad=True)
    out = sd.field(sd.f64, shape=5, needs_grad=True)

    @sd.kernel
    def k_direct():
        for i in range(4):
            out[i] = out[4] + x[None]

    @sd.kernel
    def k_direct_mul():
        for i in range(4):
            out[i] = out[4] * x[None]

    @sd.kernel
    def k_func_index():
        for i in range(4):
            from_fixed_add(x, out, i)

    @sd.kernel
    def k_func_both():
        for i in range(4):
            from_fixed(x, out, i, 4)

    k = {"direct": k_direct, "direct_mul": k_direct_mul, "func_index": k_func_index,
         "func_both": k_func_both}[form]
    mul = form in ("direct_mul", "func_both")
    c = 1.7

    def ref(v):
        o = np.full(5, c)
        o[:4] = c * v if mul else c + v
        return o

    x[None] = X0
    out.fill(0.0)
    out[4] = c
    k()
    np.testing.assert_allclose(out.to_numpy(), ref(X0), rtol=1e-12)
    w = weights(5, seed=1)
    w[4] = 0.0                             # out[4] is an input: no loss on it
    out.grad.from_numpy(w)
    k.grad()
    want = central_diff(lambda v: ref(float(v)), np.array(X0), w)
    assert x.grad[None] == pytest.approx(float(want), rel=1e-6)
    np.testing.assert_allclose(out.grad[4], np.sum(w[:4] * (X0 if mul else 1.0)), rtol=1e-12)


# -- 4. the seed's shapes still raise at the parallel level ----------------------------------------


@sd.func
def seed_body(x: sd.template(), out: sd.template(), n):
    for i in range(n):                     # at the kernel's top scope: the parallel loop
        if i == 0:
            out[i] = x[None]
        else:
            out[i] = out[i - 1] + x[None]


@sd.func
def seed_body_field_bound(x: sd.template(), out: sd.template(), n_iter: sd.template()):
    for i in range(n_iter[None]):
        out[i] = x[None]


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_seed_shape_through_func_is_a_parallel_raw(arch):
    x = sd.field(sd.f64, shape=(), needs_grad=True)
    out = sd.field(sd.f64, shape=N, needs_grad=True)

    @sd.kernel
    def fwd(n: sd.i32):
        seed_body(x, out, n)

    with pytest.raises(sd.SpiradAutodiffError) as e:
        fwd.grad(N)
    assert_quotes(e.value, seed_body, "out[i] = out[i - 1] + x[None]", "another iteration",
                  at="out[i - 1]")


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_seed_shape_with_field_bound_runs_and_differentiates(arch):
    """The seed's TL;DR bound is a field value: the parallel loop's range is read when the loop
    starts (issue #13), forward and adjoint alike."""
    x = sd.field(sd.f64, shape=(), needs_grad=True)
    out = sd.field(sd.f64, shape=N, needs_grad=True)
    n_iter = sd.field(sd.i32, shape=())

    @sd.kernel
    def fwd():
        seed_body_field_bound(x, out, n_iter)

    x[None] = 0.75
    n_iter[None] = N - 2
    fwd()
    np.testing.assert_array_equal(out.to_numpy(), [0.75] * (N - 2) + [0.0] * 2)
    w = weights(N, seed=3)
    out.grad.from_numpy(w)
    fwd.grad()
    assert x.grad[None] == pytest.approx(float(np.sum(w[:N - 2])), rel=1e-12)


@sd.func
def in_place(x: sd.template(), out: sd.template(), i):
    out[i] = out[i] + x[i] * x[i]


@sd.func
def sibling(x: sd.template(), other: sd.template(), i):
    other[i, 1] = x[i] * 3.0
    other[i, 0] = other[i, 1] * 2.0


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_exemptions_through_funcs(arch):
    x = sd.field(sd.f64, shape=N, needs_grad=True)
    out = sd.field(sd.f64, shape=N, needs_grad=True)
    other = sd.field(sd.f64, shape=(N, 2), needs_grad=True)

    @sd.kernel
    def k():
        for i in range(N):
            in_place(x, out, i)
            sibling(x, other, i)

    xs = np.linspace(0.2, 0.7, N)
    x.from_numpy(xs)
    out.fill(1.0)
    k()
    np.testing.assert_allclose(out.to_numpy(), xs * xs + 1.0, rtol=1e-12)
    np.testing.assert_allclose(other.to_numpy(), np.stack([6 * xs, 3 * xs], 1), rtol=1e-12)
    w1, w2 = weights(N, seed=7), weights((N, 2), seed=8)
    out.grad.from_numpy(w1)
    other.grad.from_numpy(w2)
    k.grad()
    want = central_diff(lambda v: v * v, xs, w1) + central_diff(lambda v: np.stack([6 * v, 3 * v], 1), xs, w2)
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-6)


# -- 5. overwritten reads: refused only when the value really is overwritten -----------------------


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_read_after_own_write_in_the_same_iteration(arch):
    """`s[i]` written, then read (non-linearly) by the same iteration: nothing overwrites it later."""
    x = sd.field(sd.f64, shape=N, needs_grad=True)
    s = sd.field(sd.f64, shape=N, needs_grad=True)
    y = sd.field(sd.f64, shape=N, needs_grad=True)

    @sd.kernel
    def k():
        for i in range(N):
            s[i] = x[i] * 2.0
            y[i] = s[i] * s[i] * x[i]

    xs = np.linspace(0.3, 0.9, N)
    x.from_numpy(xs)
    k()
    np.testing.assert_allclose(y.to_numpy(), 4 * xs ** 3, rtol=1e-12)
    w = weights(N, seed=9)
    y.grad.from_numpy(w)
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), 12 * xs ** 2 * w, rtol=1e-12)


def _overwrite_kernels(x, out, a, b):
    @sd.kernel
    def next_cell():                       # reads out[i + 1], which iteration i + 1 rewrites
        for _ in range(1):
            for i in range(N - 1):
                out[i] = out[i + 1] * x[None]

    @sd.kernel
    def outer_loop():                      # a second pass rewrites what the first one read
        for _ in range(1):
            for t in range(2):
                for i in range(1, N):
                    out[i] = out[i - 1] * x[None]

    @sd.kernel
    def sibling_after():                   # the sibling loop overwrites what was read
        for _ in range(1):
            for j in range(N):
                b[j] = a[j] ** 2
            for j in range(N):
                a[j] = sd.sin(x[None])

    @sd.kernel
    def same_cell():                       # read, then overwritten by the same statement
        for _ in range(1):
            for i in range(N):
                out[i] = out[i] * x[None]
    return {"next_cell": (next_cell, "out[i] = out[i + 1] * x[None]", "out[i + 1]"),
            "outer_loop": (outer_loop, "out[i] = out[i - 1] * x[None]", "out[i - 1]"),
            "sibling_after": (sibling_after, "b[j] = a[j] ** 2", "a[j]"),
            "same_cell": (same_cell, "out[i] = out[i] * x[None]", "out[i] *")}


@pytest.mark.parametrize("name", ["next_cell", "outer_loop", "sibling_after", "same_cell"])
@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_overwritten_reads_are_refused(arch, name):
    x = sd.field(sd.f64, shape=(), needs_grad=True)
    out = sd.field(sd.f64, shape=N, needs_grad=True)
    a = sd.field(sd.f64, shape=N, needs_grad=True)
    b = sd.field(sd.f64, shape=N, needs_grad=True)
    k, line, at = _overwrite_kernels(x, out, a, b)[name]
    k()                                    # the forward kernel is fine
    with pytest.raises(sd.SpiradAutodiffError) as e:
        k.grad()
    assert_quotes(e.value, k.fn, line, "overwrites", at=at)


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_later_write_to_another_row_is_allowed(arch):
    """`pos[t + 1, i] = f(pos[t, i])` in a serial loop over t: every later write lands on a later
    row than the one read (the twin of `outer_loop` above, which rewrites the rows it read)."""
    T = 4
    pos = sd.field(sd.f64, shape=(T + 1, N), needs_grad=True)

    @sd.kernel
    def k():
        for i in range(N):
            for t in range(T):
                pos[t + 1, i] = sd.sin(pos[t, i]) * 1.1

    def ref(p0):
        v = [p0]
        for _ in range(T):
            v.append(np.sin(v[-1]) * 1.1)
        return np.stack(v)

    xs = np.linspace(0.2, 1.0, N)
    pos.from_numpy(np.concatenate([xs[None], np.zeros((T, N))]))
    k()
    np.testing.assert_allclose(pos.to_numpy(), ref(xs), rtol=1e-12)
    w = np.zeros((T + 1, N))
    w[T] = weights(N, seed=3)
    pos.grad.from_numpy(w)
    k.grad()
    np.testing.assert_allclose(pos.grad.to_numpy()[0], central_diff(ref, xs, w), rtol=1e-6)


# -- 6. dynamic nesting with the adstack disabled: the func's loop is the parallel loop -----------


@sd.func
def smooth_all(x: sd.template(), y: sd.template(), n):
    for i in x:                            # the kernel's outermost scope: the parallel loop
        v = x[i]
        for j in range(n):                 # dynamic, nested in it
            v = sd.sin(v) * 0.9
        y[i] = v


@sd.kernel
def k_smooth(x: sd.template(), y: sd.template(), n: sd.i32):
    smooth_all(x, y, n)


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64,
            ad_stack_experimental_enabled=False)
def test_dynamic_nesting_in_a_top_level_func_without_adstack(arch):
    x = sd.field(sd.f64, shape=4, needs_grad=True)
    y = sd.field(sd.f64, shape=4, needs_grad=True)
    k_smooth(x, y, 3)
    assert [t.kind for t in k_smooth.compile((x, y, 3)).tl.tasks] == ["range"]
    y.grad.fill(1.0)
    with pytest.raises(sd.SpiradAutodiffError) as e:
        k_smooth.grad(x, y, 3)
    assert_quotes(e.value, smooth_all, "for j in range(n):", "ad_stack_experimental_enabled")


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_dynamic_nesting_in_a_top_level_func_with_adstack(arch):
    x = sd.field(sd.f64, shape=4, needs_grad=True)
    y = sd.field(sd.f64, shape=4, needs_grad=True)
    xs = np.array([0.1, 0.3, 0.5, 0.7])
    x.from_numpy(xs)
    k_smooth(x, y, 3)

    def ref(v):
        for _ in range(3):
            v = np.sin(v) * 0.9
        return v
    np.testing.assert_allclose(y.to_numpy(), ref(xs), rtol=1e-12)
    w = weights(4, seed=11)
    y.grad.from_numpy(w)
    k_smooth.grad(x, y, 3)
    np.testing.assert_allclose(x.grad.to_numpy(), central_diff(ref, xs, w), rtol=1e-6)
