"""Taichi's host-driven device algorithms: `parallel_sort(keys, values=None)` and the inclusive
prefix sum (`PrefixSumExecutor(length).run(arr)`, `prefix_sum_inclusive_inplace(arr, length)`).

Both are written in the kernel language, so they run on every arch, and both are driven from the
host: one launch per stage, launches of one program run in order, so no stage reads before the
previous one wrote (Taichi calls `sync()` between them; spirad's launch order already gives it).

Sort: Batcher's odd-even merge network for any length n (the comparator schedule for a power of
two, with the comparators that would touch an index >= n dropped; the merge network stays a
sorting network under that truncation because the missing elements act as +infinity). Stage
(p, k) compares element a = j + i with a + k for every start j = k mod p + 2k m and offset
i < k, and only where both lie in the same block of 2p; each comparison touches its own pair, so
one stage is one parallel loop. ceil(log2 n) (ceil(log2 n) + 1) / 2 stages, O(n log^2 n) work;
not stable (as Taichi's). Keys may be any real or integer dtype; values are permuted with them.

Prefix sum: blocks of 64 are scanned serially, one parallel iteration per block; the block totals
are scanned the same way (recursively, in scratch ndarrays the executor allocates once); then every
element adds the total of the blocks before it: O(n) work, 2 log64(n) + 1 launches. Integer sums
are exact; float sums are rounded in this blocked order, not left to right.

Fields (with Taichi's `offset=`) and 1-d ndarrays are accepted: the field kernels index with the
field's offset as a compile-time constant, the ndarray kernels from 0."""
from __future__ import annotations

from kernel_ir.errors import SpiradTypeError, SpiradValueError

from ..data.field import Field
from ..data.ndarray import Ndarray
from ..func import func
from ..kernel import kernel
from ..lang import static
from ..runtime import state as _state
from ..types import i32, ndarray, template

BLOCK = 64   # elements one parallel iteration of the scan sums serially


@func
def _compare_swap(keys: template(), values: template(), with_values: template(), a: i32, b: i32,
                  ko: template(), vo: template()):
    if keys[b + ko] < keys[a + ko]:
        keys[a + ko], keys[b + ko] = keys[b + ko], keys[a + ko]
        if static(with_values):
            values[a + vo], values[b + vo] = values[b + vo], values[a + vo]


