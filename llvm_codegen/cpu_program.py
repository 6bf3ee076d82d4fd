"""Frozen metadata handed from the code generator to the CPU runtime (no IR inside).

The runtime receives `CpuCode.llvm_ir` (text) and the task symbols only. Every task function
has the C signature

    void task(i8** bufs, i8* args, i64 begin, i64 end, i32 worker)

and runs its body for every index in [begin, end) ('range' tasks) or once ('serial' tasks, which
the driver calls with begin=0, end=1). `bufs[k]` is the base address of `abi.bindings[k]`; `args`
is the argument buffer laid out by `kernel_ir.abi`. `worker` is the caller's slot in
[0, num_workers): the row of the adstack heaps the call uses.

A task whose body has ADSTACK_ALLOCA nodes (`CpuTaskInfo.num_adstacks > 0`) also reads, with
n = len(abi.bindings), the buffers `kernel_ir.abi.LLVM_EXTRA_BUFFERS` (the Adstack ABI there):

    bufs[n]     meta        u32 words sizer.Layout.metadata(): [stride_float, stride_int,
                            off_0, cap_0, off_1, cap_1, ...] (2 + 2*num_adstacks words)
    bufs[n+1]   heap_float  rows x stride_float bytes, 8-byte aligned
    bufs[n+2]   heap_int    rows x stride_int bytes, 8-byte aligned
    bufs[n+3]   status      the status words of `kernel_ir.abi` (STATUS_WORDS u32, zeroed by the
                            caller); an overflowing PUSH records STATUS_ADSTACK_OVERFLOW with the
                            task and stack index (first error wins: cmpxchg on word CODE)

with rows >= the number of worker slots a launch uses (`CpuRuntime.num_workers`; 1 for serial
tasks and non-parallel launches). Heap contents need no initialisation and are not needed after
the launch, so one pair of heaps sized for the largest task can serve every task. Tasks without
adstacks never read bufs[n..n+2].

Bounds checks (`compile_tasks(tl, abi, bounds_check=True)`, `CpuCode.bounds_check`): *every*
task then reads the status buffer (bufs[n..n+2] are unused placeholders in a task without
adstacks; the caller may leave them null). Each GLOBAL_LOAD / GLOBAL_STORE / atomic checks every
index against its axis extent (0 <= index < extent, compared in i64: fields use the static
`GlobalRef.shape`, ndarrays the extents in the argument buffer, shapeless temps extent 1). An
out-of-range access is skipped (a load or atomic add yields 0, a store writes nothing) and, first
error wins, records STATUS_INDEX_OUT_OF_RANGE with the words `kernel_ir.abi.StatusWord` lists
(the access site: the position of the access among the task's global accesses in
`walk(task.body)` order, `global_accesses`). Without bounds_check nothing of this is emitted: the
code is exactly the unchecked code. The default checks (`compile_tasks(..., oob_check=True)`,
`CpuCode.oob_check`) read the status buffer too: an out-of-range access (one not proven in
range, `kernel_ir.index_range`) is skipped and records STATUS_OUT_OF_BOUNDS (task, binding).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kernel_ir.abi import LLVM_EXTRA_BUFFERS, STATUS_WORDS  # noqa: F401  (named in the docstring)



@dataclass(frozen=True)
class CpuTaskInfo:
    symbol: str
    kind: str  # 'range' | 'serial'
    num_adstacks: int = 0  # > 0: the task reads the adstack buffers bufs[n..n+3]
    lanes: int = field(default=1, compare=False)  # > 1: SPMD lowering (llvm_codegen.spmd)


@dataclass(frozen=True)
class CpuCode:
    """What `compile_tasks` generates for the CPU: the LLVM IR text and one `CpuTaskInfo` per
    task (named apart from `spirad.backends.cpu.CpuProgram`, the backend's program built on it)."""
    llvm_ir: str
    tasks: tuple  # CpuTaskInfo per task, in TaskList order
    bounds_check: bool = False  # every task reads the status buffer bufs[n+3]
    oob_check: bool = False  # the default checks: every task may write the status buffer too

    @property
    def vectorised(self) -> bool:
        """Every range task runs in SPMD lanes: the IR is vector code already, so the CPU
        runtime optimises it with the lighter pipeline (`cpu_runtime.optimize`)."""
        ranges = [t for t in self.tasks if t.kind == "range"]
        return bool(ranges) and all(t.lanes > 1 for t in ranges)
