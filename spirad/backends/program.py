"""What every backend keeps of a compiled kernel (`Program`), what it derives from one task's
sized autodiff stacks (`AdstackTaskPlan`), and the one decoder of the status words its tasks
report errors in (`status_error`).

A backend's program class derives from `Program` and adds what only it needs (JIT functions,
pipelines, device code, staging). `Program` holds what the launch path and the error messages
read on every backend: the kernel's name, per task its name, kind and autodiff stacks, the
debug bounds-check description, and the blob the offline cache stores (`export_program`).

`status_error(program, words, ...)` turns the status words a launch left (`kernel_ir.abi`:
codes and word layout) into the user's error: an adstack overflow naming the stack, its
capacity and the size the launch needed, an index out of range naming the field / ndarray, its
shape, the index and the source line (`bounds_support`), the driver's loop cap, or an unknown
code (an internal error). Every backend calls it; none reads the words itself.
"""
from __future__ import annotations

from dataclasses import dataclass

from kernel_ir.abi import (STATUS_ADSTACK_OVERFLOW, STATUS_INDEX_OUT_OF_RANGE, STATUS_LOOP_CAP,
                           STATUS_OK, STATUS_OUT_OF_BOUNDS, decode_status)
from kernel_ir.errors import SpiradDeviceError

from .adstack_support import overflow_error, task_stacks
from .bounds_support import BoundsInfo, index_error, out_of_bounds_error


class Program:
    """The backend-independent part of a compiled kernel."""

    def __init__(self, tl, abi, bounds_check: bool, blob=None):
        self.name = tl.name
        self.task_names = [t.name for t in tl.tasks]
        self.kinds = [t.kind for t in tl.tasks]
        self.stacks = [task_stacks(t) or None for t in tl.tasks]  # per task: [StackInfo] or None
        self.bounds = BoundsInfo(tl, abi) if bounds_check else None
        self.nbind = len(abi.bindings)
        self.bindings = abi.bindings  # what a default bounds-check error names
        self.blob = blob  # the backend's compiled form: what the offline cache stores


@dataclass(frozen=True, slots=True)
class AdstackTaskPlan:
    """What a backend's `plan_adstack` derives from one task's sized stacks: kept on the launch's
    `AdstackPlan` while the sizes stay the same, and read by the backend's `launch`. One record
    for every backend; each fills the fields its launch reads."""
    layout: object              # the sizer's heap layout (strides, metadata words, heap bytes)
    # the metadata words where the kernel reads them: the CPU's address, a CUDA / AMDGPU device
    # buffer, or on SPIR-V the GPU sizer's buffer (None there: upload `words`)
    meta: object = None
    # the metadata words on the host: the CPU's array `meta` points into (kept alive by this
    # record), or on SPIR-V the bytes uploaded when `meta` is None
    words: object = None
    heap_bytes: tuple = (0, 0)  # CPU: float and int heap bytes of all the workers' rows
    row_bytes: int = 0          # SPIR-V: bytes of one thread's larger heap row


def status_error(program: Program, words, argbufs=(), adstack_plans=(), caps=None,
                 required=None):
    """The user error `words` (a launch's status words) report, or None when they report none.

    `argbufs`: the argument buffers of the launches that may have failed (ndarray shapes in
    index errors); `adstack_plans`: their `launch.AdstackPlan`s (an overflow names the largest
    capacity given and the largest size needed among them: the words do not say which launch
    overflowed); `caps`: the device's capabilities (the loop-cap message);
    `required(plan, task, stack)`: how the backend computes a plan's needed size (default
    `plan.required(task, stack)`, which may read device data and so sync; a backend that
    decodes errors while syncing passes one that does not)."""
    st = decode_status(words)
    if st.code == STATUS_OK:
        return None
    names = program.task_names
    task = names[st.task] if 0 <= st.task < len(names) else f"#{st.task}"
    if st.code == STATUS_INDEX_OUT_OF_RANGE and program.bounds is not None:
        return index_error(program.name, names, program.bounds, st, argbufs)
    if st.code == STATUS_OUT_OF_BOUNDS:
        return out_of_bounds_error(program.name, names, program.bindings, st)
    stacks = program.stacks[st.task] if 0 <= st.task < len(program.stacks) else None
    if st.code == STATUS_ADSTACK_OVERFLOW and stacks and adstack_plans:
        cap = max(a.capacity(st.task, st.stack) for a in adstack_plans)
        need = required or (lambda plan, task, stack: plan.required(task, stack))
        req = [need(a, st.task, st.stack) for a in adstack_plans]
        req = max((r for r in req if r is not None), default=None)
        return overflow_error(program.name, task, stacks[st.stack], st.stack, cap, req)
    if st.code == STATUS_LOOP_CAP and caps is not None:
        return SpiradDeviceError(
            f"kernel {program.name} (task {task}) stopped: a single parallel iteration ran more "
            f"than {caps.loop_iteration_cap} loop iterations, the limit of the {caps.name} driver "
            f"(llvmpipe ends every loop of an invocation silently past it; spirad stopped the "
            f"kernel instead of returning a truncated result). Spread the work over more parallel "
            f"iterations, or run this kernel on arch=cpu")
    return SpiradDeviceError(f"kernel {program.name} (task {task}) reported device error code "
                             f"{st.code} ({st.aux})")
