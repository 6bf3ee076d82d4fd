"""Parallel loops whose bounds read device data: `for i in range(n[None])`, `range(a[0], b[0])`,
`m = n[None]` ... `range(m)` (a kernel temporary).

Such a range task's `begin` / `end` are IR expressions with GLOBAL_LOADs (`abi.device_ranges`);
the launch path cannot evaluate them when it plans a launch (`LaunchPlan.ranges[task]` is None)
because they must be read when the task starts: after the earlier tasks of the same launch (and
every earlier launch) have run. What each backend does with them:

* cpu: memory is host memory and tasks run one after the other, so the backend evaluates the
  bounds on the host right before the task (`HostBounds`): free.
* interp: evaluates them with the reference interpreter when the task starts.
* vulkan: on the device, without a host round trip: a one-invocation module
  (`spirv_codegen.compile_range_args`) evaluates the bounds and writes [groups x, y, z, begin,
  end] to a small buffer; the task is dispatched with vkCmdDispatchIndirect from it and reads
  begin / end from it (binding 2 + n), one index per invocation as always (lavapipe's loop cap
  is never approached). Tasks with adstacks run in chunks whose size the host must know, and
  debug mode wants bounds-check errors with the bound's source, so those evaluate on the host
  after flushing the queued work (`HostBounds`).
* a new backend (Metal through wgpu: the Vulkan path with `dispatch_workgroups_indirect`;
  CUDA / AMDGPU: a host read after the stream's work, or a device-side grid computed by a
  one-thread kernel) must handle `ranges[task] is None` one of these ways.

The adstack sizer sees the same bounds: a reverse-mode task's capacity is maximised over its
launched index range (`MaxOverRange(task index, FieldLoad / NdarrayRead bounds, ...)`), which the
host or GPU sizer evaluates at each launch.
"""
from __future__ import annotations

from kernel_ir.errors import SpiradValueError
from kernel_ir.interpreter import Memory, eval_expr
from kernel_ir.ops import Op
from kernel_ir.rewrite import expr_nodes
from kernel_ir.source import user_error

class HostBounds:
    """Evaluates one task's bounds on the host, reading the bound buffers through `view`."""

    def __init__(self, tl, task, abi):
        self.tl, self.task, self.abi = tl, task, abi
        refs = {n.arg.buffer: n.arg for b in (task.begin, task.end) for n in expr_nodes(b)
                if n.op == Op.GLOBAL_LOAD}
        self.refs = tuple((abi.binding_index(r), r) for r in refs.values())

    def evaluate(self, argbuf: bytes, view) -> tuple:
        """(begin, end); `view(binding index, ref, shape)` -> a numpy array of the ref's dtype
        with that shape over the live memory (pending work finished)."""
        mem = Memory.from_args(self.abi, self.tl.args, argbuf, view, refs=self.refs)
        try:
            return int(eval_expr(self.task.begin, mem)), int(eval_expr(self.task.end, mem))
        except IndexError:
            bad = [f"'{r.name}'" for _, r in self.refs]
            raise user_error(SpiradValueError, f"kernel {self.tl.name}: the range of this "
                             f"parallel loop reads {', '.join(bad)} at an index outside its "
                             f"shape", self.task.loc) from None
