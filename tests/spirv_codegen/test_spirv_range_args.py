"""Device ranges in the SPIR-V code generator: the range-arguments module computes the indirect
dispatch (checked through the IR interpreter for the geometry, spirv-val for the modules), and a
task compiled with `device_ranges` reads its range from binding 2 + n."""
import numpy as np
import pytest

from kernel_ir.abi import kernel_abi
from kernel_ir.builder import IRBuilder
from kernel_ir.dtypes import f32, i32
from kernel_ir.interpreter import Memory, run_task
from kernel_ir.nodes import GlobalRef, Node, Task, TaskList
from kernel_ir.ops import Op
from spirv_codegen import LOCAL_SIZE, SpirvCaps, compile_range_args, compile_tasks, disassemble, validate
from spirv_codegen.range_args import RANGE_ARGS_REF, range_args_task

N_REF = GlobalRef("field", 7, i32, 0, (), "n")
OUT = GlobalRef("field", 8, f32, 1, (16,), "out")


def _task():
    b = IRBuilder()
    begin = Node(Op.CONST, i32, (), 2)
    end = Node(Op.GLOBAL_LOAD, i32, (), N_REF)
    idx = Node(Op.LOOP_INDEX, i32, (), object())
    b.global_store(OUT, [idx], b.const(1.0, f32))
    return Task("range", b.finish(), idx, begin, end, "t")


@pytest.mark.parametrize("n", [-5, 0, 2, 3, 66, 67, 2 + 64 * 65535, 3 + 64 * 65535, 5_000_000])
def test_range_args_geometry(n):
    t = range_args_task(_task())
    words = np.zeros(5, np.int32)
    mem = Memory({N_REF.buffer: np.array(n, np.int32), RANGE_ARGS_REF.buffer: words})
    run_task(t, mem)
    count = max(n - 2, 0)
    gx, gy, gz, begin, end = (int(w) for w in words)
    assert (begin, end, gz) == (2, n, 1)
    assert gx <= 65535 and gy <= 65535
    assert gx * gy * LOCAL_SIZE >= count                     # every index gets an invocation
    assert (gx * gy == 0) == (count == 0)
    assert (gx * (gy - 1)) * LOCAL_SIZE < max(count, 1)      # no whole row of groups wasted


def test_modules_validate_and_bind_the_range_arguments():
    t = _task()
    tl = TaskList("k", (), (t,))
    abi = kernel_abi(tl)
    assert N_REF in abi.bindings                              # a bound's ref is bound
    caps = SpirvCaps()
    (task,) = compile_tasks(tl, abi, caps, device_ranges={0})
    args = compile_range_args(tl, 0, abi, caps)
    n = len(abi.bindings)
    assert task.device_range and task.num_bindings == 2 + n + 1
    assert args.kind == "serial" and args.num_bindings == 2 + n + 1
    for m in (task, args):
        validate(m.words)
    text = disassemble(task.words)
    assert "NumWorkgroups" in text and f"Binding {2 + n}" in text
    (plain,) = compile_tasks(tl, abi, caps)                    # host-given range: push constants
    assert not plain.device_range and plain.num_bindings == 2 + n
    assert f"Binding {2 + n}" not in disassemble(plain.words)
