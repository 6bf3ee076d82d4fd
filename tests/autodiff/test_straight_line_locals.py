"""architecture §4: a local goes on an adstack only when it is stored inside a dynamic loop and read
there by something whose derivative needs its value. Straight-line code — locals before, between
and after loops, assigned in `if` branches outside loops, in funcs inlined outside loops, the trip
count of a loop outside every loop — keeps its values in registers: the reverse walk uses the
replay's own value, or a copy taken when the value was read (never the local's later value).

Each kernel is checked against float64 central differences on every arch, and the adjoint's
stacks (`kernel.compile_adjoint(args)`, `kernel_ir.abi.adstack_allocas`) are exactly the ones the
rule asks for: none for straight-line code.
"""
import numpy as np
import pytest

import spirad as sd
from kernel_ir.abi import adstack_allocas
from tests.autodiff.gradutil import FP, Case, X5, extra_args, arr, case_tests

ND = sd.types.ndarray()
X4 = np.array([0.17, 0.35, 0.52, 0.74])


# -- the shape of issue 22: a local in straight-line code ---------------------------------------


@sd.kernel
def k_local(x: ND, y: ND, a: ND, b: ND):
    for i in x:
        t = a[i] * x[i]
        y[i] = sd.sin(t) + b[i]


@sd.kernel
def k_inline(x: ND, y: ND, a: ND, b: ND):
    for i in x:
        y[i] = sd.sin(a[i] * x[i]) + b[i]


A5 = np.array([1.3, -0.7, 2.1, 0.4, 1.9])
B5 = np.array([0.2, 0.1, -0.3, 0.5, 0.0])


def r_local(x, a, b):
    return [np.sin(a * x) + b]


# -- if branches outside loops; reads of values a later store overwrites --------------------------


@sd.kernel
def k_branches(x: ND, y: ND, z: ND):
    for i in x:
        t = 0.0
        if x[i] > 0.4:
            t = sd.sin(x[i]) + 0.2
        else:
            t = x[i] * x[i]
        u = t * t                          # read right after the branches
        if t > 0.3:                        # a condition on the local
            y[i] = sd.exp(u) * t
        else:
            y[i] = sd.cos(t) * u + sd.sin(t * 3.0)  # read inside a branch ...
        t = sd.cos(t) + t * t              # ... then overwritten: the reverse walk reads the old t
        t = t * sd.exp(t * 0.1)
        z[i] = t * u


def r_branches(x):
    t = np.where(x > 0.4, np.sin(x) + 0.2, x * x)
    u = t * t
    y = np.where(t > 0.3, np.exp(u) * t, np.cos(t) * u + np.sin(t * 3.0))
    t2 = np.cos(t) + t * t
    t2 = t2 * np.exp(t2 * 0.1)
    return [y, t2 * u]


# -- locals before, between and after loops --------------------------------------------------------


@sd.kernel
def k_between(x: ND, y: ND, n: sd.i32):
    for i in x:
        c = sd.exp(x[i] * 0.5)             # before: the loop reads it non-linearly
        acc = 0.0
        for j in range(n):
            acc += sd.sin(c * (j + 1) * 0.3)   # acc: stored in the loop, read there linearly
        d = acc * acc + sd.cos(acc)        # between: acc read after its loop
        e = 1.0
        for j in range(n):
            e = e * d * 0.5 + 0.1 * j      # e: carried and read non-linearly -> the one stack
        f = sd.tanh(e * 0.1)               # after
        y[i] = f * d


def r_between(x, n):
    c = np.exp(x * 0.5)
    acc = sum(np.sin(c * (j + 1) * 0.3) for j in range(n)) + 0 * x
    d = acc * acc + np.cos(acc)
    e = np.ones_like(x)
    for j in range(n):
        e = e * d * 0.5 + 0.1 * j
    return [np.tanh(e * 0.1) * d]


# -- locals carried by a loop through a transcendental (bench_autodiff's kernel b) ----------------


@sd.kernel
def k_carried(x: ND, y: ND, n: sd.i32):
    for i in x:
        a = x[i]
        b = a * 0.5
        c = 1.0 - a
        for s in range(n):
            a = a + 0.1 * sd.sin(b) * c    # read right after by sin(a): kept in its slot, not
            b = b - 0.1 * sd.sin(a) * c    # recomputed (passes/forward_stores.COSTLY)
            c = c + 0.1 * sd.cos(a)
        y[i] = a + b + c


