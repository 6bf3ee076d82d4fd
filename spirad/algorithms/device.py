"""What kernels see of `sd.algorithms` (Quadrants' device-wide algorithms called inside kernels).

`sort` (Quadrants' device radix sort called inside a kernel) is not implemented: using it in a
kernel is a compile error naming the call (registered with `frontend/namespace_hooks.py`: the
frontend does not import `sd.algorithms`, which builds kernels). Taichi's host-driven
`parallel_sort` and prefix sums are in algorithms/sort_scan.py. `sort_scratch_slots(n, log256_max_n)` answers the
scratch size Quadrants' sort would take, so programs that size buffers for it still build."""
from __future__ import annotations

from kernel_ir.errors import SpiradNotSupportedError

from ..frontend.namespace_hooks import refused_in_kernels


def _refused(name):
    def fn(*args, **kwargs):
        raise SpiradNotSupportedError(f"sd.algorithms.{name} (a sort called inside a kernel) is "
                                      f"not supported yet; call sd.algorithms.parallel_sort(keys, "
                                      f"values) between launches")
    fn.__name__ = name
    return fn


sort = refused_in_kernels("algorithms.sort", "sort on the host or in your own kernel "
                          "passes")(_refused("sort"))


def sort_scratch_slots(n, log256_max_n: int = None) -> int:
    """Scratch words Quadrants' radix sort takes for `n` keys: one 256-bucket histogram per
    256-key block and digit pass (an upper bound, enough for any program sizing a buffer)."""
    passes = log256_max_n if log256_max_n is not None else 8
    blocks = max(1, (int(n) + 255) // 256)
    return 256 * blocks * max(1, passes) + 256
