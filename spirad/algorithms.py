"""`sd.algorithms`: Taichi's `parallel_sort` (a sort of a 1-D field, with an optional field of
values permuted alongside), and Quadrants' names.

`parallel_sort` is Batcher's odd-even merge sort written in spirad's own kernel language: one
kernel launch per merge stage, each comparing and swapping disjoint pairs in parallel, so it runs
on every arch that runs kernels, with O(n log² n) comparisons in O(log² n) launches. Why a
sorting network rather than a radix sort: it needs no scratch memory and no atomics, sorts any
key type `<` orders (ints and floats), and each stage's pairs are disjoint, so the parallel loop
is race-free. Equal keys may be reordered (not stable), as in Taichi.

Quadrants' in-kernel `sort` and the scans are not implemented: using them is a clear error naming
the call. `sort_scratch_slots(n, log256_max_n)` answers the scratch size Quadrants' sort would
take, so programs that size buffers for it still build."""
from __future__ import annotations

from kernel_ir.errors import SpiradNotSupportedError, SpiradTypeError

from .kernel import kernel
from .types import template


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


@kernel
def _merge_stage(keys: template(), values: template(), with_values: template(), n: int,
                 p: int, k: int, pairs: int, base: int):
    """One stage (p, k) of the odd-even merge sort: pair t compares elements a and a + k
    (positions from 0; `base` is the field's offset) when both lie in one block of 2p, and
    swaps them into order. The pairs of a stage are disjoint."""
    for t in range(pairs):
        a = k % p + (t // k) * 2 * k + t % k
        b = a + k
        if b < n and a // (2 * p) == b // (2 * p):
            ka = keys[base + a]
            kb = keys[base + b]
            if kb < ka:
                keys[base + a] = kb
                keys[base + b] = ka
                if with_values:
                    va = values[base + a]
                    values[base + a] = values[base + b]
                    values[base + b] = va


def parallel_sort(keys, values=None) -> None:
    """Sort the 1-D field `keys` in place, ascending; `values` (a 1-D field of the same shape,
    optional) is permuted with it (Taichi's `ti.algorithms.parallel_sort`). Fields with an
    offset sort over their index range."""
    for name, f in (("keys", keys), ("values", values)):
        if f is not None and (not hasattr(f, "shape") or len(f.shape) != 1):
            raise SpiradTypeError(f"parallel_sort: {name} must be a 1-D field, got "
                                  f"{type(f).__name__} of shape {getattr(f, 'shape', None)}")
    n = keys.shape[0]
    if values is not None and values.shape[0] != n:
        raise SpiradTypeError(f"parallel_sort: values has {values.shape[0]} elements, keys {n}")
    base = int((getattr(keys, "offset", None) or (0,))[0])
    if values is not None and int((getattr(values, "offset", None) or (0,))[0]) != base:
        raise SpiradTypeError("parallel_sort: keys and values must have the same offset")
    p = 1
    while p < n:
        k = p
        while k >= 1:
            first = k % p
            if n - k > first:  # some pair (a, a + k) with a >= first, a + k < n exists
                pairs = ((n - 1 - k - first) // (2 * k) + 1) * k
                _merge_stage(keys, values if values is not None else keys, values is not None,
                             n, p, k, pairs, base)
            k //= 2
        p *= 2


def sort_scratch_slots(n, log256_max_n: int = None) -> int:
    """Scratch words Quadrants' radix sort takes for `n` keys: one 256-bucket histogram per
    256-key block and digit pass (an upper bound, enough for any program sizing a buffer)."""
    passes = log256_max_n if log256_max_n is not None else 8
    blocks = max(1, (int(n) + 255) // 256)
    return 256 * blocks * max(1, passes) + 256
