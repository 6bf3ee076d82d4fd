"""`sd.sparse.grid` / `sd.sparse.usage` (Taichi's `ti.sparse`): a struct field on a bitmasked
node whose cells activate when written, and the fraction of active cells."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


@test_archs()
def test_grid_activates_written_cells(arch):
    g = sd.sparse.grid({"pos": sd.math.vec2, "mass": sd.f32}, shape=(10, 10))
    assert sd.sparse.usage(g) == 0.0
    g[0, 0].mass = 1.0
    g[3, 4].pos = sd.math.vec2(1, 2)

    @sd.kernel
    def fill():
        for i in range(5):
            g[9, i].mass = 2.0

    fill()
    assert sd.sparse.usage(g) == pytest.approx(7 / 100)
    assert g[3, 4].pos[1] == 2.0 and g.mass.to_numpy()[9, :5].sum() == 10.0
    g3 = sd.sparse.grid({"m": sd.i32}, shape=(2, 3, 4))
    g3[1, 2, 3].m = 5
    assert sd.sparse.usage(g3) == pytest.approx(1 / 24)


def test_grid_shapes():
    sd.init(arch=sd.cpu)
    with pytest.raises(sd.SpiradValueError, match="2-D and 3-D"):
        sd.sparse.grid({"m": sd.f32}, shape=(4,))
    assert np.isclose(sd.sparse.usage(sd.sparse.grid({"m": sd.f32}, shape=(2, 2))), 0.0)
