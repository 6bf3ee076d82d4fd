"""The LLVM side module: spirad IR -> LLVM IR text (codegen) and a CPU JIT runtime.

Nothing is imported eagerly: `llvm_codegen.cpu_runtime` must stay importable without `kernel_ir`
(runtimes never see the IR), so the code generator is loaded only when asked for.

    from llvm_codegen import compile_tasks        # IR -> CpuCode (llvm_ir text + task symbols)
    from llvm_codegen.cpu_runtime import CpuRuntime
"""
from __future__ import annotations

_LAZY = {
    "compile_tasks": ("llvm_codegen.codegen", "compile_tasks"),
    "CpuCode": ("llvm_codegen.cpu_program", "CpuCode"),
    "CpuTaskInfo": ("llvm_codegen.cpu_program", "CpuTaskInfo"),
    "CpuRuntime": ("llvm_codegen.cpu_runtime", "CpuRuntime"),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'llvm_codegen' has no attribute {name!r}")
