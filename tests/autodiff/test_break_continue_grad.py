"""Issue #35: two `break` / `continue` loops whose gradients came out silently wrong, exactly as
reported (the random programs of tests/support/random_grad_programs.py did not generate their
kind; with `features=("jumps",)` they do, tests/autodiff/test_random_grad.py runs them).

1. a local assigned before a `break`, read by a store that a later trip overwrites: only the
   last store (j = 9) reaches `z`, so d z / d y = cos(y + 9 * 0.163);
2. a local computed before a `continue`: the odd trips compute `t` and skip the update, so
   v = 0.613 v + u on trips 0, 2, 4 only and d loss / d x = 1 + 0.613 + 0.613².

f32 globals: the same programs run on every arch, Metal included.
"""
import numpy as np

import spirad as sd
from tests.support.archs import test_archs


@test_archs()
def test_local_before_break_read_by_an_overwritten_store(arch):
    y = sd.field(sd.f32, shape=1, needs_grad=True)
    z = sd.field(sd.f32, shape=1, needs_grad=True)
    n = sd.field(sd.i32, shape=())

    @sd.kernel
    def k():
        for i in range(1):
            v = y[i]
            for j in range(n[None]):          # n[None] = 20
                w = v
                if j >= 10:
                    break
                v = v + 0.163
                z[i] = sd.sin(w)              # the last store (j = 9) wins

    n[None] = 20
    y[0] = 0.3
    k()
    z.grad[0] = 1.0
    k.grad()
    np.testing.assert_allclose(z[0], np.sin(0.3 + 9 * 0.163), rtol=1e-5)
    np.testing.assert_allclose(y.grad[0], np.cos(0.3 + 9 * 0.163), rtol=1e-4)


@test_archs()
def test_local_computed_before_continue(arch):
    x = sd.field(sd.f32, shape=1, needs_grad=True)
    n = sd.field(sd.i32, shape=1)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def k():
        for i in range(1):
            v = 0.5
            u = x[i]
            for j in range(n[i]):             # n[0] = 6
                t = 0.613 * v
                if j % 2 == 1:
                    continue
                v = t
                v = v + u
            loss[None] += v

    n[0] = 6
    x[0] = 0.4
    with sd.ad.Tape(loss=loss):
        k()
    v = 0.5
    for _ in range(3):
        v = 0.613 * v + 0.4
    np.testing.assert_allclose(loss[None], v, rtol=1e-5)
    np.testing.assert_allclose(x.grad[0], 1 + 0.613 + 0.613 ** 2, rtol=1e-4)


@test_archs(debug=False)
def test_break_before_the_update_in_a_loop_of_one_trip(arch):
    """Fuzz seed 30004 (2026-12-07, release pipeline): a new field in the loop payload
    (`LoopArg`) took the place of the positional trip-count slot that reverse mode passes, so
    the adjoint replayed every trip of the inner loop, `break` or not: `xv.grad[1]` came out 1
    where the `break` skips the update (0). Now the payload's fields after `carried` are
    keyword-only."""
    xv = sd.Vector.field(2, sd.f32, shape=4, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)
    sf = sd.field(sd.i32, shape=4)

    @sd.kernel
    def k():
        for i in range(2):
            a = xv[i][0]
            for j in range(1):
                if j + 1 == sf[i]:
                    break                     # i = 1: before the update
                loss[None] += a

    xv.from_numpy(np.arange(8, dtype=np.float32).reshape(4, 2) * 0.1)
    sf.from_numpy(np.array([0, 1, 3, 0], dtype=np.int32))
    with sd.ad.Tape(loss=loss):
        k()
    np.testing.assert_allclose(loss[None], 0.0, atol=0)
    np.testing.assert_array_equal(xv.grad.to_numpy(), [[1, 0], [0, 0], [0, 0], [0, 0]])
