"""How a large CPU module is compiled: LLVM's speed level 2; a huge one at level 3 without the
SLP vectoriser and with the register allocator's smaller budget; versioned loops' checked
copies (`cold_copy`) outside the optimisation pipeline, with light passes of their own
(`checked_copies`, `release_checked_copies`, `light_passes`: the docstring of `cold_copy`).

**Speed level 2 for large modules.** A module whose LLVM IR exceeds `CodegenOptions.large_ir`
bytes (500,000 by default: Genesis' ndarray-mode step kernels, 0.5 to 2.2 MB each) and is not
huge (below) goes through LLVM's `-O2` pipeline instead of `-O3`. The difference that costs
compile time is `-O3`'s non-trivial loop unswitching (a loop copied per invariant branch; the
largest pass of these modules after the register allocator: 3.9 of 38 s in `-time-passes` over
a box scene's kernels without `kernel_detection`); both levels keep the loop and SLP
vectorisers. Genesis' box scene, ndarray mode: optimisation of the modules of 0.5 to 2.2 MB
19.3 -> 14.2 s of CPU, their machine code 12.8 -> 12.1 s, and their launches no slower. A huge
module keeps `-O3`: `kernel_detection` (6.6 MB, the narrow phase) launched in 38-40 us at `-O3`
and 41-50 us at `-O2` (`n_envs` 256, fastest of 100), while `-O2` saved only 1.4 of its 11.8 s
of optimisation (docs/performance.md, "Building a Genesis scene"). Smaller modules keep `-O3`
too (their compile is cheap either way). Neither level uses fast-math flags, so both compute
the same values. The level changes the machine code: `large_ir` is part of the offline-cache
key (`CodegenOptions.key`).

**No SLP vectoriser for huge modules.** The SLP vectoriser (straight-line code packed into
vector instructions) was 3.7 s of `kernel_detection`'s optimisation; that module (one serial
narrow phase per environment) compiled without it: optimisation 11.8 -> 9.2 s of CPU, machine
code 7.0 -> 6.5 s (standalone, the same IR), and launched in the same 37-38 us (`n_envs` 256,
fastest of 100, three rounds alternating). Without fast-math flags SLP never reorders a
reduction, so it computes the same values; `huge_ir` is in the offline-cache key.

**The register allocator's budget for huge functions.**

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
`huge_ir` is part of the offline-cache key too (another allocation is other machine code).

The budget is a process-wide LLVM option: it is set for the one compile and restored after it,
under a lock, so two threads never compile a huge module at once with each other's setting (a
smaller module compiled meanwhile by another thread may see the lower budget: a different
allocation, the same results).
"""
from __future__ import annotations

import contextlib
import re
import threading

BUDGET_OPTION = "-grow-region-complexity-budget"
DEFAULT_BUDGET = 10_000  # LLVM's own default
HUGE_BUDGET = 100
LARGE_SPEED_LEVEL = 2  # LLVM's -O2 for a module over `large_ir` bytes; -O3 below

_lock = threading.Lock()


def speed_level(llvm_ir: str, large_ir: int, huge_ir: int) -> int:
    """LLVM's speed level for a module of this LLVM IR text: `LARGE_SPEED_LEVEL` over
    `large_ir` bytes unless `is_huge`, else 3 (`large_ir` 0: always 3)."""
    large = large_ir > 0 and len(llvm_ir) > large_ir
    return LARGE_SPEED_LEVEL if large and not is_huge(llvm_ir, huge_ir) else 3


def slp(llvm_ir: str, huge_ir: int) -> bool:
    """Does a module of this LLVM IR text get the SLP vectoriser (not where `is_huge`)?"""
    return not is_huge(llvm_ir, huge_ir)


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


SUFFIX = ".checked."
"""The name of a versioned loop's checked copy: `<task function>.checked.<k>` (`cold_copy`)."""

LIGHT_PASSES = ("sroa", "instruction_combine", "simplify_cfg")
"""What a checked copy gets instead of the optimisation pipeline: its locals promoted to SSA
values (`sroa`), one instcombine and one CFG simplification."""

_HELD = re.compile(r"^(attributes #\d+ = \{[^}]*)\boptnone\b", re.M)


def checked_copies(mod) -> list:
    """The names of the checked copies defined in `mod` (llvmlite module), each marked
    `optnone` so that the optimisation pipeline skips it (`release_checked_copies` after)."""
    names = [f.name for f in mod.functions if SUFFIX in f.name and not f.is_declaration]
    for n in names:
        mod.get_function(n).add_function_attribute("optnone")
    return names


def release_checked_copies(optimized_ir: str) -> str:
    """The optimised module's text with the checked copies' `optnone` (the only one spirad
    emits) replaced by `minsize optsize`: their machine code is then LLVM's usual (`optnone`
    would also take the fast instruction selector and register allocator)."""
    return _HELD.sub(r"\1minsize optsize", optimized_ir)


def light_passes(mod, names, pass_builder) -> None:
    """`LIGHT_PASSES` over the functions `names` of `mod` that are still there (the pipeline
    deletes a copy whose call it proved dead: a guard it folded to true)."""
    import llvmlite.binding as llvm
    fpm = llvm.create_new_function_pass_manager()
    for p in LIGHT_PASSES:
        getattr(fpm, f"add_{p}_pass")()
    names = set(names)
    for f in mod.functions:
        if f.name in names and not f.is_declaration:
            fpm.run(f, pass_builder)
