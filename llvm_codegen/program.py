"""Frozen metadata handed from the code generator to the CPU runtime (no IR inside).

The runtime receives `CpuProgram.llvm_ir` (text) and the task symbols only. Every task function
has the C signature

    void task(i8** bufs, i8* args, i32 begin, i32 end, i32 worker)

and runs its body for every index in [begin, end) ('range' tasks) or once ('serial' tasks, which
the driver calls with begin=0, end=1). `bufs[k]` is the base address of `abi.bindings[k]`; `args`
is the argument buffer laid out by `spirad.ir.abi`. `worker` is the caller's slot in
[0, num_workers) (reserved for per-thread adstack heap rows).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CpuTaskInfo:
    symbol: str
    kind: str  # 'range' | 'serial'


@dataclass(frozen=True)
class CpuProgram:
    llvm_ir: str
    tasks: tuple  # CpuTaskInfo per task, in TaskList order
