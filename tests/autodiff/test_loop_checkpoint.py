"""architecture §4 "Bounded memory" inside a kernel: when a launch's adstack heap would pass
`init(ad_stack_memory=N)`, the launch runs the checkpointed adjoint (passes/autodiff/
loop_checkpoint.py: the loop state stored every S trips, each segment replayed in the reverse
pass). The gradients equal those of the fully stored adjoint (same arithmetic), on every arch, and
match float64 central differences; the heap is smaller.
"""
import numpy as np
import pytest

import spirad as sd
from spirad.runtime import launch, sizing_cache
from spirad.runtime import state as _state
from tests.support.archs import EVERY_ARCH, exactly, test_archs

ND = sd.types.ndarray()


@sd.kernel
def k_long(x: ND, y: ND, n: sd.i32):
    """A per-thread loop of n trips carrying two locals, an `if` and a nested loop."""
    for i in x:
        v = x[i]
        w = 0.5 * x[i]
        acc = 0.0
        for j in range(n):
            if j % 3 == 1:
                v = sd.sin(v) * 0.9 + 0.1 * w
            else:
                v = v * 0.97 + sd.cos(w) * 0.02
            for q in range(2):
                w = sd.tanh(w + v * 0.1) + 0.01 * q
            acc += v * w
        y[i] = acc + v


def r_long(x, n):
    out = np.zeros_like(x)
    for p in range(len(x)):
        v, w, acc = x[p], 0.5 * x[p], 0.0
        for j in range(n):
            if j % 3 == 1:
                v = np.sin(v) * 0.9 + 0.1 * w
            else:
                v = v * 0.97 + np.cos(w) * 0.02
            for q in range(2):
                w = np.tanh(w + v * 0.1) + 0.01 * q
            acc += v * w
        out[p] = acc + v
    return out


@sd.kernel
def k_while(x: ND, y: ND, lim: ND):
    """A data-dependent while with a break: the trip count is measured, then checkpointed."""
    for i in x:
        v = x[i]
        acc = 0.0
        k = 0
        while acc < lim[i]:
            v = sd.sin(v) * 1.1 + 0.3
            acc += v * v
            k += 1
            if k >= 400:
                break
        y[i] = acc * v + k


def r_while(x, lim):
    out = np.zeros_like(x)
    for p in range(len(x)):
        v, acc, k = x[p], 0.0, 0
        while acc < lim[p]:
            v = np.sin(v) * 1.1 + 0.3
            acc += v * v
            k += 1
            if k >= 400:
                break
        out[p] = acc * v + k
    return out


@sd.kernel
def k_two(x: ND, y: ND, n: sd.i32):
    """Two checkpointed loops; `w`, a plain local the first only reads, is changed by the
    second before the first's segments are replayed (they must see the value it had then)."""
    for i in x:
        w = 0.63 * x[i]
        a = 0.0
        s = 0.0
        for j in range(n):
            a = sd.exp(sd.sin(w) * 0.5)
            if x[i] > 0.5:
                s += 0.3 * a
            else:
                s += 0.9 * a
            a = sd.tanh(a * 0.79 + s * 0.01)
        k = 0
        while True:
            w = (k + 1) * 0.19
            s += sd.sin(x[i] * w)
            k += 1
            if k >= n // 10 or x[i] * k > 7.0:
                break
        y[i] = s + a


def r_two(x, n):
    out = np.zeros_like(x)
    for p in range(len(x)):
        w, a, s = 0.63 * x[p], 0.0, 0.0
        for j in range(n):
            a = np.exp(np.sin(w) * 0.5)
            s += (0.3 if x[p] > 0.5 else 0.9) * a
            a = np.tanh(a * 0.79 + s * 0.01)
        k = 0
        while True:
            w = (k + 1) * 0.19
            s += np.sin(x[p] * w)
            k += 1
            if k >= n // 10 or x[p] * k > 7.0:
                break
        out[p] = s + a
    return out


X = np.array([0.15, 0.4, 0.65, 0.9])
LIM = np.array([30.0, 95.0, 160.0, 1e9])  # the last one runs into the break


def _grad(kern, fp, extra):
    x = sd.ndarray(fp, len(X), needs_grad=True)
    y = sd.ndarray(fp, len(X), needs_grad=True)
    x.from_numpy(X.astype(np.float32 if fp == sd.f32 else np.float64))
    args = [x, y]
    for e in extra:
        if isinstance(e, np.ndarray):
            a = sd.ndarray(fp, len(e))
            a.from_numpy(e.astype(np.float32 if fp == sd.f32 else np.float64))
            args.append(a)
        else:
            args.append(e)
    kern(*args)
    y.grad.fill(1.0)
    kern.grad(*args)
    return x.grad.to_numpy(), kern.compile_adjoint(tuple(args)), args


