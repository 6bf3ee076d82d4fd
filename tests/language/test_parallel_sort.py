"""`sd.algorithms.parallel_sort` (Taichi's `ti.algorithms.parallel_sort`): an odd-even merge
sort in the kernel language; keys sorted ascending in place, values permuted with them, fields
with an offset sorted over their index range. Checked against numpy's sort."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


@test_archs()
@pytest.mark.parametrize("n", [1, 2, 7, 256, 1000])
def test_sort_keys_and_values(arch, n):
    rng = np.random.default_rng(n)
    keys = sd.field(sd.f32, n, offset=-3)
    vals = sd.field(sd.i32, n, offset=-3)
    k = rng.standard_normal(n).astype(np.float32)
    keys.from_numpy(k)
    vals.from_numpy(np.arange(n, dtype=np.int32))
    sd.algorithms.parallel_sort(keys, vals)
    order = np.argsort(k, kind="stable")
    np.testing.assert_array_equal(keys.to_numpy(), k[order])
    # distinct keys: the values follow their keys exactly
    np.testing.assert_array_equal(vals.to_numpy(), order.astype(np.int32))


@test_archs()
def test_sort_int_keys_with_ties_alone(arch):
    keys = sd.field(sd.i32, 513)
    k = np.random.default_rng(1).integers(-50, 50, 513).astype(np.int32)
    keys.from_numpy(k)
    sd.algorithms.parallel_sort(keys)
    np.testing.assert_array_equal(keys.to_numpy(), np.sort(k))


def test_sort_refuses_mismatched_fields():
    sd.init(arch=sd.cpu)
    with pytest.raises(sd.SpiradTypeError, match="1-D field"):
        sd.algorithms.parallel_sort(sd.field(sd.f32, (2, 2)))
    with pytest.raises(sd.SpiradTypeError, match="values has 3 elements"):
        sd.algorithms.parallel_sort(sd.field(sd.f32, 4), sd.field(sd.f32, 3))
