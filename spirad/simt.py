"""`sd.simt` (Quadrants' cooperative-thread namespaces), with the meaning spirad can give them.

spirad runs every iteration of a parallel loop as its own thread of work with no block or warp
structure the program can see (the CPU splits iterations over a thread pool and SIMD lanes; GPUs
get the backend's own group size). So:

* `subgroup.*` have the meaning of a subgroup of one invocation, on every arch: `group_size()`
  is 1, `invocation_id()` 0, `broadcast` / `shuffle*` return the value itself, `ballot(p)` is
  `1 if p else 0`, reductions and scans return the value, `sync()` does nothing. The `*_tiled`
  forms need tiles of 2^k invocations: k = 0 is the value itself, k > 0 a compile error.
* `block.SharedArray`, `block.sync`, `block.mem_fence`, `grid.mem_fence`, `warp.sync` need
  invocations that wait for each other: a compile error naming the call (programs that select
  such code for GPUs only, as Genesis does with `qd.static(backend != cpu)`, compile fine).

In Python scope each name is an object only; calling it raises.
"""
from __future__ import annotations

from types import SimpleNamespace

from kernel_ir.errors import SpiradNotSupportedError


class SimtOp:
    """A name of `sd.simt`; the frontend gives it meaning in kernels (`frontend.simt_ops`)."""

    def __init__(self, path: str):
        self.path = path

    def __call__(self, *args, **kwargs):
        raise SpiradNotSupportedError(f"sd.simt.{self.path} is only meaningful inside kernels")

    def __repr__(self):
        return f"sd.simt.{self.path}"


def _ns(prefix, names):
    return SimpleNamespace(**{n: SimtOp(f"{prefix}.{n}") for n in names})


SUBGROUP_ONE_LANE = ("invocation_id", "group_size", "broadcast", "broadcast_first", "shuffle",
                     "shuffle_up", "shuffle_down", "shuffle_xor", "ballot", "sync", "elect",
                     "reduce_add", "reduce_min", "reduce_max", "reduce_and", "reduce_or",
                     "reduce_xor", "reduce_all_add", "reduce_all_min", "reduce_all_max",
                     "inclusive_add", "inclusive_min", "inclusive_max", "exclusive_add",
                     "all_true", "any_true")
SUBGROUP_TILED = ("all_true_tiled", "any_true_tiled", "inclusive_add_tiled",
                  "reduce_all_add_tiled", "reduce_all_max_tiled", "reduce_all_min_tiled",
                  "segmented_reduce_add_tiled", "segmented_reduce_min_tiled")
COOPERATIVE = {"block": ("sync", "mem_fence", "SharedArray", "thread_idx", "global_thread_idx"),
               "grid": ("mem_fence", "sync"), "warp": ("sync",)}

subgroup = _ns("subgroup", SUBGROUP_ONE_LANE + SUBGROUP_TILED)
block = _ns("block", COOPERATIVE["block"])
grid = _ns("grid", COOPERATIVE["grid"])
warp = _ns("warp", COOPERATIVE["warp"])
Tile16x16 = SimtOp("Tile16x16")
Tile32x32 = SimtOp("Tile32x32")
TileNxN = SimtOp("TileNxN")
Tile = SimtOp("Tile")


def all_ops():
    for ns_name, ns in (("subgroup", subgroup), ("block", block), ("grid", grid), ("warp", warp)):
        for name, op in vars(ns).items():
            yield ns_name, name, op
    for op in (Tile16x16, Tile32x32, TileNxN, Tile):
        yield "", op.path, op