def r_carried(x, n):
    a, b, c = x.copy(), x * 0.5, 1.0 - x
    for _ in range(n):
        a = a + 0.1 * np.sin(b) * c
        b = b - 0.1 * np.sin(a) * c
        c = c + 0.1 * np.cos(a)
    return [a + b + c]


# -- a func inlined outside a loop and inside one ---------------------------------------------------


@sd.func
def bump(v):
    w = v * v + 0.1
    return sd.sin(w) * w


@sd.kernel
def k_func(x: ND, y: ND, n: sd.i32):
    for i in x:
        a = bump(x[i])                     # inlined in straight-line code: no stack
        acc = 0.0
        for j in range(n):
            acc += bump(a + x[i] * j * 0.1)    # inlined in a loop: its w is stored there
        y[i] = acc + a


def _bump(v):
    w = v * v + 0.1
    return np.sin(w) * w


def r_func(x, n):
    a = _bump(x)
    return [sum(_bump(a + x * j * 0.1) for j in range(n)) + a]


# -- a func with a guarded neighbour read, inlined in a loop (DiffTaichi's `wave`) -----------------


@sd.func
def at(x, j, n):
    return x[j] if 0 <= j < n else 0.0     # only the chosen side runs: no read of x[-1]


@sd.kernel
def k_stencil(x: ND, y: ND, n: sd.i32):
    for i in x:
        acc = 0.0
        for j in range(n):                 # the func's j, n and its condition: recomputed
            acc += at(x, i + j - 1, x.shape[0]) * (j + 1) + at(x, i - j, x.shape[0]) ** 2
        y[i] = acc * acc


def r_stencil(x, n):
    m = len(x)
    at_ = lambda j: x[j] if 0 <= j < m else 0.0  # noqa: E731
    return [np.array([sum(at_(i + j - 1) * (j + 1) + at_(i - j) ** 2 for j in range(n)) ** 2
                      for i in range(m)])]


# -- indices wrapped by funcs that assign in an `if` (DiffTaichi's `smoke_taichi`) ---------------


@sd.func
def dec_wrap(j, n):
    k = j - 1
    if k < 0:                              # an int slot stored in a branch: after it, a select
        k = n - 1
    return k


@sd.func
def inc_wrap(j, n):
    k = j + 1
    if k >= n:
        k = k - n                          # a branch value made of ops: copied out of the branch
    return k


@sd.kernel
def k_wrapped(x: ND, y: ND, n: sd.i32):
    for i in x:
        m = x.shape[0]
        acc = 0.0
        for j in range(n):                 # the wrapped indices: recomputed, never stacked
            c = (i + j) % m
            acc += x[dec_wrap(c, m)] * x[inc_wrap(c, m)] * (j + 1)
        y[i] = acc


def r_wrapped(x, n):
    m = len(x)
    return [np.array([sum(x[(i + j - 1) % m] * x[(i + j + 1) % m] * (j + 1) for j in range(n))
                      for i in range(m)])]


# -- a cell found from a field the kernel never writes (DiffTaichi's `smoke_taichi` advect) ------


@sd.kernel
def k_depart(x: ND, y: ND, d: sd.template(), n: sd.i32):
    for i in x:
        m = x.shape[0]
        acc = 0.0
        for j in range(n):
            c = i + d[j]                   # d is only read: c and the cells below are recomputed
            k = sd.cast(sd.floor(c), sd.i32)
            w = c - k
            k = k % m
            acc += (1.0 - w) * x[k] * x[k] + w * x[inc_wrap(k, m)]
        y[i] = acc


D3 = np.array([0.3, 1.7, 2.2])


def r_depart(x, d, n):
    m, out = len(x), np.zeros_like(x)
    for i in range(m):
        for j in range(n):
            c = i + d[j]
            k = int(np.floor(c))
            w = c - k
            k %= m
            out[i] += (1.0 - w) * x[k] * x[k] + w * x[(k + 1) % m]
    return [out]


# -- a while loop outside every loop: its trip count is held, no size hint ---------------------------


@sd.kernel
def k_while_top(x: ND, y: ND, n: sd.i32):
    for i in x:
        t = x[i] * 1.5
        acc = 0.0
        k = 0
        while k < n:
            acc = acc * 0.9 + sd.sin(t) * 0.5  # t read non-linearly in the loop, stored before it
            k += 1
        y[i] = sd.exp(acc * 0.1)


