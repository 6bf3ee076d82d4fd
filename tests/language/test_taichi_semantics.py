"""Taichi's meaning where spirad used to give a different number silently (issue #35).

Each expected value below is what Taichi 1.7.4 gives for the same program (arch=cpu), hard-coded
here; the comment over each test says which Taichi program it mirrors."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


@test_archs()
def test_abs_slope_is_sign_in_both_modes(arch):
    # Taichi 1.7.4: d|x|/dx at [0, -0, -2, 3] is [0, 0, -1, 1] in reverse mode (Tape / k.grad())
    # and in forward mode (FwdMode, y.dual)
    want = [0.0, 0.0, -1.0, 1.0]
    x = sd.field(sd.f32, shape=4, needs_grad=True, needs_dual=True)
    y = sd.field(sd.f32, shape=4, needs_grad=True, needs_dual=True)

    @sd.kernel
    def k():
        for i in x:
            y[i] = abs(x[i])

    x.from_numpy(np.array([0.0, -0.0, -2.0, 3.0], np.float32))
    with sd.ad.FwdMode(loss=y, param=x, seed=[1.0, 1.0, 1.0, 1.0]):
        k()
    assert y.dual.to_numpy().tolist() == want
    y.grad.fill(1.0)
    k.grad()
    assert x.grad.to_numpy().tolist() == want
