"""Adstack overflow (architecture §4 "Overflow"): with init(ad_stack_size=4) a loop that needs more
entries raises sd.SpiradAdStackOverflow (a RuntimeError and an AssertionError, as Quadrants'
QuadrantsAssertionError) from the launch that overflowed on the CPU (as Quadrants reports it
there), at the next sync() / host read on a GPU, naming the kernel, the task, the stack's
variable, its source line, the capacity and the size the launch needed; nothing outside the heap
is written, and the runtime keeps working afterwards."""
import re

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, exactly, test_archs
from tests.support.grad_programs import assert_guards_intact, guarded_fields, overflowing, overflowing_grad
from tests.support.source_quotes import line_of

N = 8


def _setup(dt=sd.f64):
    before = sd.field(dt, shape=N)                 # allocated just before ...
    x = sd.field(dt, shape=N, needs_grad=True)
    y = sd.field(dt, shape=N, needs_grad=True)
    after = sd.field(dt, shape=N)                  # ... and just after the kernel's fields
    after_i = sd.field(sd.i32, shape=N)
    before.fill(11.0)
    after.fill(-5.0)
    after_i.fill(1234567)
    xs = np.linspace(0.1, 0.8, N)
    x.from_numpy(xs.astype(dt.np))
    return before, x, y, after, after_i, xs


def _overflow(arch, launch, read=None, match=None):
    """The overflow `launch()` reports: raised by the launch itself on the CPU, by the next
    `read()` (default: sync) on a GPU; reported once either way."""
    read = read or sd.sync
    if arch == "cpu":
        with pytest.raises(sd.SpiradAdStackOverflow, match=match) as e:
            launch()
        read()  # already reported
    else:
        launch()                                   # deferred: the error comes at the next sync
        with pytest.raises(sd.SpiradAdStackOverflow, match=match) as e:
            read()
    assert isinstance(e.value, RuntimeError) and isinstance(e.value, AssertionError)
    return e.value


def _check_message(msg, n):
    assert "overflowing_grad" in msg or "overflowing" in msg, msg      # the kernel
    assert re.search(r"task \w+", msg), msg                            # the task
    assert "'carried'" in msg, msg                                     # the stack's variable
    line = line_of(overflowing, "carried = x[i]")
    assert f"line {line}" in msg, msg                                  # its source line ...
    assert "carried = x[i]" in msg and "^" in msg, msg                 # ... quoted, with a caret
    assert "holds 4 entries" in msg, msg                               # the capacity
    assert f"needs {n + 2}" in msg, msg                                # the size this launch needed


@pytest.mark.parametrize("read", ["sync", "to_numpy", "getitem"])
@test_archs(archs=EVERY_ARCH, default_fp=sd.f64, ad_stack_size=4)
def test_overflow_raised_by_the_launch_or_next_sync(arch, read):
    before, x, y, after, after_i, xs = _setup()
    n = 9                                          # needs n + 2 = 11 entries > 4
    overflowing(x, y, n)
    y_fwd = y.to_numpy()
    y.grad.fill(1.0)
    reads = {"sync": sd.sync, "to_numpy": x.grad.to_numpy, "getitem": lambda: x.grad[0]}
    err = _overflow(arch, lambda: overflowing.grad(x, y, n), reads[read])
    _check_message(str(err), n)
    # the error is reported once; the runtime keeps working
    sd.sync()
    # nothing outside the heap was written
    np.testing.assert_array_equal(before.to_numpy(), 11.0)
    np.testing.assert_array_equal(after.to_numpy(), -5.0)
    np.testing.assert_array_equal(after_i.to_numpy(), 1234567)
    np.testing.assert_array_equal(y.to_numpy(), y_fwd)
    # `y[i] = ...` overwrites, so its adjoint consumed y.grad (Taichi's rule): zero, not garbage
    np.testing.assert_array_equal(y.grad.to_numpy(), 0.0)
    np.testing.assert_array_equal(x.to_numpy(), xs)
    # a following launch that fits (n + 2 <= 4) gives the right gradients
    x.grad.fill(0.0)
    overflowing(x, y, 2)
    y.grad.fill(1.0)  # re-seed: the launch above consumed it
    overflowing.grad(x, y, 2)
    np.testing.assert_allclose(x.grad.to_numpy(), overflowing_grad(xs, 2), rtol=1e-12)
    np.testing.assert_array_equal(after.to_numpy(), -5.0)


