"""Backend-side adstack bookkeeping shared by the backends.

Per compiled task: the stacks' entry sizes / kinds / names / source lines (from the ADSTACK_ALLOCA
nodes, in stack order — see the Adstack ABI in `kernel_ir.abi`), for overflow messages. Heaps
grow by amortised doubling (`max(needed, 2 * current)`) and never shrink. (Per launch, the
capacities and their layout come from `spirad.runtime.sizing_cache`.)
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
        f"this launch accumulated are wrong. {_size_option_advice(required)}")


def _size_option_advice(required) -> str:
    """Which init option gave the stack its capacity, and what to do about it: only a forced
    size can overflow (`ad_stack_size` forces every stack; `default_ad_stack_size` sizes the stacks
    whose loop bounds the compiler cannot express)."""
    from ..runtime import state as _state
    opts = _state.current().options
    at_least = f" (at least {required})" if required is not None else ""
    if opts.ad_stack_size:
        return (f"The capacity comes from sd.init(ad_stack_size={opts.ad_stack_size}): raise "
                f"it{at_least}, or remove it (0, the default) for automatic sizing")
    if opts.default_ad_stack_size:
        return (f"The capacity comes from sd.init(default_ad_stack_size="
                f"{opts.default_ad_stack_size}), which sizes stacks whose loop bounds the "
                f"compiler cannot express: raise it{at_least}")
    return "Automatic sizing gave this capacity: this is a bug in spirad, please report it"
