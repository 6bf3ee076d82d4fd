"""Gradient test programs used by more than one test module: written once, each with its float64
reference, so the suites that check one property of it (overflow reporting, SPMD lanes, heap
growth, the GPU sizer) run the same kernel.

`overflowing` carries one value through a run-time trip count: its adstack needs n + 2 entries,
so a small `ad_stack_size` overflows on purpose (architecture §4 "Overflow"), and a larger n grows
the adstack heaps (tests/gpu_llvm)."""
import numpy as np

import spirad as sd


@sd.kernel
def overflowing(x: sd.template(), y: sd.template(), n: sd.i32):
    for i in x:
        carried = x[i]
        for j in range(n):
            carried = sd.sin(carried) * 0.9 + 0.1
        y[i] = carried


def overflowing_grad(x, n):
    """d y / d x of `overflowing` for n trips, analytic, in float64 (x a scalar or an array)."""
    v, g = np.asarray(x, np.float64), np.ones_like(np.asarray(x, np.float64))
    for _ in range(n):
        g, v = g * np.cos(v) * 0.9, np.sin(v) * 0.9 + 0.1
    return g


@sd.kernel
def per_element_trips(x: sd.types.ndarray(), steps: sd.types.ndarray(), out: sd.types.ndarray()):
    """Each element its own trip count, read from an ndarray: the stack's size is a maximum over
    data, so it is measured (by the GPU sizer on the SPIR-V archs, per lane on the CPU)."""
    for i in x:
        v = x[i]
        for j in range(steps[i]):
            v = sd.sin(v) * 0.9 + 0.1
        out[i] = v


def per_element_trips_grad(xs, steps):
    """d out / d x of `per_element_trips` in float64: the product of 0.9 cos(v) over the trips."""
    v, d = np.asarray(xs).astype(np.float64), np.ones(len(xs))
    for j in range(int(steps.max(initial=0))):
        m = steps > j
        d = np.where(m, d * 0.9 * np.cos(v), d)
        v = np.where(m, np.sin(v) * 0.9 + 0.1, v)
    return d


def guarded_fields(m, x0=0.5):
    """(before, x, y, after): `overflowing`'s f64 fields of m elements (x filled with x0, both with
    gradients) allocated between two guards filled with 3.0 and 4.0, so a write past the adstack
    heap or a neighbour's slice shows (check with `assert_guards_intact`)."""
    before = sd.field(sd.f64, shape=m)
    x = sd.field(sd.f64, shape=m, needs_grad=True)
    y = sd.field(sd.f64, shape=m, needs_grad=True)
    after = sd.field(sd.f64, shape=m)
    before.fill(3.0)
    after.fill(4.0)
    x.fill(x0)
    return before, x, y, after


def assert_guards_intact(before, after):
    np.testing.assert_array_equal(before.to_numpy(), 3.0)
    np.testing.assert_array_equal(after.to_numpy(), 4.0)


@sd.func
def coupled_steps(x0, n):
    """Kernel b of the SPMD benchmark's body: four locals coupled through n trips of a loop (four
    adstacks that read each other), summed."""
    a = x0
    b = a * 0.5
    c = 1.0 - a
    d = a * a
    for s in range(n):
        a = a + 0.1 * sd.sin(b) * c
        b = b - 0.1 * sd.sin(a) * d
        c = c + 0.1 * sd.cos(d)
        d = d - 0.1 * sd.sin(c)
    return a + b + c + d


def coupled_steps_ref(x, n):
    """`coupled_steps` in float64 numpy for each element of x, with n trips (a scalar, or one per
    element)."""
    x = np.asarray(x, np.float64)
    n = np.broadcast_to(n, x.shape)
    out = np.empty_like(x)
    for k in range(len(x)):
        a, b, c, d = x[k], x[k] * 0.5, 1.0 - x[k], x[k] * x[k]
        for _ in range(n[k]):
            a = a + 0.1 * np.sin(b) * c
            b = b - 0.1 * np.sin(a) * d
            c = c + 0.1 * np.cos(d)
            d = d - 0.1 * np.sin(c)
        out[k] = a + b + c + d
    return out
