"""`sd.algorithms`: Taichi's host-driven `parallel_sort` and prefix sums (sort_scan.py, kernels
launched stage by stage) and Quadrants' in-kernel `sort` (device.py: refused at compile time,
with `sort_scratch_slots` so programs that size its buffers still build)."""
from __future__ import annotations

from .device import sort, sort_scratch_slots
from .sort_scan import PrefixSumExecutor, parallel_sort, prefix_sum_inclusive_inplace

__all__ = ["PrefixSumExecutor", "parallel_sort", "prefix_sum_inclusive_inplace", "sort",
           "sort_scratch_slots"]
