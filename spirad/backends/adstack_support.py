"""Backend-side adstack bookkeeping shared by the CPU and Vulkan backends.

Per compiled task: the stacks' entry sizes / kinds / names / source lines (from the ADSTACK_ALLOCA
nodes, in stack order — see the Adstack ABI in `kernel_ir.abi`). Per launch: the layout of the
evaluated capacities (`sizer.compute_layout`) and its metadata words. Heaps grow by amortised
doubling (`max(needed, 2 * current)`) and never shrink.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import sizer as sz

from kernel_ir.errors import SpiradAdStackOverflow
from kernel_ir.abi import adstack_allocas, adstack_kind


@dataclass(frozen=True)
class StackInfo:
    name: str
    dtype: object
    loc: object
    kind: str  # layout kind (`sizer.layout`): 'float', 'primal' (no heap adjoints) or 'int'


def task_stacks(task) -> list:
    return [StackInfo(a.arg.name, a.dtype, a.loc, adstack_kind(a)) for a in adstack_allocas(task)]


def layout_for(stacks, caps) -> sz.Layout:
    return sz.compute_layout(caps, [s.dtype.nbytes for s in stacks], [s.kind for s in stacks])


def meta_words(layout: sz.Layout) -> np.ndarray:
    words = layout.metadata()
    if max(words, default=0) >= 2**32:
        from kernel_ir.errors import SpiradDeviceError
        raise SpiradDeviceError(f"adstack row of {max(words)} bytes does not fit 32-bit offsets")
    return np.array(words or [0, 0], dtype=np.uint32)


def task_plans(adstack, program, make) -> list:
    """Per task of `program`: `make(program, task index, capacities)` for tasks with stacks, else
    None.
    Kept on the launch record (`AdstackLaunch.backend_data`), which reverse mode reuses while
    the capacities stay the same, so a repeated launch derives nothing again."""
    plan = adstack.backend_data
    if plan is None or plan[0] is not program:
        tasks = [make(program, ti, caps) if caps is not None and program.stacks[ti] else None
                 for ti, caps in enumerate(adstack.caps)]
        plan = adstack.backend_data = (program, tasks)
    return plan[1]


def grown(current: int, needed: int) -> int:
    return current if needed <= current else max(needed, 2 * current)


def overflow_error(kernel_name, task_name, stack: StackInfo, stack_index, capacity, required):
    from kernel_ir.source import format_loc
    where = format_loc(stack.loc)
    need = f"; this launch needs {required}" if required is not None else ""
    return SpiradAdStackOverflow(
        f"{where}adstack overflow in kernel {kernel_name} (task {task_name}): the autodiff stack of "
        f"'{stack.name}' (stack {stack_index}) holds {capacity} entries{need}. The gradients "
        f"this launch accumulated are wrong. Raise sd.init(ad_stack_size=...) or leave it at 0 for "
        f"automatic sizing")
