"""`freeze` of a masked vector load's result (llvmlite's builder has no `freeze`).

Why: LLVM 22's InstCombine folds `select(m, masked.load(p, m, passthru), x)` into a new
`masked.load(p, m, x)` placed at the select. When a store to p sits between the load and the
select, the new load reads the stored value: a silent wrong result. The SPMD lowering hits that
shape in reverse mode (the store-overwrite rule reads `y.grad[i]`, zeroes it, then uses the
value read under the same mask), e.g. a one-target atomic reduced in registers. Every masked
load / gather of the lane path is frozen: `freeze` of a value that is not poison is the value
itself (no machine code), and InstCombine does not fold through it. Regression test:
tests/llvm_codegen/test_llvm_spmd.py::test_masked_load_select_after_store.
"""
from __future__ import annotations

from llvmlite import ir


def freeze(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    instr = ir.instructions.Instruction(b.block, v.type, "freeze", [v])
    b._insert(instr)
    return instr
