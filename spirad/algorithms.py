"""`sd.algorithms` (Quadrants' device-wide algorithms): names only for now.

`sort` (a device radix sort called inside kernels) and the scans are not implemented: using them
in a kernel is a compile error naming the call. `sort_scratch_slots(n, log256_max_n)` answers the
scratch size Quadrants' sort would take, so programs that size buffers for it still build."""
from __future__ import annotations

from kernel_ir.errors import SpiradNotSupportedError


def _refused(name):
    def fn(*args, **kwargs):
        raise SpiradNotSupportedError(f"sd.algorithms.{name} is not supported yet; sort on the "
                                      f"host (numpy) or write the pass as a kernel")
    fn.__name__ = name
    return fn


sort = _refused("sort")
parallel_sort = _refused("parallel_sort")
prefix_sum_inclusive_inplace = _refused("prefix_sum_inclusive_inplace")
PrefixSumExecutor = _refused("PrefixSumExecutor")


def sort_scratch_slots(n, log256_max_n: int = None) -> int:
    """Scratch words Quadrants' radix sort takes for `n` keys: one 256-bucket histogram per
    256-key block and digit pass (an upper bound, enough for any program sizing a buffer)."""
    passes = log256_max_n if log256_max_n is not None else 8
    blocks = max(1, (int(n) + 255) // 256)
    return 256 * blocks * max(1, passes) + 256
