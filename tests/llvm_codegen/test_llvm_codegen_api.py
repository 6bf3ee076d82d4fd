"""compile_tasks' contract: one function per task with the C signature, table coverage, errors."""
from __future__ import annotations

import numpy as np
import pytest

from tests.llvm_codegen.kit import field, kernel, range_task, serial_task
from llvm_codegen.codegen import LOWER, compile_tasks
from llvm_codegen.cpu_program import CpuCode, CpuTaskInfo
from kernel_ir.abi import kernel_abi
from kernel_ir.dtypes import f32, i32
from kernel_ir.nodes import AdStackArg
from kernel_ir.mathfns import MATH
from kernel_ir.ops import Op


def test_every_op_has_a_lowering_rule():
    """Except the math functions spirad expands into other ops before code generation
    (`kernel_ir.mathfns` records with `expand`, `passes.expand_math`)."""
    expanded = {f.op for f in MATH if f.expand is not None}
    assert [op.name for op in Op if op not in LOWER and op not in expanded] == []


def _simple():
    OUT = field(0, f32, (4,))
    return kernel("my kernel!", range_task(lambda b, i: b.global_store(OUT, [i], b.cast(i, f32)),
                                           0, 4, name="loop"),
                  serial_task(lambda b: None))


def test_program_shape_and_signature():
    tl = _simple()
    prog = compile_tasks(tl, kernel_abi(tl))
    assert isinstance(prog, CpuCode)
    assert prog.tasks == (CpuTaskInfo("spirad_my_kernel__0_loop", "range"),
                          CpuTaskInfo("spirad_my_kernel__1_s", "serial"))
    for t in prog.tasks:
        assert f'define void @"{t.symbol}"(ptr %"bufs", ptr %"args", i64 %"begin", i64 %"end", ' \
               f'i32 %"worker")' in prog.llvm_ir
    assert "fast" not in prog.llvm_ir and "contract" not in prog.llvm_ir


def test_same_kernel_loads_twice():
    """Two modules exporting the same symbols live side by side in the JIT."""
    from tests.llvm_codegen.harness import run_llvm
    tl = _simple()
    for _ in range(2):
        got = run_llvm(tl, {("field", 0, False): np.zeros(4, np.float32)})
        assert got[("field", 0, False)].tolist() == [0, 1, 2, 3]


def test_adstack_op_outside_a_stack_names_the_op():
    """(ADSTACK_* lowering is tested in test_llvm_adstack.py.)"""
    def body(b):
        b.emit(Op.ADSTACK_PUSH, None, (), AdStackArg("s"))

    tl = kernel("ad", serial_task(body))
    with pytest.raises(RuntimeError, match="ADSTACK_PUSH does not address an ADSTACK_ALLOCA"):
        compile_tasks(tl, kernel_abi(tl))


def test_unsupported_op_dtype_names_the_op():
    def body(b):
        b.unary(Op.SIN, b.const(1, i32))

    tl = kernel("bad", serial_task(body))
    with pytest.raises(RuntimeError, match="SIN on i32"):
        compile_tasks(tl, kernel_abi(tl))


def test_break_outside_loop_is_an_error():
    tl = kernel("brk", serial_task(lambda b: b.break_()))
    with pytest.raises(RuntimeError, match="BREAK outside a loop"):
        compile_tasks(tl, kernel_abi(tl))
