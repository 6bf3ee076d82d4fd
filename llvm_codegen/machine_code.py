"""The register allocator's budget for huge functions (machine code of a CPU module).

Machine code of a huge serial task is mostly LLVM's greedy register allocator: Genesis'
ndarray-mode `kernel_detection` (the whole convex narrow phase in one function, 6.6 MB of LLVM
IR) spent 34.5 of its 47 s of machine code there (`-time-passes`), growing split regions for
live ranges that cross thousands of blocks. `-grow-region-complexity-budget` (LLVM's default
10,000) bounds that search per live range; past the budget the allocator spills the range
instead of splitting it further. A lower budget for modules whose LLVM IR exceeds
`CodegenOptions.huge_ir` bytes (Genesis' box scene: only `kernel_detection`; the next largest
kernel has 3.5 MB) cuts that kernel's machine code 47 -> 18 s of CPU, leaves every smaller
module's code as it was, and changes no result (register allocation decides where values live,
never what is computed). Measured in docs/performance.md ("Building a Genesis scene").

The budget is a process-wide LLVM option: it is set for the one compile and restored after it,
under a lock, so two threads never compile a huge module at once with each other's setting (a
smaller module compiled meanwhile by another thread may see the lower budget: a different
allocation, the same results). Not part of the offline-cache key (`CodegenOptions.key`).
"""
from __future__ import annotations

import contextlib
import threading

BUDGET_OPTION = "-grow-region-complexity-budget"
DEFAULT_BUDGET = 10_000  # LLVM's own default
HUGE_BUDGET = 100

_lock = threading.Lock()


def is_huge(llvm_ir: str, huge_ir: int) -> bool:
    """Does a module of this LLVM IR text get the huge-function budget (`huge_ir` 0: never)?"""
    return huge_ir > 0 and len(llvm_ir) > huge_ir


@contextlib.contextmanager
def budget_for(llvm_ir: str, huge_ir: int):
    """Compile inside this block: with `HUGE_BUDGET` where `is_huge`, else LLVM's default."""
    if not is_huge(llvm_ir, huge_ir):
        yield
        return
    import llvmlite.binding as llvm
    with _lock:
        llvm.set_option("spirad", f"{BUDGET_OPTION}={HUGE_BUDGET}")
        try:
            yield
        finally:
            llvm.set_option("spirad", f"{BUDGET_OPTION}={DEFAULT_BUDGET}")
