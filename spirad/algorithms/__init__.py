"""`sd.algorithms`: Taichi's `parallel_sort` (a sort of a 1-D field, with an optional field of
values permuted alongside), and Quadrants' names.

`parallel_sort` lives in `spirad.algorithms.merge_sort` (it builds kernels, a layer above
this namespace, which the frontend reads for Quadrants' in-kernel `sort`) and is set here when
spirad is imported. It is Batcher's odd-even merge sort written in spirad's own kernel language: one
kernel launch per merge stage, each comparing and swapping disjoint pairs in parallel, so it runs
on every arch that runs kernels, with O(n log² n) comparisons in O(log² n) launches. Why a
sorting network rather than a radix sort: it needs no scratch memory and no atomics, sorts any
key type `<` orders (ints and floats), and each stage's pairs are disjoint, so the parallel loop
is race-free. Equal keys may be reordered (not stable), as in Taichi.

Quadrants' in-kernel `sort` and the scans are not implemented: using them is a clear error naming
the call. `sort_scratch_slots(n, log256_max_n)` answers the scratch size Quadrants' sort would
take, so programs that size buffers for it still build."""
from __future__ import annotations

from kernel_ir.errors import SpiradNotSupportedError


def _refused(name):
    def fn(*args, **kwargs):
        raise SpiradNotSupportedError(f"sd.algorithms.{name} is not supported yet; sort with "
                                      f"sd.algorithms.parallel_sort, on the host (numpy), or "
                                      f"write the pass as a kernel")
    fn.__name__ = name
    return fn


sort = _refused("sort")
prefix_sum_inclusive_inplace = _refused("prefix_sum_inclusive_inplace")
PrefixSumExecutor = _refused("PrefixSumExecutor")
parallel_sort = None  # spirad.algorithms.merge_sort.parallel_sort, set by spirad/__init__.py


def sort_scratch_slots(n, log256_max_n: int = None) -> int:
    """Scratch words Quadrants' radix sort takes for `n` keys: one 256-bucket histogram per
    256-key block and digit pass (an upper bound, enough for any program sizing a buffer)."""
    passes = log256_max_n if log256_max_n is not None else 8
    blocks = max(1, (int(n) + 255) // 256)
    return 256 * blocks * max(1, passes) + 256
