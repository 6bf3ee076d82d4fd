"""`sd.algorithms.parallel_sort` (Taichi's `ti.algorithms.parallel_sort`): Batcher's odd-even
merge sort in spirad's kernel language (the reasons are in `spirad.algorithms`' docstring).

Stage (p, k) compares element a with a + k when both lie in one block of 2p elements; the pairs
of one stage are disjoint, so each stage is one race-free parallel loop, and the stages run in
order, one launch each.
"""
from __future__ import annotations

from kernel_ir.errors import SpiradTypeError

from ..kernel import kernel
from ..types import template


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


