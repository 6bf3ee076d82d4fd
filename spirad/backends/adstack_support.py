"""Backend-side adstack bookkeeping shared by the backends.

Per compiled task: the stacks' entry sizes / kinds / names / source lines (from the ADSTACK_ALLOCA
nodes, in stack order — see the Adstack ABI in `kernel_ir.abi`), for overflow messages. Heaps
grow by amortised doubling (`max(needed, 2 * current)`) and never shrink. (Per launch, the
capacities and their layout come from `spirad.sizing_cache`.)
"""
from __future__ import annotations

from dataclasses import dataclass

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
