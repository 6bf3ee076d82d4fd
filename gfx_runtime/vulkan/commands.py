"""Command recording: a `Batch` records consecutive dispatches into one command buffer.

Why apart from submission (`queue.py`): recording is the per-launch hot path and must stay a
handful of direct `vk.lib` calls on preallocated cffi structs; when and how the recorded work is
submitted is a separate decision made by the runtime.

Between two dispatches of a batch goes a compute->compute memory barrier (shader write ->
shader read|write): every kernel sees everything earlier kernels wrote, as in program order.
A batch ends with one barrier from compute / transfer writes to compute, transfer and host
access, so later submissions on the queue and host reads after the fence see the results.
Redundant binds are skipped: the same pipeline, or the same descriptor set under the same
pipeline layout (and the same argument-block offset, `arguments.py`), as the previous dispatch
is not bound again. An indirect dispatch reads its
workgroup counts from a buffer an earlier dispatch wrote: the barrier before it also makes shader
writes visible to the indirect-command read.
"""

from __future__ import annotations

from .instance import ffi, lib, vk
from .vkresult import check

_COMPUTE = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
_INDIRECT = vk.VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT
_BIND_COMPUTE = vk.VK_PIPELINE_BIND_POINT_COMPUTE
_STAGE_COMPUTE = vk.VK_SHADER_STAGE_COMPUTE_BIT
_SHADER_RW = vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT
_ALL_WRITES = vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
_ALL_ACCESS = (_SHADER_RW | vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
               | vk.VK_ACCESS_HOST_READ_BIT | vk.VK_ACCESS_HOST_WRITE_BIT)
_END_SRC_STAGES = _COMPUTE | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
_END_DST_STAGES = _COMPUTE | vk.VK_PIPELINE_STAGE_TRANSFER_BIT | vk.VK_PIPELINE_STAGE_HOST_BIT


def memory_barrier(src_access: int, dst_access: int):
    barrier = ffi.new("VkMemoryBarrier*")
    barrier.sType = vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER
    barrier.srcAccessMask = src_access
    barrier.dstAccessMask = dst_access
    return barrier


END_BARRIER = (_END_SRC_STAGES, _END_DST_STAGES, memory_barrier(_ALL_WRITES, _ALL_ACCESS))


def begin(cmd, begin_info) -> None:
    check(lib.vkBeginCommandBuffer(cmd, begin_info), "vkBeginCommandBuffer")


def end(cmd) -> None:
    src, dst, barrier = END_BARRIER
    lib.vkCmdPipelineBarrier(cmd, src, dst, 0, 1, barrier, 0, ffi.NULL, 0, ffi.NULL)
    check(lib.vkEndCommandBuffer(cmd), "vkEndCommandBuffer")


def one_time_begin_info():
    info = ffi.new("VkCommandBufferBeginInfo*")
    info.sType = vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO
    info.flags = vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT
    return info


class Batch:
    """Records dispatches into the command buffer given to `begin`; `finish` ends it.
    `begin_info`: how command buffers are begun (default: submitted once; a recording that
    is submitted again passes its own, `recording.py`)."""

    def __init__(self, begin_info=None):
        self.cmd = None          # the command buffer being recorded, None when idle
        self.count = 0           # dispatches recorded into it
        self._begin_info = one_time_begin_info() if begin_info is None else begin_info
        self._barrier = memory_barrier(vk.VK_ACCESS_SHADER_WRITE_BIT, _SHADER_RW)
        self._fill_barrier = memory_barrier(vk.VK_ACCESS_TRANSFER_WRITE_BIT, _SHADER_RW)
        self._indirect_barrier = memory_barrier(
            vk.VK_ACCESS_SHADER_WRITE_BIT, _SHADER_RW | vk.VK_ACCESS_INDIRECT_COMMAND_READ_BIT)
        self._last_pipeline = None
        self._last_layout = None
        self._last_set = None
        self._last_offset = None
        self._offsets = ffi.new("uint32_t[1]")  # the dynamic offset of an argument block

    def begin(self, cmd) -> None:
        begin(cmd, self._begin_info)
        self.cmd = cmd
        self.count = 0
        self._last_pipeline = self._last_layout = self._last_set = self._last_offset = None

    def dispatch(self, pipeline, dset, push_constants: bytes, gx: int, gy: int, gz: int,
                 indirect=None, offset=None) -> None:
        """Record one dispatch. `dset` is a cffi VkDescriptorSet[1] (from `DescriptorSets`).
        `indirect`: (buffer handle, byte offset) of three u32 workgroup counts to dispatch
        instead of (gx, gy, gz), written by an earlier dispatch of this batch. `offset`: the
        dynamic offset of the argument block (pipelines with `arguments`), else None."""
        cmd = self.cmd
        if indirect is not None:
            lib.vkCmdPipelineBarrier(cmd, _COMPUTE, _COMPUTE | _INDIRECT, 0, 1,
                                     self._indirect_barrier, 0, ffi.NULL, 0, ffi.NULL)
        elif self.count:
            lib.vkCmdPipelineBarrier(cmd, _COMPUTE, _COMPUTE, 0, 1, self._barrier,
                                     0, ffi.NULL, 0, ffi.NULL)
        if pipeline is not self._last_pipeline:
            lib.vkCmdBindPipeline(cmd, _BIND_COMPUTE, pipeline.handle)
            self._last_pipeline = pipeline
        layout = pipeline.layout
        if dset is not self._last_set or layout != self._last_layout or \
                offset != self._last_offset:
            if offset is not None:
                self._offsets[0] = offset
                lib.vkCmdBindDescriptorSets(cmd, _BIND_COMPUTE, layout, 0, 1, dset, 1,
                                            self._offsets)
            elif pipeline.num_bindings:
                lib.vkCmdBindDescriptorSets(cmd, _BIND_COMPUTE, layout, 0, 1, dset, 0, ffi.NULL)
            self._last_set = dset
            self._last_layout = layout
            self._last_offset = offset
        if push_constants:
            lib.vkCmdPushConstants(cmd, layout, _STAGE_COMPUTE, 0, len(push_constants),
                                   push_constants)
        if indirect is not None:
            lib.vkCmdDispatchIndirect(cmd, indirect[0], indirect[1])
        else:
            lib.vkCmdDispatch(cmd, gx, gy, gz)
        self.count += 1

    def fill_zero(self, buffer_handle, size: int) -> None:
        """Record zeroing a buffer that no earlier command touches (a fresh allocation)."""
        lib.vkCmdFillBuffer(self.cmd, buffer_handle, 0, size, 0)
        lib.vkCmdPipelineBarrier(self.cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, _COMPUTE, 0, 1,
                                 self._fill_barrier, 0, ffi.NULL, 0, ffi.NULL)

    def finish(self):
        """End recording; returns the command buffer, ready to submit."""
        cmd = self.cmd
        end(cmd)
        self.cmd = None
        return cmd