def r_while_top(x, n):
    t, acc = x * 1.5, np.zeros_like(x)
    for k in range(n):
        acc = acc * 0.9 + np.sin(t) * 0.5
    return [np.exp(acc * 0.1)]


# -- break / continue: flags and conditions inside the loop stay on stacks, the rest does not ------


@sd.kernel
def k_break(x: ND, y: ND, n: sd.i32):
    for i in x:
        if x[i] < 0.2:
            continue                       # a top-level continue: its flag is straight-line
        t = sd.sin(x[i]) * 2.0
        acc = 0.0
        for j in range(n):
            if j * 0.25 > t:
                break
            acc += t * j
        y[i] = sd.sqrt(acc + 1.0)


def r_break(x, n):
    out = np.zeros_like(x)
    for q in range(len(x)):
        if x[q] < 0.2:
            continue
        t = np.sin(x[q]) * 2.0
        acc = 0.0
        for j in range(n):
            if j * 0.25 > t:
                break
            acc += t * j
        out[q] = np.sqrt(acc + 1.0)
    return [out]


CASES = {
    "issue_local": Case(k_local, r_local, extra=(("fp", A5), ("fp", B5))),
    "issue_inline": Case(k_inline, r_local, extra=(("fp", A5), ("fp", B5))),
    "branches": Case(k_branches, r_branches, outs=(5, 5)),
    "between_loops": Case(k_between, r_between, extra=(4,)),
    "func_inlined": Case(k_func, r_func, extra=(3,)),
    "carried_sin": Case(k_carried, r_carried, extra=(4,)),
    "stencil_func": Case(k_stencil, r_stencil, extra=(3,)),
    "wrapped_index": Case(k_wrapped, r_wrapped, extra=(3,)),
    "departure": Case(k_depart, r_depart, extra=(("field_fp", D3), 3)),
    "while_top": Case(k_while_top, r_while_top, extra=(5,)),
    "while_top_zero": Case(k_while_top, r_while_top, extra=(0,)),
    "break_continue": Case(k_break, r_break, extra=(9,), x=np.array([0.1, 0.3, 0.5, 0.9]),
                           outs=(4,), unstored=((0, 0),)),
}

# the stacks each adjoint may allocate (everything else is straight-line code)
STACKS = {
    "issue_local": [], "issue_inline": [], "branches": [], "between_loops": ["e"],
    "carried_sin": ["a", "b", "c"],    # one stack each, no snapshots: a value with sin is not
                                       # forwarded into the next statement (recomputed per trip)
    "func_inlined": ["v"],             # bump's parameter (read from x), inlined in the loop;
                                       # its local w is forwarded (passes/forward_stores)
    "stencil_func": ["if_value"],      # at's parameters and condition are recomputed; the
                                       # value read under the condition feeds `** 2`: kept
    "wrapped_index": [],                # the funcs' if-assigned slots: selects, recomputed
    "departure": [],                    # reads of a field the kernel never writes: recomputed
    "while_top": [], "while_top_zero": [],
    "break_continue": [],              # the break is a head exit check; trips are held
}


test_straight_line_f64, test_straight_line_f32 = case_tests(CASES, interp_subset=False)


def _stack_names(case: Case):
    dt = FP["f32"]
    x = arr(dt, case.x, needs_grad=True)
    outs = [sd.ndarray(dt, s, needs_grad=True) for s in case.outs]
    extra, _ = extra_args(case.extra, dt)
    g = case.kernel.compile_adjoint((x, *outs, *extra))
    return sorted(a.arg.name for t in g.tl.tasks for a in adstack_allocas(t))


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_adstack_for_straight_line_locals(name):
    sd.init(arch="cpu")
    assert _stack_names(CASES[name]) == STACKS[name]


def test_issue_example_compiles_to_the_inline_form():
    """With and without the local: no stack, so the launch sizes nothing and binds no heap."""
    sd.init(arch="cpu")
    dt = sd.f32
    x, y = arr(dt, X5, needs_grad=True), sd.ndarray(dt, 5, needs_grad=True)
    a, b = arr(dt, A5), arr(dt, B5)
    for k in (k_local, k_inline):
        g = k.compile_adjoint((x, y, a, b))
        assert g.sizing is None