@func
def _stage(keys: template(), values: template(), with_values: template(), ko: template(),
           vo: template(), n: i32, p: i32, k: i32, t: i32):
    a = k % p + (t // k) * 2 * k + t % k
    b = a + k
    if b < n and a // (2 * p) == b // (2 * p):
        _compare_swap(keys, values, with_values, a, b, ko, vo)


@kernel
def _sort_stage_fields(keys: template(), values: template(), with_values: template(), n: i32,
                       p: i32, k: i32, count: i32):
    for t in range(count):
        _stage(keys, values, with_values, static(keys.offset[0]), static(values.offset[0]),
               n, p, k, t)


@kernel
def _sort_stage_ndarrays(keys: ndarray(ndim=1), values: ndarray(ndim=1), with_values: template(),
                         n: i32, p: i32, k: i32, count: i32):
    for t in range(count):
        _stage(keys, values, with_values, 0, 0, n, p, k, t)


def _one_dim(arr, what: str, call: str) -> int:
    """The length of a 1-d field or ndarray, or a clear error naming `call`."""
    if not isinstance(arr, (Field, Ndarray)):
        raise SpiradTypeError(f"{call}: {what} must be a 1-d field or ndarray, got "
                              f"{type(arr).__name__}")
    if len(arr.shape) != 1:
        raise SpiradValueError(f"{call}: {what} must be 1-d, got shape {tuple(arr.shape)}")
    return int(arr.shape[0])


def sort_stages(n: int):
    """(p, k, comparator slots) of every stage of the odd-even merge network for n elements."""
    p = 1
    while p < n:
        k = p
        while k >= 1:
            span = n - k - k % p        # starts j = k % p + 2k m with j + k < n
            if span > 0:
                yield p, k, ((span + 2 * k - 1) // (2 * k)) * k
            k //= 2
        p *= 2


def parallel_sort(keys, values=None) -> None:
    """Sort the 1-d field or ndarray `keys` ascending in place on the device (Taichi's
    `ti.algorithms.parallel_sort`); `values` (same length and kind), if given, is permuted
    with it. Not stable."""
    n = _one_dim(keys, "keys", "parallel_sort")
    if values is not None:
        if _one_dim(values, "values", "parallel_sort") != n:
            raise SpiradValueError(f"parallel_sort: values has {values.shape[0]} elements, keys {n}")
        if isinstance(values, Field) != isinstance(keys, Field):
            raise SpiradTypeError("parallel_sort: keys and values must both be fields or both "
                                  "ndarrays")
    if n >= 2 ** 30:
        raise SpiradValueError(f"parallel_sort: {n} keys; at most 2**30 - 1 (32-bit indices)")
    stage = _sort_stage_fields if isinstance(keys, Field) else _sort_stage_ndarrays
    other = keys if values is None else values
    for p, k, count in sort_stages(n):
        stage(keys, other, values is not None, n, p, k, count)


@kernel
def _scan_blocks_field(arr: template(), totals: ndarray(ndim=1), n: i32):
    for blk in range(totals.shape[0]):
        s = arr[blk * BLOCK + static(arr.offset[0])] * 0
        for i in range(BLOCK):
            at = blk * BLOCK + i
            if at < n:
                s += arr[at + static(arr.offset[0])]
                arr[at + static(arr.offset[0])] = s
        totals[blk] = s


@kernel
def _scan_blocks_ndarray(arr: ndarray(ndim=1), totals: ndarray(ndim=1), n: i32):
    for blk in range(totals.shape[0]):
        s = arr[blk * BLOCK] * 0
        for i in range(BLOCK):
            at = blk * BLOCK + i
            if at < n:
                s += arr[at]
                arr[at] = s
        totals[blk] = s


@kernel
def _add_block_totals_field(arr: template(), totals: ndarray(ndim=1), n: i32):
    for at in range(BLOCK, n):
        arr[at + static(arr.offset[0])] += totals[at // BLOCK - 1]


@kernel
def _add_block_totals_ndarray(arr: ndarray(ndim=1), totals: ndarray(ndim=1), n: i32):
    for at in range(BLOCK, n):
        arr[at] += totals[at // BLOCK - 1]


class PrefixSumExecutor:
    """Taichi's `ti.algorithms.PrefixSumExecutor(length)`: `run(arr)` replaces the 1-d field or
    ndarray `arr` (`length` elements) by its inclusive prefix sums, on the device. The scratch
    for the block totals is allocated once per element type and reused by every run."""

    def __init__(self, length: int):
        if int(length) < 1:
            raise SpiradValueError(f"PrefixSumExecutor: length must be >= 1, got {length}")
        self.sorting_length = int(length)   # Taichi's attribute name
        self._levels = []                   # element counts of the block-total levels
        m = self.sorting_length
        while m > 1:
            m = (m + BLOCK - 1) // BLOCK
            self._levels.append(m)
        self._scratch = {}                  # (dtype, epoch) -> scratch ndarrays per level

    def _totals(self, dtype):
        key = (dtype, _state.current().epoch)
        if key not in self._scratch:
            self._scratch = {key: [Ndarray(dtype, (m,)) for m in self._levels]}
        return self._scratch[key]

    def run(self, input_arr) -> None:
        n = _one_dim(input_arr, "the array", "PrefixSumExecutor.run")
        if n != self.sorting_length:
            raise SpiradValueError(f"PrefixSumExecutor({self.sorting_length}).run: the array has "
                                   f"{n} elements")
        arrays = [input_arr] + self._totals(input_arr.dtype)
        for level, totals in enumerate(arrays[1:]):
            arr, m = arrays[level], int(arrays[level].shape[0])
            scan = _scan_blocks_field if isinstance(arr, Field) else _scan_blocks_ndarray
            scan(arr, totals, m)
        for level in range(len(arrays) - 2, -1, -1):
            arr, m = arrays[level], int(arrays[level].shape[0])
            add = _add_block_totals_field if isinstance(arr, Field) else _add_block_totals_ndarray
            if m > BLOCK:
                add(arr, arrays[level + 1], m)


def prefix_sum_inclusive_inplace(input_arr, length: int) -> None:
    """Inclusive prefix sum of the first `length` elements of `input_arr`, in place."""
    PrefixSumExecutor(length).run(input_arr)
