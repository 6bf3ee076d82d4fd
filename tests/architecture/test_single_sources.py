"""Meanings the duplicates report found written more than once, now written once (issue 27):

- which dtype a Python type names (`float` -> the default float, `int`, `bool`):
  `kernel_ir.dtypes.from_python`, not `x is float` tests across the frontend;
- how LLVM code records an error in the status words (cmpxchg of word CODE, the winner writes
  the rest): `llvm_codegen.lower_memory.status_helper`;
- how a launch's argument buffer becomes interpreter memory (bindings with their shapes):
  `kernel_ir.interpreter.Memory.from_args`, used by the interpreter backend and host ranges;
- how each math function is lowered (native / mathlib / expanded):
  `kernel_ir.mathfns.MathFn.lowering`, the code generators' tables built from it (issue 40).
"""
import re

from tests.architecture.import_graph import ROOT

PACKAGES = ("spirad", "kernel_ir", "passes", "llvm_codegen", "spirv_codegen", "sizer", "gfx_runtime")


def _sources():
    for d in PACKAGES:
        for p in sorted((ROOT / d).rglob("*.py")):
            yield p, p.read_text(encoding="utf-8")


def _where(pattern, allowed):
    rx = re.compile(pattern)
    return [f"{p.relative_to(ROOT)}:{i}" for p, text in _sources()
            if str(p.relative_to(ROOT)) not in allowed
            for i, line in enumerate(text.splitlines(), 1) if rx.search(line)]


def test_python_types_map_to_dtypes_in_one_place():
    bad = _where(r"(?<!\)) is (float|int)\b", {"kernel_ir/dtypes.py"})
    assert not bad, f"use kernel_ir.dtypes.from_python: {bad}"


def test_llvm_status_words_are_claimed_in_one_place():
    bad = _where(r"cmpxchg\(.*STATUS|StatusWord\.CODE", {"llvm_codegen/lower_memory.py"})
    bad = [b for b in bad if b.startswith("llvm_codegen/")]
    assert not bad, f"use llvm_codegen.lower_memory.status_helper: {bad}"


def test_argument_buffers_become_interpreter_memory_in_one_place():
    bad = _where(r"\bunpack_args\(", {"kernel_ir/abi.py", "kernel_ir/interpreter.py"})
    assert not bad, f"use kernel_ir.interpreter.Memory.from_args: {bad}"


# the code generators' own rules for math functions: sqrt's and log's domain guards, rsqrt as a
# division, and the CPU's one shared body for the sin and cos of one value
MATH_RULES = {"SQRT": {"spirv_codegen/lower_math.py", "llvm_codegen/lower_ops.py"},
              "RSQRT": {"spirv_codegen/lower_math.py", "llvm_codegen/lower_ops.py"},
              "LOG": {"spirv_codegen/lower_math.py"},
              "SIN": {"llvm_codegen/spmd.py"}, "COS": {"llvm_codegen/spmd.py"}}


def test_math_lowering_is_decided_by_the_records():
    """`kernel_ir.mathfns` says how each math function is lowered (`lowering`: native / mathlib /
    expanded) and the code generators build their tables from it: they name a function's op only
    for a rule of their own (`MATH_RULES`), so a new native function is its record, its `Op`, its
    `kernel_ir.mathlib` algorithm and its public name."""
    from kernel_ir.mathfns import MATH
    gens = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8"))
            for d in ("spirv_codegen", "llvm_codegen") for p in sorted((ROOT / d).rglob("*.py"))]
    bad = [f"{fn.name}: {path}" for fn in MATH for path, text in gens
           if re.search(rf"\bOp\.{fn.op.name}\b", text)
           and path not in MATH_RULES.get(fn.op.name, ())]
    assert not bad, f"lowered by hand, not from kernel_ir.mathfns: {bad}"
