"""`sd.algorithms.parallel_sort` and the prefix sums (spirad/algorithms/sort_scan.py) on every
arch, against numpy: lengths around the network's powers of two and the scan's 64-blocks, fields
with Taichi's offsets and ndarrays, integer and float keys, values permuted with the keys."""
import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradNotSupportedError, SpiradTypeError, SpiradValueError
from spirad.algorithms.sort_scan import sort_stages
from tests.support.archs import test_archs

LENGTHS = (1, 3, 64, 65, 200, 1025)


@test_archs()
@pytest.mark.parametrize("dtype", [sd.i32, sd.f32])
def test_parallel_sort_fields_with_offsets_and_values(arch, dtype):
    rng = np.random.default_rng(3)
    for n, offset in zip(LENGTHS, (0, -5, 0, -5, 0, -5)):
        keys = sd.field(dtype, n, offset=offset)
        values = sd.field(sd.i32, n, offset=offset)
        a = (rng.random(n) * 10).astype(dtype.np.type)     # repeated keys included
        keys.from_numpy(a)
        values.from_numpy(np.arange(n, dtype=np.int32))
        sd.algorithms.parallel_sort(keys, values)
        k, v = keys.to_numpy(), values.to_numpy()
        np.testing.assert_array_equal(k, np.sort(a), err_msg=f"n={n} offset={offset}")
        np.testing.assert_array_equal(a[v], k)                 # the values moved with them
        assert sorted(v) == list(range(n))


@test_archs()
def test_parallel_sort_ndarrays(arch):
    rng = np.random.default_rng(4)
    for n in LENGTHS:
        keys, values = sd.ndarray(sd.f32, n), sd.ndarray(sd.f32, n)
        a = rng.standard_normal(n).astype(np.float32)
        keys.from_numpy(a)
        values.from_numpy(-a)
        sd.algorithms.parallel_sort(keys, values)
        np.testing.assert_array_equal(keys.to_numpy(), np.sort(a))
        np.testing.assert_array_equal(values.to_numpy(), -np.sort(a))


def test_the_network_sorts_every_zero_one_input():
    """The 0-1 principle: a comparator network that sorts every 0/1 sequence sorts everything;
    checked for every length up to 12 on the host schedule the kernels run."""
    for n in range(1, 13):
        for bits in range(2 ** n):
            x = [(bits >> i) & 1 for i in range(n)]
            for p, k, count in sort_stages(n):
                for t in range(count):
                    a = k % p + (t // k) * 2 * k + t % k
                    b = a + k
                    if b < n and a // (2 * p) == b // (2 * p) and x[b] < x[a]:
                        x[a], x[b] = x[b], x[a]
            assert x == sorted(x), (n, bits)


@test_archs()
@pytest.mark.parametrize("dtype", [sd.i32, sd.f32])
def test_prefix_sums(arch, dtype):
    rng = np.random.default_rng(5)
    for n in (1, 65, 4097 + 64 * 64):                    # one, two and three levels of totals
        for offset in (0, -7):
            f = sd.field(dtype, n, offset=offset)
            a = rng.integers(-8, 9, n).astype(dtype.np.type)     # small integers: exact in f32
            f.from_numpy(a)
            sd.algorithms.PrefixSumExecutor(n).run(f)
            np.testing.assert_array_equal(f.to_numpy(), np.cumsum(a).astype(a.dtype))
        x = sd.ndarray(dtype, n)
        x.from_numpy(a)
        executor = sd.algorithms.PrefixSumExecutor(n)
        executor.run(x)
        executor.run(x)                                          # the scratch is reused
        np.testing.assert_array_equal(x.to_numpy(), np.cumsum(np.cumsum(a)).astype(a.dtype))


def test_bad_arguments_are_named():
    sd.init(arch=sd.cpu)
    with pytest.raises(SpiradValueError, match="1-d"):
        sd.algorithms.parallel_sort(sd.field(sd.f32, (2, 2)))
    with pytest.raises(SpiradValueError, match="values has 3 elements"):
        sd.algorithms.parallel_sort(sd.field(sd.f32, 4), sd.field(sd.f32, 3))
    with pytest.raises(SpiradTypeError, match="field or ndarray"):
        sd.algorithms.parallel_sort(np.zeros(4))
    with pytest.raises(SpiradValueError, match="has 5 elements"):
        sd.algorithms.PrefixSumExecutor(4).run(sd.ndarray(sd.i32, 5))


def test_in_kernel_sort_is_still_refused():
    sd.init(arch=sd.cpu)
    x = sd.ndarray(sd.i32, 4)

    @sd.kernel
    def k(a: sd.types.ndarray()):
        sd.algorithms.sort(a)

    with pytest.raises(SpiradNotSupportedError) as e:  # at compile time, at the call's line
        k(x)
    text = str(e.value)
    assert "sd.algorithms.sort is not supported yet: sort on the host" in text
    assert "sd.algorithms.sort(a)" in text and "^" in text
