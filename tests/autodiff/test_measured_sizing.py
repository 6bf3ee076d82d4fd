"""architecture §4 "Sizing": a stack whose capacity has no size expression — a data-dependent `while`,
a `break` the grammar cannot bound, a bound outside the grammar — is *measured* at launch: a
counting pass replays the forward body, counts the pushes per thread (per lane on the CPU's SPMD
path) and max-reduces them on the device; the heap is sized from that. No hint is needed, the
result is cached by write generations, and `default_ad_stack_size` stays an optional fixed size.

Newton's method, a bisection search and `while` loops with `break` on data, against float64
central differences on every arch.
"""
import numpy as np
import pytest

import spirad as sd
from kernel_ir.abi import adstack_allocas
from spirad.runtime import sizing_cache
from tests.autodiff.gradutil import Case, X5, arr, case_tests
from tests.support.archs import EVERY_ARCH, exactly, test_archs

ND = sd.types.ndarray()


# -- Newton's method: the cube root of a = 4x + 1 ---------------------------------------------------


@sd.kernel
def k_newton(x: ND, y: ND):
    for i in x:
        a = x[i] * 4.0 + 1.0
        r = a
        fr = r * r * r - a
        k = 0
        while abs(fr) > 1e-6 * a and k < 40:
            r = r - fr / (3.0 * r * r)
            fr = r * r * r - a
            k += 1
        y[i] = r


def r_newton(x):
    out = np.zeros_like(x)
    for q in range(len(x)):
        a = x[q] * 4.0 + 1.0
        r = a
        fr = r ** 3 - a
        k = 0
        while abs(fr) > 1e-6 * a and k < 40:
            r = r - fr / (3.0 * r * r)
            fr = r ** 3 - a
            k += 1
        out[q] = r
    return [out]


# -- bisection: lo, hi bracket sqrt(c / x); the decisions and the trip count follow the data --------


@sd.kernel
def k_bisect(x: ND, y: ND, c: ND):
    for i in x:
        lo = 0.0
        hi = 2.0 + x[i]
        while hi - lo > 0.01:
            mid = 0.5 * (lo + hi)
            if mid * mid * x[i] > c[i]:
                hi = mid
            else:
                lo = mid
        y[i] = sd.sin(lo * x[i]) + hi


C5 = np.array([0.05, 0.2, 0.33, 0.61, 1.07])


def r_bisect(x, c):
    out = np.zeros_like(x)
    for q in range(len(x)):
        lo, hi = 0.0, 2.0 + x[q]
        while hi - lo > 0.01:
            mid = 0.5 * (lo + hi)
            if mid * mid * x[q] > c[q]:
                hi = mid
            else:
                lo = mid
        out[q] = np.sin(lo * x[q]) + hi
    return [out]


# -- while True with a break on accumulated data ----------------------------------------------------


@sd.kernel
def k_break(x: ND, y: ND, lim: ND):
    for i in x:
        v = x[i]
        acc = 0.0
        k = 0
        while True:
            v = sd.sin(v) * 1.3 + 0.2
            acc += v * v
            k += 1
            if acc > lim[i] or k >= 30:
                break
        y[i] = acc + v * k


L5 = np.array([0.3, 1.1, 2.5, 4.7, 9.2])


def r_break(x, lim):
    out = np.zeros_like(x)
    for q in range(len(x)):
        v, acc, k = x[q], 0.0, 0
        while True:
            v = np.sin(v) * 1.3 + 0.2
            acc += v * v
            k += 1
            if acc > lim[q] or k >= 30:
                break
        out[q] = acc + v * k
    return [out]


# -- a data-dependent while nested in a range loop; two tasks with measured stacks ----------------


@sd.kernel
def k_nested(x: ND, y: ND, z: ND, n: sd.i32):
    for i in x:
        v = x[i]
        for j in range(n):
            w = v + 0.05 * j
            while w < 2.0:
                w = w * 1.5 + 0.1
            v = sd.sin(w) * 0.5 + v * 0.5
        y[i] = v
    for i in x:
        u = x[i] * 0.5
        m = 0
        while u < 1.0 + x[i] and m < 50:
            u = u * 1.2 + sd.sin(u) * 0.1
            m += 1
        z[i] = u * u


