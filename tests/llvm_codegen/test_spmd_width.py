"""The SPMD lowering's width is a parameter (engineering 17) and its analysis runs once per task:

- `lltypes` keeps no ambient state: register types, constants and intrinsic suffixes take the
  width explicitly (the function context passes its own);
- compiling and running a kernel and its gradient on the CPU analyses each range task once
  (code generation records the lanes in the program; the backend reads them from there);
- the switches reach the code generator explicitly (`CodegenOptions`), not from the environment.
"""
import inspect

import numpy as np

import spirad as sd
from llvm_codegen import lltypes, spmd
from llvm_codegen.codegen import compile_tasks
from llvm_codegen.options import CodegenOptions


def test_lltypes_has_no_ambient_width():
    src = inspect.getsource(lltypes)
    assert "threading" not in src and "contextmanager" not in src
    from kernel_ir.dtypes import f32
    assert str(lltypes.reg_type(f32)) == "float" and str(lltypes.reg_type(f32, 8)) == "<8 x float>"
    assert lltypes.suffix(f32, 16) == "v16f32"


def test_each_range_task_is_analysed_once(monkeypatch):
    calls = []
    orig = spmd.analyze

    def counted(task, *a, **k):
        calls.append(task.name)
        return orig(task, *a, **k)
    monkeypatch.setattr(spmd, "analyze", counted)
    sd.init(arch=sd.cpu, offline_cache=False)
    x = sd.field(sd.f32, 64, needs_grad=True)
    y = sd.field(sd.f32, 64, needs_grad=True)

    @sd.kernel
    def k(n: sd.i32):
        for i in x:
            v = x[i]
            for _ in range(n):
                v = sd.sin(v)
            y[i] = v

    x.from_numpy(np.linspace(0, 1, 64, dtype=np.float32))
    k(3)
    y.grad.fill(1.0)
    k.grad(3)
    assert len(calls) == 2, calls  # the forward task and the adjoint task, once each


def test_switches_are_passed_explicitly(monkeypatch):
    from tests.llvm_codegen.kit import field, kernel, range_task
    from kernel_ir.abi import kernel_abi
    from kernel_ir.dtypes import f32
    X = field(0, f32, (64,))
    tl = kernel("kw", range_task(lambda b, i: b.global_store(X, [i], b.cast(i, f32)), 0, 64))
    monkeypatch.setenv("SPIRAD_CPU_SPMD", "0")  # read by spirad.options only, not here
    assert compile_tasks(tl, kernel_abi(tl)).tasks[0].lanes > 1
    assert compile_tasks(tl, kernel_abi(tl), options=CodegenOptions(spmd=False)).tasks[0].lanes == 1
    assert compile_tasks(tl, kernel_abi(tl), options=CodegenOptions(lanes=4)).tasks[0].lanes == 4