def _fd(ref, eps=1e-6):
    out = np.zeros_like(X)
    for q in range(len(X)):
        e = np.zeros_like(X)
        e[q] = eps
        out[q] = (np.sum(ref(X + e)) - np.sum(ref(X - e))) / (2 * eps)
    return out


CASES = {"range": (k_long, (300,), lambda v: r_long(v, 300)),
         "two_loops": (k_two, (300,), lambda v: r_two(v, 300)),
         "while_break": (k_while, (LIM,), lambda v: r_while(v, LIM))}


@pytest.mark.parametrize("name", sorted(CASES))
@test_archs(default_fp=sd.f64)
def test_checkpointed_equals_stored_f64(arch, name):
    kern, extra, ref = CASES[name]
    full, _, _ = _grad(kern, sd.f64, extra)
    sd.init(arch=arch, debug=True, default_fp=sd.f64, ad_stack_memory=1)
    sizing_cache.stats.reset()
    ck, _, _ = _grad(kern, sd.f64, extra)
    assert sizing_cache.stats.checkpointed == 1
    np.testing.assert_allclose(ck, full, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ck, _fd(ref), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
@test_archs()
def test_checkpointed_equals_stored_f32(arch, name):
    kern, extra, _ = CASES[name]
    full, _, _ = _grad(kern, sd.f32, extra)
    sd.init(arch=arch, debug=True, ad_stack_memory=1)
    sizing_cache.stats.reset()
    ck, _, _ = _grad(kern, sd.f32, extra)
    assert sizing_cache.stats.checkpointed == 1
    np.testing.assert_allclose(ck, full, rtol=2e-6, atol=1e-6)


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_checkpointed_heap_is_smaller(arch, capfd, monkeypatch):
    """A budget below the stored heap switches the launch to the checkpointed adjoint: the same
    gradient, far less heap; SPIRAD_DEBUG_ADSTACK says which loop and how much memory it saved.
    A budget the heap fits in changes nothing."""
    def grad(budget):
        sd.init(arch=arch, debug=True, default_fp=sd.f64, ad_stack_memory=budget)
        x = sd.ndarray(sd.f64, 4, needs_grad=True)
        y = sd.ndarray(sd.f64, 4, needs_grad=True)
        x.from_numpy(X)
        k_long(x, y, 2000)
        y.grad.fill(1.0)
        capfd.readouterr()
        k_long.grad(x, y, 2000)
        err = capfd.readouterr().err
        adj = k_long.compile_adjoint((x, y, 2000))
        p = launch.plan(adj, (x, y, 2000), 0)
        heap = launch.heap_estimate(adj, p, sizing_cache.evaluate(
            adj.sizing, p.args, measure=launch.measure), _state.backend())
        return x.grad.to_numpy(), heap, [ln for ln in err.splitlines() if "checkpointed" in ln]

    monkeypatch.setenv("SPIRAD_DEBUG_ADSTACK", "1")
    want, full, lines = grad(None)
    assert lines == []
    got, _, lines = grad(full // 4)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert len(lines) == 1
    loop_line = 1 + open(__file__).read().split("\n").index("        for j in range(n):")
    assert f"would take {full} B" in lines[0]
    assert f"line(s) {loop_line} every 64 trips" in lines[0], lines[0]
    saved = int(lines[0].split("saved ")[1].split(" B")[0])
    assert saved > full // 2 and "still over" not in lines[0], lines[0]
    got, _, lines = grad(full)  # fits: nothing checkpointed
    assert lines == []
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# the random reverse-mode programs (tests/support/random_grad_programs.py) whose adjoints have a
# loop to checkpoint, every launch checkpointed (even where it saves nothing), against float64
# central differences
CHECKPOINTED_SEEDS = (0, 9, 13, 17, 20)


@pytest.mark.parametrize("seed", CHECKPOINTED_SEEDS)
@test_archs(archs=exactly("cpu", "vulkan"), default_fp=sd.f64,
            ad_stack_memory=1)
def test_random_programs_checkpointed(arch, seed, monkeypatch):
    from tests.support.random_grad_check import check_program
    monkeypatch.setattr(launch, "ALWAYS_CHECKPOINT", True)
    sizing_cache.stats.reset()
    check_program(seed)
    assert sizing_cache.stats.checkpointed >= 1