def r_nested(x, n):
    y, z = np.zeros_like(x), np.zeros_like(x)
    for q in range(len(x)):
        v = x[q]
        for j in range(n):
            w = v + 0.05 * j
            while w < 2.0:
                w = w * 1.5 + 0.1
            v = np.sin(w) * 0.5 + v * 0.5
        y[q] = v
        u, m = x[q] * 0.5, 0
        while u < 1.0 + x[q] and m < 50:
            u = u * 1.2 + np.sin(u) * 0.1
            m += 1
        z[q] = u * u
    return [y, z]


CASES = {
    "newton": Case(k_newton, r_newton, interp=True),
    "bisection": Case(k_bisect, r_bisect, extra=(("fp", C5),), interp=True),
    "while_break": Case(k_break, r_break, extra=(("fp", L5),), interp=True),
    "nested_two_tasks": Case(k_nested, r_nested, outs=(5, 5), extra=(3,)),
}


test_measured_f64, test_measured_f32 = case_tests(CASES)


def test_measured_stacks_have_no_size_expression():
    sd.init(arch="cpu")
    x, y = arr(sd.f32, X5, needs_grad=True), sd.ndarray(sd.f32, 5, needs_grad=True)
    g = k_newton.compile_adjoint((x, y))
    stacks = [a for t in g.tl.tasks for a in adstack_allocas(t)]
    assert stacks and all(a.arg.measured >= 0 and a.arg.capacity is None for a in stacks)
    assert g.sizing.counting is not None and g.sizing.counting.n == len(stacks)


# -- sizes: exact per thread, cached while nothing the counting pass reads changes -----------------


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_counting_is_cached_by_write_generations(arch):
    xs = X5.copy()
    x, y = arr(sd.f64, xs, needs_grad=True), sd.ndarray(sd.f64, 5, needs_grad=True)
    lim = arr(sd.f64, L5)
    k_break(x, y, lim)
    sizing_cache.stats.reset()
    y.grad.fill(1.0)
    k_break.grad(x, y, lim)
    assert sizing_cache.stats.counting_passes == 1
    caps = k_break.compile_adjoint((x, y, lim)).sizing.tasks[0].sized.caps
    for _ in range(2):  # unchanged inputs: no counting pass
        y.grad.fill(1.0)
        k_break.grad(x, y, lim)
    assert sizing_cache.stats.counting_passes == 1
    lim.from_numpy(L5 * 2.5)  # a host write to what the loop reads: counted again, more trips
    k_break(x, y, lim)
    y.grad.fill(1.0)
    x.grad.fill(0.0)
    k_break.grad(x, y, lim)
    assert sizing_cache.stats.counting_passes == 2
    more = k_break.compile_adjoint((x, y, lim)).sizing.tasks[0].sized.caps
    assert max(more) > max(caps)
    want = _grad_fd(lambda v: r_break(v, L5 * 2.5)[0], xs)
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-6, atol=1e-8)


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_counting_follows_fields_and_kernel_writes(arch):
    """A field read by the loop, changed by `x[i] = v` and by another kernel: recounted."""
    x = sd.field(sd.f64, shape=4, needs_grad=True)
    y = sd.field(sd.f64, shape=4, needs_grad=True)
    lim = sd.field(sd.f64, shape=4)

    @sd.kernel
    def k():
        for i in x:
            v = x[i]
            acc = 0.0
            while acc < lim[i]:
                v = sd.sin(v) * 1.1 + 0.3
                acc += v * v
            y[i] = acc * v

    @sd.kernel
    def raise_lim(s: sd.f64):
        for i in lim:
            lim[i] = lim[i] * s

    xs = np.array([0.2, 0.4, 0.6, 0.8])
    x.from_numpy(xs)
    lims = np.array([0.5, 1.3, 2.2, 3.1])
    lim.from_numpy(lims)

    def grad():
        k()
        y.grad.fill(1.0)
        x.grad.fill(0.0)
        k.grad()
        return x.grad.to_numpy()

    sizing_cache.stats.reset()
    grad()
    grad()
    assert sizing_cache.stats.counting_passes == 1
    lim[0] = 4.0  # element assignment
    lims[0] = 4.0
    g = grad()
    assert sizing_cache.stats.counting_passes == 2
    raise_lim(1.7)  # a kernel write
    lims *= 1.7
    g = grad()
    assert sizing_cache.stats.counting_passes == 3

    def ref(xv):
        out = np.zeros_like(xv)
        for q in range(len(xv)):
            v, acc = xv[q], 0.0
            while acc < lims[q]:
                v = np.sin(v) * 1.1 + 0.3
                acc += v * v
            out[q] = acc * v
        return out
    np.testing.assert_allclose(g, _grad_fd(ref, xs), rtol=1e-6, atol=1e-8)


