"""architecture §4 "Hazards to keep tested": each shape that was silently wrong there, checked
against float64 central differences here.

* a local that a dynamic loop only *reads* receives the adjoint of every iteration;
* a store to a loop-carried local *after* the outermost dynamic loop leaves the reverse pass alone;
* a value recomputed in the reverse pass uses the primal it had *then* (copies, swaps, M @ v);
* trip counts that change between launches (every way a bound can change) give right gradients;
* break / continue in dynamic loops differentiate.
"""
import numpy as np
import pytest

import spirad as sd
from tests.autodiff.gradutil import Case, arr, central_diff, case_tests, check, run_case, weights
from tests.support.archs import EVERY_ARCH, exactly, test_archs

ND = sd.types.ndarray()
X4 = np.array([0.17, 0.35, 0.52, 0.74])


# -- 1. a local the loop only reads ----------------------------------------------------------------


@sd.kernel
def k_readonly(x: ND, y: ND, n: sd.i32):
    for i in x:
        c = x[i] * 2.0                     # never stored in the loop
        acc = 0.0
        for j in range(n):
            acc += sd.sin(c * (j + 1) * 0.3)
        y[i] = acc


def r_readonly(x, n):
    return [sum(np.sin(2 * x * (j + 1) * 0.3) for j in range(n))]


@sd.kernel
def k_readonly_linear(x: ND, y: ND, n: sd.i32):
    for i in x:
        c = x[i] * 2.0
        acc = 1.0
        for j in range(n):
            acc = acc * c + c              # linear in c, read every trip
        y[i] = acc


def r_readonly_linear(x, n):
    c, acc = 2 * x, np.ones_like(x)
    for j in range(n):
        acc = acc * c + c
    return [acc]


@sd.kernel
def k_readonly_nested(x: ND, y: ND, n: sd.i32, m: sd.i32):
    for i in x:
        c = x[i] + 0.5
        v = 0.1
        for j in range(n):
            d = c * 0.5                    # read by the outer loop ...
            for k in range(m):
                v = v * c + d * 0.1        # ... and by every inner trip
        y[i] = v


def r_readonly_nested(x, n, m):
    c, v = x + 0.5, np.full_like(x, 0.1)
    for j in range(n):
        d = c * 0.5
        for k in range(m):
            v = v * c + d * 0.1
    return [v]


