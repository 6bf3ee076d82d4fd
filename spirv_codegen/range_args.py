"""Device ranges: the module that evaluates a parallel loop's range on the device.

    compile_range_args(tl, task_index, abi, caps) -> SpirvTask (serial, one invocation)

For a range task whose `begin` / `end` read globals (`for i in range(n[None])`), this module
evaluates both expressions — the task's own IR, lowered like any task body — and writes the
*range arguments*, u32 words at binding 2 + n (n = len(abi.bindings)), `kernel_ir.abi.RangeArg`:

    [groups x, groups y, groups z, begin, end]

with the workgroup counts covering max(end - begin, 0) invocations of LOCAL_SIZE threads:
x = min(g, 65535), y = ceil(g / 65535), z = 1 for g = ceil(count / LOCAL_SIZE) (every Vulkan
device allows 65,535 groups per dimension; count < 2**31 keeps y far below it). The runtime
dispatches this module, then the task itself with vkCmdDispatchIndirect from the same buffer
(compiled with `device_ranges`, it reads begin / end from words BEGIN / END: see lower.py). No host
round trip, and one index per invocation as for host-evaluated ranges.
"""
from __future__ import annotations

from dataclasses import replace

from kernel_ir.abi import MAX_GROUPS_X, PUSH_CONSTANT_BYTES, RANGE_ARGS_WORDS, RangeArg
from kernel_ir.builder import IRBuilder
from kernel_ir.dtypes import i32
from kernel_ir.nodes import GlobalRef, Task
from kernel_ir.ops import Op
from kernel_ir.rewrite import clone_expr, expr_nodes

from .lower import LOCAL_SIZE, SpirvTask, TaskLowerer

# the range-arguments buffer as a binding of the args module (after the kernel's own bindings)
RANGE_ARGS_REF = GlobalRef("temp", -1, i32, 1, (RANGE_ARGS_WORDS,), "range_args")


def range_args_task(task: Task) -> Task:
    """The serial task computing `task`'s range arguments into RANGE_ARGS_REF."""
    b = IRBuilder()
    b.loc = task.loc
    begin, end = clone_expr(task.begin), clone_expr(task.end)
    for n in expr_nodes(begin) + expr_nodes(end):
        b.append(n)
    c = lambda v: b.const(v, i32)  # noqa: E731
    count = b.binary(Op.MAX, b.binary(Op.SUB, end, begin), c(0))
    some = b.binary(Op.CMP_GT, count, c(0))
    groups = b.select(some, b.binary(Op.ADD, b.binary(Op.FLOORDIV, b.binary(Op.SUB, count, c(1)),
                                                      c(LOCAL_SIZE)), c(1)), c(0))
    gx = b.binary(Op.MIN, groups, c(MAX_GROUPS_X))
    gy = b.select(some, b.binary(Op.ADD, b.binary(Op.FLOORDIV, b.binary(Op.SUB, groups, c(1)),
                                                  c(MAX_GROUPS_X)), c(1)), c(0))
    words = {RangeArg.GROUPS_X: gx, RangeArg.GROUPS_Y: gy, RangeArg.GROUPS_Z: c(1),
             RangeArg.BEGIN: begin, RangeArg.END: end}
    for k in RangeArg:
        b.global_store(RANGE_ARGS_REF, [c(int(k))], words[k])
    return Task("serial", b.finish(), name=(task.name or "task") + "_range", loc=task.loc)


def compile_range_args(tl, task_index: int, abi, caps, bmap=None) -> SpirvTask:
    """`bmap`: the kernel's `buffers.BufferMap` (None: every ref in its own buffer); the range
    arguments are one more own buffer after the kernel's arrays, the binding the task reads."""
    from .buffers import BufferMap
    bmap = (bmap if bmap is not None else BufferMap.own_buffers(abi)).with_own(1)
    t = range_args_task(tl.tasks[task_index])
    abi2 = replace(abi, bindings=abi.bindings + (RANGE_ARGS_REF,))
    lowerer = TaskLowerer(t, task_index, abi2, caps, bmap=bmap)
    words = lowerer.run()
    return SpirvTask(t.name, "serial", words, bmap.end, PUSH_CONSTANT_BYTES, 1,
                     uniform_bindings=caps.profile.uniform_bindings,
                     spec_words=tuple(sorted(lowerer.io.spec_words)))