def _grad_fd(ref, xs, eps=1e-6):
    """d sum(ref(x)) / dx by float64 central differences."""
    out = np.zeros_like(xs)
    for q in range(len(xs)):
        e = np.zeros_like(xs)
        e[q] = eps
        out[q] = (np.sum(ref(xs + e)) - np.sum(ref(xs - e))) / (2 * eps)
    return out


@test_archs(archs=exactly("cpu"), default_fp=sd.f64, default_ad_stack_size=64)
def test_default_ad_stack_size_is_a_fixed_size(arch):
    """With default_ad_stack_size the stacks without an expression get that size and no
    counting pass runs (an overflow would be reported: test_diagnostics)."""
    x, y = arr(sd.f64, X5, needs_grad=True), sd.ndarray(sd.f64, 5, needs_grad=True)
    k_newton(x, y)
    sizing_cache.stats.reset()
    y.grad.fill(1.0)
    k_newton.grad(x, y)
    assert sizing_cache.stats.counting_passes == 0
    g = k_newton.compile_adjoint((x, y))
    assert g.sizing.counting is None
    assert set(g.sizing.tasks[0].sized.caps) == {64}
    np.testing.assert_allclose(x.grad.to_numpy(), _grad_fd(lambda v: r_newton(v)[0], X5),
                               rtol=1e-6)


def test_debug_output_names_measured_stacks(capfd, monkeypatch):
    monkeypatch.setenv("SPIRAD_DEBUG_ADSTACK", "1")
    sd.init(arch="cpu", default_fp=sd.f64)
    try:
        x, y = arr(sd.f64, X5, needs_grad=True), sd.ndarray(sd.f64, 5, needs_grad=True)
        k_newton(x, y)
        y.grad.fill(1.0)
        k_newton.grad(x, y)
        err = capfd.readouterr().err
        assert "measured by the counting pass" in err and "sizes [" in err
    finally:
        monkeypatch.delenv("SPIRAD_DEBUG_ADSTACK")
        sd.init(arch="cpu")


# -- a while that does not end: init(max_while_iterations=N) ----------------------------------------


@sd.kernel
def k_capped(x: ND, y: ND, n: ND):
    for i in x:
        v = x[i]
        j = 0
        while j < n[i]:
            v = sd.sin(v) + 0.1
            j += 1
        y[i] = v


@test_archs(archs=EVERY_ARCH, max_while_iterations=10)
def test_while_iteration_cap(arch):
    """N iterations run; N + 1 stop the loop and raise at the next sync, naming the line; the
    cap adds no autodiff stack and the runtime keeps working."""
    x, y = arr(sd.f32, X5[:4], needs_grad=True), sd.ndarray(sd.f32, 4, needs_grad=True)
    n = arr(sd.i32, np.array([3, 10, 0, 7]))
    k_capped(x, y, n)
    y.grad.fill(1.0)
    k_capped.grad(x, y, n)
    sd.sync()
    stacks = [a.arg.name for t in k_capped.compile_adjoint((x, y, n)).tl.tasks
              for a in adstack_allocas(t)]
    assert stacks == ["v"]
    n.from_numpy(np.array([3, 11, 0, 7], np.int32))
    k_capped(x, y, n)
    with pytest.raises(sd.SpiradDeviceError, match="ran more than 10 iterations") as e:
        sd.sync()
    assert "while j < n[i]:" in str(e.value) and "^" in str(e.value)
    n.from_numpy(np.array([3, 4, 0, 7], np.int32))
    k_capped(x, y, n)
    sd.sync()
