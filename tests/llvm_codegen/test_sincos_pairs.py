"""A value whose sin and cos a CPU SIMD task both takes shares one vecmath body
(`spirad.vm.sincos`, llvm_codegen/spmd.py); every *other* function of that value keeps its own.

Fuzz seed 73690 (`--features jumps --no-debug`, 2026-12-07) found the opposite: any math op of
a paired value went through the sincos body and got the cos half, so `sin(a) + tanh(a) *
cos(a)` computed `sin(a) + cos(a) * cos(a)` (forward values and gradients wrong, silently), on
the CPU in lanes only: release builds (`debug=True` compiles scalar tasks), a loop of at least
two lane groups, and the three ops on one IR value (`a = i * 0.01`, or the primal value an
adjoint recomputes). Checked here on every arch, in the release pipeline users run."""
from __future__ import annotations

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, test_archs

N = 256  # lanes on the CPU at any width (the default leaves loops under two lane groups scalar)
UNARY = {"tan": np.tan, "exp": np.exp, "log": np.log, "tanh": np.tanh, "atan": np.arctan,
         "asin": np.arcsin, "acos": np.arccos}


def _with_sin_and_cos(fname):
    f = getattr(sd, fname)
    y = sd.field(sd.f32, shape=N)

    @sd.kernel
    def k():
        for i in range(N):
            a = (i + 1) * 0.003  # in (0, 0.77]: the domain of every function above
            y[i] = sd.sin(a) + f(a) * sd.cos(a) + sd.pow(a, 1.5) * sd.atan2(a, 1.0)
    return k, y


@pytest.mark.parametrize("fname", sorted(UNARY))
@test_archs(EVERY_ARCH, debug=False)
def test_other_functions_of_a_sin_cos_value(arch, fname):
    k, y = _with_sin_and_cos(fname)
    k()
    a = np.arange(1, N + 1, dtype=np.float64) * 0.003
    want = np.sin(a) + UNARY[fname](a) * np.cos(a) + a ** 1.5 * np.arctan2(a, 1.0)
    np.testing.assert_allclose(y.to_numpy(), want, rtol=2e-5, atol=2e-6)


@test_archs(EVERY_ARCH, debug=False)
def test_gradient_through_functions_of_a_sin_cos_value(arch):
    """The adjoint task recomputes sin, cos, tanh and exp of the index's value `a`: d loss /
    d x[i] is that expression, and the forward loss too."""
    x = sd.field(sd.f32, shape=N, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def k():
        for i in range(N):
            a = (i + 1) * 0.003
            loss[None] += x[i] * (sd.sin(a) + sd.tanh(a) * sd.cos(a) + sd.exp(a))

    xs = np.linspace(-0.7, 0.7, N)
    x.from_numpy(xs.astype(np.float32))
    with sd.ad.Tape(loss=loss):
        k()
    a = np.arange(1, N + 1, dtype=np.float64) * 0.003
    want = np.sin(a) + np.tanh(a) * np.cos(a) + np.exp(a)
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(loss[None], (xs * want).sum(), rtol=1e-4, atol=1e-4)
