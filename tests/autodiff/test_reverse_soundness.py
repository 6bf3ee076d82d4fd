"""The shapes every value-forwarding / recomputing optimization of reverse mode must leave right
(DESIGN §4, issue #35): locals assigned before a `break` / `continue` and read after it, after
the loop, or by a store a later trip overwrites; loads in a loop's head (before its exit checks)
used past them; `while` on a counter and on data; jumps in nested loops; integer locals made
selects; conditions and index expressions recomputed in the reverse walk; reads of fields the
kernel never writes; products with a constant zero; inlined funcs inside loops with jumps.

Each kernel runs against a float64 numpy reference (central differences) with the fully stored
adjoint and with the checkpointed one (`init(ad_stack_memory=1)`: every dynamic loop that stores
a stacked local replayed in segments), on every arch.
"""
import numpy as np
import pytest

import spirad as sd
from tests.autodiff.gradutil import Case, run_case
from tests.support.archs import test_archs

ND = sd.types.ndarray()
N = 7  # trips of the run-time loops (an i32 argument)


# -- 1. a local assigned before a `break`, read by a store a later trip overwrites ---------------
@sd.kernel
def k_break_store(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        for j in range(n):
            w = v
            if j >= 4:
                break
            v = v + 0.163
            y[i] = sd.sin(w)             # the last store (j = 3) wins


def r_break_store(x, n):
    out = np.zeros_like(x)
    for p in range(len(x)):
        v = x[p]
        for j in range(n):
            w = v
            if j >= 4:
                break
            v = v + 0.163
            out[p] = np.sin(w)
    return [out]


# -- 2. a local computed before a `continue` -------------------------------------------------------
@sd.kernel
def k_continue_local(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = 0.5
        u = x[i]
        for j in range(n):
            t = 0.613 * v
            if j % 2 == 1:
                continue
            v = t
            v = v + u
        y[i] = v


def r_continue_local(x, n):
    out = np.zeros_like(x)
    for p in range(len(x)):
        v, u = 0.5, x[p]
        for j in range(n):
            t = 0.613 * v
            if j % 2 == 1:
                continue
            v = t
            v = v + u
        out[p] = v
    return [out]


# -- 3. a `while` on a counter: a load in the loop's head used after its exit check ---------------
@sd.kernel
def k_while_head(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        j = 0
        while j < n:
            w = v
            v = sd.sin(v) * 1.1 + 0.2
            y[i] = w * w + v           # overwritten every trip
            j += 1


def r_while_head(x, n):
    out = np.zeros_like(x)
    for p in range(len(x)):
        v, j = x[p], 0
        while j < n:
            w = v
            v = np.sin(v) * 1.1 + 0.2
            out[p] = w * w + v
            j += 1
    return [out]


# -- 4. `break` in an inner loop, `continue` in the outer one, locals crossing both ----------------
@sd.kernel
def k_nested_jumps(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        acc = 0.0
        for j in range(n):
            a = v * 0.7
            if j % 3 == 2:
                continue
            for q in range(n):
                b = a
                if q >= j:
                    break
                a = sd.tanh(a + 0.1 * q)
                acc += b * v
            v = a + 0.05
        y[i] = acc + v


def r_nested_jumps(x, n):
    out = np.zeros_like(x)
    for p in range(len(x)):
        v, acc = x[p], 0.0
        for j in range(n):
            a = v * 0.7
            if j % 3 == 2:
                continue
            for q in range(n):
                b = a
                if q >= j:
                    break
                a = np.tanh(a + 0.1 * q)
                acc += b * v
            v = a + 0.05
        out[p] = acc + v
    return [out]


# -- 5. a `break` on data (far from its threshold), the breaking trip's local read after the loop -
@sd.kernel
def k_break_data(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        last = 0.0
        for j in range(n):
            last = v
            if x[i] * (j + 1) > 1.5:
                break
            v = sd.cos(v) + 0.3 * x[i]
        y[i] = last * v


def r_break_data(x, n):
    out = np.zeros_like(x)
    for p in range(len(x)):
        v, last = x[p], 0.0
        for j in range(n):
            last = v
            if x[p] * (j + 1) > 1.5:
                break
            v = np.cos(v) + 0.3 * x[p]
        out[p] = last * v
    return [out]


# -- 6. an integer local made a select (forward_stores), indexing a read-only array in the loop ----
@sd.kernel
def k_select_index(x: ND, y: ND, n: sd.i32, c: ND):
    for i in x:
        v = x[i]
        for j in range(n):
            k = j
            if k >= 3:
                k = k - 3
            if j == 5:
                continue
            v = sd.sin(v * c[k]) + x[k]
        y[i] = v


C = np.array([0.9, 1.1, 0.8, 1.2, 1.0])


def r_select_index(x, n, c):
    out = np.zeros_like(x)
    for p in range(len(x)):
        v = x[p]
        for j in range(n):
            k = j if j < 3 else j - 3
            if j == 5:
                continue
            v = np.sin(v * c[k]) + x[k]
        out[p] = v
    return [out]


# -- 7. conditions over loop indices and reads of never-written data, recomputed in reverse -------
@sd.kernel
def k_recomputed(x: ND, y: ND, n: sd.i32, c: ND):
    for i in x:
        v = x[i]
        for j in range(n):
            m = c[(i + j) % 5] * 2.0       # a never-written array: recomputed, not stacked
            if (i + j) % 2 == 0:
                v = v * m
                if v > 100.0:              # never true here: a condition on data
                    break
            else:
                v = sd.sin(v) + m * 0.1
        y[i] = v


def r_recomputed(x, n, c):
    out = np.zeros_like(x)
    for p in range(len(x)):
        v = x[p]
        for j in range(n):
            m = c[(p + j) % 5] * 2.0
            if (p + j) % 2 == 0:
                v = v * m
                if v > 100.0:
                    break
            else:
                v = np.sin(v) + m * 0.1
        out[p] = v
    return [out]


# -- 8. a product with a constant zero beside a live path, in a loop with `continue` ---------------
@sd.kernel
def k_zero_factor(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        dead = 0.0
        for j in range(n):
            dead = sd.exp(v) * 0.0
            if j == 1:
                continue
            v = sd.sin(v) + dead + 0.2
        y[i] = v + dead


def r_zero_factor(x, n):
    out = np.zeros_like(x)
    for p in range(len(x)):
        v = x[p]
        for j in range(n):
            if j == 1:
                continue
            v = np.sin(v) + 0.2
        out[p] = v
    return [out]


# -- 9. an inlined func inside a loop with a jump; a loop-carried local stored after the loop ------
@sd.func
def blend(a, b, t):
    u = a * (1.0 - t)
    return u + b * t


@sd.kernel
def k_func_jump(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        w = 0.3
        for j in range(n):
            w2 = blend(v, w, 0.25)
            if j == n - 2:
                break
            w = v
            v = sd.sin(w2) + 0.1
        v = v * 2.0 + w                  # stored after the loop
        y[i] = v


def r_func_jump(x, n):
    out = np.zeros_like(x)
    for p in range(len(x)):
        v, w = x[p], 0.3
        for j in range(n):
            w2 = v * 0.75 + w * 0.25
            if j == n - 2:
                break
            w = v
            v = np.sin(w2) + 0.1
        out[p] = v * 2.0 + w
    return [out]


# -- 10. `while True` with the break at the end, nested in a range with a `continue` ---------------
@sd.kernel
def k_while_true(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        t = 0.0
        for j in range(n):
            if j == 2:
                continue
            k = 0
            while True:
                t = v
                v = sd.tanh(v * 1.3) + 0.1 * t
                k += 1
                if k > j or x[i] * k > 2.0:
                    break
            y[i] = v * t
        y[i] += v


def r_while_true(x, n):
    out = np.zeros_like(x)
    for p in range(len(x)):
        v, t = x[p], 0.0
        for j in range(n):
            if j == 2:
                continue
            k = 0
            while True:
                t = v
                v = np.tanh(v * 1.3) + 0.1 * t
                k += 1
                if k > j or x[p] * k > 2.0:
                    break
            out[p] = v * t
        out[p] += v
    return [out]


CASES = {
    "break_store": Case(k_break_store, r_break_store, extra=(N,)),
    "continue_local": Case(k_continue_local, r_continue_local, extra=(N,)),
    "while_head": Case(k_while_head, r_while_head, extra=(N,)),
    "nested_jumps": Case(k_nested_jumps, r_nested_jumps, extra=(N,)),
    "break_data": Case(k_break_data, r_break_data, extra=(N,)),
    "select_index": Case(k_select_index, r_select_index, extra=(N, ("fp", C))),
    "recomputed": Case(k_recomputed, r_recomputed, extra=(N, ("fp", C))),
    "zero_factor": Case(k_zero_factor, r_zero_factor, extra=(N,)),
    "func_jump": Case(k_func_jump, r_func_jump, extra=(N,)),
    "while_true": Case(k_while_true, r_while_true, extra=(N,), accumulated=()),
}


@pytest.mark.parametrize("name", sorted(CASES))
@test_archs(default_fp=sd.f64)
def test_shapes_f64(arch, name, request):
    run_case(CASES[name], "f64", request)


@pytest.mark.parametrize("name", sorted(CASES))
@test_archs()
def test_shapes_f32(arch, name, request):
    run_case(CASES[name], "f32", request)


@pytest.mark.parametrize("name", sorted(CASES))
@test_archs(archs=("cpu", "vulkan"), default_fp=sd.f64, ad_stack_memory=1)
def test_shapes_checkpointed(arch, name, request):
    """The checkpointed adjoint (every stack measured, loops replayed in segments)."""
    run_case(CASES[name], "f64", request)