@sd.kernel
def k_readonly_global(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = 0.2
        for j in range(n):
            v = v * x[i] + sd.cos(x[i] * j)   # a global read every trip
        y[i] = v


def r_readonly_global(x, n):
    v = np.full_like(x, 0.2)
    for j in range(n):
        v = v * x + np.cos(x * j)
    return [v]


# -- 2. stores after the outermost dynamic loop ----------------------------------------------------


@sd.kernel
def k_store_after(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        for j in range(n):
            v = sd.sin(v) + 0.1
        r = v * 3.0
        v = 5.0                            # overwrite the carried local after the loop
        v = v * r
        y[i] = r + v


def r_store_after(x, n):
    v = x.copy()
    for j in range(n):
        v = np.sin(v) + 0.1
    r = v * 3
    return [r + 5 * r]


@sd.kernel
def k_store_after_nested(x: ND, y: ND, n: sd.i32, m: sd.i32):
    for i in x:
        v = x[i]
        for j in range(n):
            for k in range(m):
                v = sd.sin(v) + 0.1
            v = v * 0.9                    # a store between the inner and the outer loop's end
        y[i] = v
        if x[i] > 0.3:
            v = 0.0                        # a conditional store after the loop
        v = v + 1.0


def r_store_after_nested(x, n, m):
    v = x.copy()
    for j in range(n):
        for k in range(m):
            v = np.sin(v) + 0.1
        v = v * 0.9
    return [v]


# -- 3. recomputation uses the primal it had then --------------------------------------------------


@sd.kernel
def k_copy_then_overwrite(x: ND, y: ND):
    for i in x:
        v = x[i]
        a = v
        v = v * v
        y[i] = sd.sin(a) + v


def r_copy_then_overwrite(x):
    return [np.sin(x) + x * x]


@sd.kernel
def k_copy_in_loop(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        t = v
        for j in range(n):
            t = v
            v = v * v + 0.1
        y[i] = sd.sin(t) + v


def r_copy_in_loop(x, n):
    v = x.copy()
    t = v
    for j in range(n):
        t = v
        v = v * v + 0.1
    return [np.sin(t) + v]


@sd.kernel
def k_swap_loop(x: ND, y: ND, n: sd.i32):
    for i in x:
        a = x[i]
        b = x[i] * 0.5 + 0.2
        for j in range(n):
            a, b = b, a
            a = a * 1.1 + sd.sin(b) * 0.2
        y[i] = a * 2.0 + b * b


def r_swap_loop(x, n):
    a, b = x.copy(), x * 0.5 + 0.2
    for j in range(n):
        a, b = b, a
        a = a * 1.1 + np.sin(b) * 0.2
    return [a * 2 + b * b]


@sd.kernel
def k_tuple_update(x: ND, y: ND, n: sd.i32):
    for i in x:
        a = x[i]
        b = x[i] * 0.5
        for j in range(n):
            a, b = a * b + 0.3, b + sd.sin(a)   # both right-hand sides read the old a and b
        y[i] = a + b


def r_tuple_update(x, n):
    a, b = x.copy(), x * 0.5
    for j in range(n):
        a, b = a * b + 0.3, b + np.sin(a)
    return [a + b]


@sd.kernel
def k_tuple_no_loop(x: ND, y: ND):
    for i in x:
        a = x[i]
        b = x[i] * 0.5
        a, b = a * b, b + a
        y[i] = a + b


def r_tuple_no_loop(x):
    return [x * x * 0.5 + 1.5 * x]


@sd.kernel
def k_matvec(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = sd.Vector([x[i], 1.0 - x[i]])
        M = sd.Matrix([[0.8, -0.3], [0.4, 0.9]])
        for j in range(n):
            v = M @ v
        y[i] = v[0] * v[1]


def r_matvec(x, n):
    M = np.array([[0.8, -0.3], [0.4, 0.9]])
    v = np.stack([x, 1 - x])
    for j in range(n):
        v = M @ v
    return [v[0] * v[1]]


@sd.kernel
def k_store_then_global(x: ND, y: ND):
    for i in x:
        v = x[i]
        v, y[i] = v * 3.0, sd.sin(v)       # y[i] gets sin of the *old* v


def r_store_then_global(x):
    return [np.sin(x)]


# -- 5. break / continue ---------------------------------------------------------------------------


@sd.kernel
def k_break_head(x: ND, y: ND, n: sd.i32, limit: float):
    for i in x:
        v = x[i]
        for j in range(n):
            if v > limit:                  # the exit check comes first in the body
                break
            v = v * 1.2 + 0.03
        y[i] = v


def r_break_head(x, n, limit):
    out = x.copy()
    for i in range(len(x)):
        v = x[i]
        for j in range(n):
            if v > limit:
                break
            v = v * 1.2 + 0.03
        out[i] = v
    return [out]


@sd.kernel
def k_break_nested(x: ND, y: ND, n: sd.i32, m: sd.i32):
    for i in x:
        v = x[i]
        acc = 0.0
        for j in range(n):
            for k in range(m):
                v = sd.sin(v) * 1.3 + 0.02 * j
                if v > 0.9:
                    break                  # leaves the inner loop only
                acc += v * k
            if j == 2:
                continue
            v = v * 0.8
        y[i] = v + acc


def r_break_nested(x, n, m):
    out = x.copy()
    for i in range(len(x)):
        v, acc = x[i], 0.0
        for j in range(n):
            for k in range(m):
                v = np.sin(v) * 1.3 + 0.02 * j
                if v > 0.9:
                    break
                acc += v * k
            if j == 2:
                continue
            v = v * 0.8
        out[i] = v + acc
    return [out]


@sd.kernel
def k_continue_top(x: ND, y: ND, n: sd.i32):
    for i in x:
        if i == 1:
            continue                       # ends this parallel iteration
        v = x[i]
        for j in range(n):
            v = sd.cos(v) + 0.2
        y[i] = v


def r_continue_top(x, n):
    v = x.copy()
    for j in range(n):
        v = np.cos(v) + 0.2
    v[1] = 0.0
    return [v]


CASES = {
    "readonly_local": Case(k_readonly, r_readonly, x=X4, outs=(4,), extra=(5,), interp=True),
    "readonly_local_linear": Case(k_readonly_linear, r_readonly_linear, x=X4, outs=(4,), extra=(4,)),
    "readonly_local_nested": Case(k_readonly_nested, r_readonly_nested, x=X4, outs=(4,), extra=(3, 4),
                                  interp=True),
    "readonly_global": Case(k_readonly_global, r_readonly_global, x=X4, outs=(4,), extra=(5,)),
    "store_after_loop": Case(k_store_after, r_store_after, x=X4, outs=(4,), extra=(4,), interp=True),
    "store_after_nested_loop": Case(k_store_after_nested, r_store_after_nested, x=X4, outs=(4,),
                                    extra=(2, 3), interp=True),
    "copy_then_overwrite": Case(k_copy_then_overwrite, r_copy_then_overwrite, x=X4, outs=(4,),
                                interp=True),
    "copy_in_loop": Case(k_copy_in_loop, r_copy_in_loop, x=X4, outs=(4,), extra=(3,), interp=True),
    "swap_in_loop": Case(k_swap_loop, r_swap_loop, x=X4, outs=(4,), extra=(5,), interp=True),
    "tuple_update_in_loop": Case(k_tuple_update, r_tuple_update, x=X4, outs=(4,), extra=(3,),
                                 interp=True),
    "tuple_update_no_loop": Case(k_tuple_no_loop, r_tuple_no_loop, x=X4, outs=(4,), interp=True),
    "matvec_in_loop": Case(k_matvec, r_matvec, x=X4, outs=(4,), extra=(4,), interp=True),
    "store_then_global_store": Case(k_store_then_global, r_store_then_global, x=X4, outs=(4,)),
    "break_head_check": Case(k_break_head, r_break_head, x=X4, outs=(4,), extra=(10, 0.95),
                             interp=True),
    "break_nested_continue": Case(k_break_nested, r_break_nested, x=X4, outs=(4,), extra=(5, 4),
                                  interp=True),
    "continue_parallel_loop": Case(k_continue_top, r_continue_top, x=X4, outs=(4,), extra=(3,),
                                   unstored=((0, 1),)),
}


test_hazard_f64, test_hazard_f32 = case_tests(CASES)


# -- while loops with break / continue --------------------------------------------------------------


@sd.kernel
def k_while_jumps(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        j = 0
        while True:
            j += 1
            if j > n:
                break
            if j % 2 == 0:
                continue
            v = sd.sin(v) * 1.2 + 0.1
            if v > 1.0:
                break
        y[i] = v


def r_while_jumps(x, n):
    out = x.copy()
    for i in range(len(x)):
        v, j = x[i], 0
        while True:
            j += 1
            if j > n:
                break
            if j % 2 == 0:
                continue
            v = np.sin(v) * 1.2 + 0.1
            if v > 1.0:
                break
        out[i] = v
    return [out]


@pytest.mark.parametrize("n", [0, 3, 9])
@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_while_break_continue(arch, n):
    if arch == "interp" and n != 9:
        pytest.skip("interp: one case")
    run_case(Case(k_while_jumps, r_while_jumps, x=X4, outs=(4,), extra=(n,)), "f64")


# -- 4. trip counts that change between launches ---------------------------------------------------


@sd.kernel
def k_bound_field(x: ND, y: ND, steps: sd.template()):
    for i in x:
        v = x[i]
        for j in range(steps[None]):
            v = v * 0.995 + sd.sin(v) * 0.01
        y[i] = v


@sd.kernel
def k_bound_ndarray(x: ND, y: ND, steps: ND):
    for i in x:
        v = x[i]
        for j in range(steps[i]):
            v = v * 0.995 + sd.sin(v) * 0.01
        y[i] = v


@sd.kernel
def set_field(steps: sd.template(), n: sd.i32):
    steps[None] = n


@sd.kernel
def set_ndarray(steps: ND, n: sd.i32):
    for i in steps:
        steps[i] = n + i


def r_bound(x, trips):
    v = x.copy()
    trips = np.broadcast_to(trips, x.shape)
    for k in range(int(trips.max())):
        nv = v * 0.995 + np.sin(v) * 0.01
        v = np.where(k < trips, nv, v)
    return v


def _grad_check_bound(fp, kernel, steps, trips):
    dt = {"f32": sd.f32, "f64": sd.f64}[fp]
    xs = X4
    x = arr(dt, xs, needs_grad=True)
    y = sd.ndarray(dt, 4, needs_grad=True)
    kernel(x, y, steps)
    w = weights(4)
    y.grad.from_numpy(w.astype(dt.np))
    kernel.grad(x, y, steps)
    xs64 = xs.astype(dt.np).astype(np.float64)
    check(fp, y.to_numpy(), r_bound(xs64, trips), x.grad.to_numpy(),
          central_diff(lambda v: r_bound(v, trips), xs64, w))


def _field_writes(steps):
    """(how, write, trips): every way the bound can change, 16 -> 17 -> 18 -> 64 -> 1000 -> 16."""
    return [
        ("initial from_numpy", lambda: steps.from_numpy(np.array(16, np.int32)), 16),
        ("element x[None] = v", lambda: steps.__setitem__(None, 17), 17),
        ("fill", lambda: steps.fill(18), 18),
        ("from_numpy", lambda: steps.from_numpy(np.array(64, np.int32)), 64),
        ("kernel write", lambda: set_field(steps, 1000), 1000),
        ("element back down", lambda: steps.__setitem__(None, 16), 16),
    ]


@pytest.mark.parametrize("fp", ["f32", "f64"])
@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_trip_count_changes_field(arch, fp):
    steps = sd.field(sd.i32, shape=())
    for how, write, trips in _field_writes(steps):
        write()
        try:
            _grad_check_bound(fp, k_bound_field, steps, trips)
        except AssertionError as e:
            raise AssertionError(f"after {how} (trips={trips}): {e}") from None


@pytest.mark.parametrize("fp", ["f32", "f64"])
@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_trip_count_changes_ndarray(arch, fp):
    steps = sd.ndarray(sd.i32, 4)
    seq = [
        ("from_numpy", lambda: steps.from_numpy(np.array([16, 3, 0, 5], np.int32)), [16, 3, 0, 5]),
        ("element x[i] = v", lambda: steps.__setitem__(1, 17), [16, 17, 0, 5]),
        ("fill", lambda: steps.fill(18), [18] * 4),
        ("from_numpy", lambda: steps.from_numpy(np.array([2, 64, 1, 7], np.int32)), [2, 64, 1, 7]),
        ("kernel write", lambda: set_ndarray(steps, 997), [997, 998, 999, 1000]),
        ("element back down", lambda: (steps.fill(0), steps.__setitem__(2, 16)), [0, 0, 16, 0]),
    ]
    for how, write, trips in seq:
        write()
        try:
            _grad_check_bound(fp, k_bound_ndarray, steps, np.array(trips))
        except AssertionError as e:
            raise AssertionError(f"after {how} (trips={trips}): {e}") from None


@test_archs(archs=exactly("interp"), default_fp=sd.f64)
def test_trip_count_changes_interp(arch):
    steps = sd.field(sd.i32, shape=())
    for n in (3, 4, 9, 2):
        steps[None] = n
        _grad_check_bound("f64", k_bound_field, steps, n)


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_trip_count_changes_between_forward_and_grad_launches(arch):
    """Same kernel, same args, new bound values: each grad launch re-sizes its stacks (no stale
    capacity: a too-small stack would raise an overflow, a stale bound a wrong gradient)."""
    steps = sd.field(sd.i32, shape=())
    for n in (5, 40, 6, 300):
        set_field(steps, n)
        _grad_check_bound("f64", k_bound_field, steps, n)
    sd.sync()


# -- a global read and later overwritten by the same kernel ----------------------------------------


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_global_read_then_overwritten(arch):
    """The adjoint runs after the forward launch overwrote s: differentiating with the new value
    would be silently wrong, so it is a compile error at the read."""
    s = sd.field(sd.f64, shape=4)              # no gradient: read, then overwritten

    @sd.kernel
    def k(x: ND, y: ND):
        for i in x:
            v = s[i]
            s[i] = v * 3.0
            y[i] = x[i] * v

    s.from_numpy(np.array([2.0, 3.0, 4.0, 5.0]))
    x = arr(sd.f64, X4, needs_grad=True)
    y = sd.ndarray(sd.f64, 4, needs_grad=True)
    k(x, y)
    y.grad.fill(1.0)
    with pytest.raises(sd.SpiradAutodiffError, match="overwrites") as e:
        k.grad(x, y)
    assert "v = s[i]" in str(e.value) and "^" in str(e.value)


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_global_overwritten_but_only_used_linearly_is_allowed(arch):
    """In-place linear updates need no old value: allowed, and the gradient is right."""
    s = sd.field(sd.f64, shape=4)

    @sd.kernel
    def k(x: ND, y: ND):
        for i in x:
            s[i] = s[i] * 2.0 + x[i]
            y[i] = x[i] * 3.0

    x = arr(sd.f64, X4, needs_grad=True)
    y = sd.ndarray(sd.f64, 4, needs_grad=True)
    k(x, y)
    y.grad.fill(1.0)
    k.grad(x, y)
    np.testing.assert_allclose(x.grad.to_numpy(), [3.0] * 4)


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_trip_count_from_different_ndarrays_same_generation(arch):
    """Two bound ndarrays written the same number of times (equal write generations): the
    sizing must follow the ndarray actually passed."""
    a = sd.ndarray(sd.i32, 4)
    b = sd.ndarray(sd.i32, 4)
    a.from_numpy(np.array([3, 3, 3, 3], np.int32))
    b.from_numpy(np.array([60, 1, 0, 7], np.int32))
    for steps in (a, b, a, b):
        _grad_check_bound("f64", k_bound_ndarray, steps, steps.to_numpy())


XFAIL_ID_REUSE = ("sizing_cache.TaskSizing.cache_key keys ndarrays by (id(arr), arr.generation): "
                  "a fresh ndarray that CPython places at a freed one's address, with the same "
                  "generation, hits the stale entry (here: capacity 4 for a launch needing 42, an "
                  "overflow error) (reported)")


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_trip_count_from_fresh_ndarrays_in_a_loop(arch, request):
    """Fresh bound ndarrays created (and dropped) in a loop, as user code does: CPython may
    reuse a dropped object's address, which must not revive a stale sizing-cache entry."""
    for n in (2, 40, 2, 90, 3, 70):
        fresh = sd.ndarray(sd.i32, 4)
        fresh.from_numpy(np.full(4, n, np.int32))
        _grad_check_bound("f64", k_bound_ndarray, fresh, np.full(4, n))
        del fresh
