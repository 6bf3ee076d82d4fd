"""Device timestamps around launches, for the kernel profiler (`spirad.profiler`).

Why on the device: recording is asynchronous (a batch runs long after `dispatch` returned), so a
host clock around a launch measures recording, not execution; syncing after every launch to time
it on the host would serialise everything. `vkCmdWriteTimestamp` before a launch's first
dispatch and after its last one measures what the device spent, with the batch left intact.

Queries live in one pool (`CAPACITY` entries). A pair is reset in the command buffer right before
its first timestamp (vkCmdResetQueryPool), so no host reset is needed. Results are read in
`resolve`, which the runtime calls after it has waited for all submitted work; the pool then
starts over. When the pool is full, the runtime flushes first (`full`). Pairs are named by a
running id, so a caller's ids stay valid across those flushes.
"""

from __future__ import annotations

from .instance import ffi, lib, vk
from .vkresult import check

CAPACITY = 1024  # queries in the pool: 512 launches between two waits
_TOP = vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT
_BOTTOM = vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT


class Timestamps:
    def __init__(self, device, period_ns: float, valid_bits: int):
        self.device = device
        self.period_ns = period_ns
        self.mask = (1 << valid_bits) - 1 if valid_bits < 64 else (1 << 64) - 1
        info = ffi.new("VkQueryPoolCreateInfo*")
        info.sType = vk.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO
        info.queryType = vk.VK_QUERY_TYPE_TIMESTAMP
        info.queryCount = CAPACITY
        pool = ffi.new("VkQueryPool*")
        check(lib.vkCreateQueryPool(device, info, ffi.NULL, pool), "vkCreateQueryPool")
        self.pool = pool[0]
        self.used = 0            # queries recorded since the last resolve
        self.pending = {}        # pair id -> first query index
        self.ended = []          # ids of the pending pairs whose second timestamp was recorded
        self.done = {}           # pair id -> nanoseconds, until taken
        self.next_id = 0
        self._data = ffi.new("uint64_t[]", 2)

    @property
    def full(self) -> bool:
        return self.used + 2 > CAPACITY

    def begin(self, cmd) -> int:
        """Reset a pair of queries and write the first timestamp; returns the pair's id."""
        q = self.used
        lib.vkCmdResetQueryPool(cmd, self.pool, q, 2)
        lib.vkCmdWriteTimestamp(cmd, _TOP, self.pool, q)
        self.used += 2
        pid = self.next_id
        self.next_id += 1
        self.pending[pid] = q
        return pid

    def end(self, cmd, pid: int) -> None:
        lib.vkCmdWriteTimestamp(cmd, _BOTTOM, self.pool, self.pending[pid] + 1)
        self.ended.append(pid)

    def resolve(self) -> None:
        """Read every completed pair (all submitted work has finished) and start over. A pair
        without its second timestamp yet (a launch that flushed in between) is not read:
        waiting on an unwritten query would never return."""
        data, mask = self._data, self.mask
        flags = vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT
        for pid in self.ended:
            q = self.pending.pop(pid)
            check(lib.vkGetQueryPoolResults(self.device, self.pool, q, 2, 16, data, 8, flags),
                  "vkGetQueryPoolResults")
            self.done[pid] = ((int(data[1]) - int(data[0])) & mask) * self.period_ns
        self.ended = []
        if not self.pending:  # a launch that flushed between its two timestamps keeps its pair
            self.used = 0

    def take(self) -> dict:
        """Pair id -> nanoseconds of every pair resolved since the last call."""
        out, self.done = self.done, {}
        return out

    def destroy(self) -> None:
        lib.vkDestroyQueryPool(self.device, self.pool, ffi.NULL)
