"""`select` is component-wise when any operand is a vector, the condition included, so
`sd.round` / `sd.math.sign` / `trunc` of a vector work in kernels (Taichi's `ti.round(v)`;
they raised from inside spirad/math.py before)."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, test_archs


@test_archs(archs=EVERY_ARCH)
def test_vector_round_sign_trunc_and_select(arch):
    out = sd.Vector.field(3, sd.f32, shape=4)

    @sd.kernel
    def k():
        out[0] = sd.round(sd.math.vec3(1.5, -2.5, 3.3))
        out[1] = sd.math.sign(sd.Vector([-2.0, 0.0, 5.0]))
        out[2] = sd.math.trunc(sd.Vector([-2.5, 0.7, 5.2]))
        out[3] = sd.select(sd.Vector([1, 0, 1]), sd.Vector([1.0, 2.0, 3.0]), 7.0)

    k()
    np.testing.assert_array_equal(out.to_numpy(), [[2, -3, 3], [-1, 0, 1], [-2, 0, 5], [1, 7, 3]])


def test_select_of_different_shapes_is_an_error():
    sd.init(arch="cpu")

    @sd.kernel
    def k() -> sd.f32:
        return sd.select(sd.Vector([1, 0]), sd.Vector([1.0, 2.0, 3.0]), 0.0)[0]

    with pytest.raises(sd.TaichiTypeError, match="different shapes"):
        k()