@test_archs(archs=EVERY_ARCH, ad_stack_size=4)
def test_overflow_f32_and_exact_fit(arch):
    before, x, y, after, after_i, xs = _setup(sd.f32)
    y.grad.fill(1.0)
    overflowing.grad(x, y, 2)                      # exactly 4 entries: fits
    sd.sync()
    seen = xs.astype(np.float32).astype(np.float64)  # the inputs the kernel actually saw
    np.testing.assert_allclose(x.grad.to_numpy(), overflowing_grad(seen, 2),
                               rtol=1e-5)
    y.grad.fill(1.0)  # re-seed: the grad launch consumed y.grad (a store overwrites)
    _overflow(arch, lambda: overflowing.grad(x, y, 3), match="needs 5")  # 5 entries: one too many
    np.testing.assert_array_equal(after.to_numpy(), -5.0)


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64, ad_stack_size=4)
def test_overflow_first_error_wins_and_clears(arch, request):
    """Two overflowing launches before a sync: one error, about the first; the next sync is
    clean (on the CPU each launch raises its own)."""
    before, x, y, after, after_i, xs = _setup()
    y.grad.fill(1.0)
    if arch == "cpu":
        for n in (5, 20):
            with pytest.raises(sd.SpiradAdStackOverflow, match=f"needs {n + 2}"):
                overflowing.grad(x, y, n)
        sd.sync()
    else:
        _overflow(arch, lambda: (overflowing.grad(x, y, 5), overflowing.grad(x, y, 20)),
                  match="needs 7")
    x.grad.fill(0.0)
    y.grad.fill(1.0)  # re-seed: each grad launch consumes y.grad (a store overwrites)
    overflowing.grad(x, y, 1)
    np.testing.assert_allclose(x.grad.to_numpy(), overflowing_grad(xs, 1), rtol=1e-12)


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64, ad_stack_size=4)
def test_overflow_many_threads_deep(arch):
    """Many threads all overflowing by a lot: no write past any thread's slice of the heap."""
    before, x, y, after = guarded_fields(1000)
    y.grad.fill(1.0)
    _overflow(arch, lambda: overflowing.grad(x, y, 200), match="needs 202")
    assert_guards_intact(before, after)
    # `y[i] = ...` overwrites, so its adjoint consumed y.grad (Taichi's rule): zero, not garbage
    np.testing.assert_array_equal(y.grad.to_numpy(), 0.0)


@test_archs(archs=exactly("interp"), default_fp=sd.f64, ad_stack_size=4)
def test_overflow_interp(arch):
    """The reference interpreter reports overflow with the same user-facing exception."""
    before, x, y, after, after_i, xs = _setup()
    y.grad.fill(1.0)
    with pytest.raises(sd.SpiradAdStackOverflow) as e:
        overflowing.grad(x, y, 9)
        sd.sync()
    _check_message(str(e.value), 9)


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_no_overflow_with_automatic_sizing(arch):
    """ad_stack_size=0 (the default): the same launches never overflow."""
    before, x, y, after, after_i, xs = _setup()
    for n in (9, 20, 3):
        x.grad.fill(0.0)
        y.grad.fill(1.0)  # re-seed: each grad launch consumes y.grad (a store overwrites)
        overflowing.grad(x, y, n)
        np.testing.assert_allclose(x.grad.to_numpy(), overflowing_grad(xs, n), rtol=1e-12)
