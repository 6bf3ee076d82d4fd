"""Run a TaskList through the LLVM CPU backend or the reference interpreter on numpy arrays.

This is what the production driver does for a CPU launch: build the argument buffer from the
`KernelABI` (scalars at `arg_offsets`, ndarray extents at `shape_offsets`), pass one base address
per binding, evaluate each task's bounds on the host and call the task function.
"""
from __future__ import annotations

import ctypes

import numpy as np

from llvm_codegen.codegen import compile_tasks
from llvm_codegen.cpu_runtime import CpuRuntime
from spirad.ir.abi import kernel_abi
from spirad.ir.interpreter import Memory, cast_value, eval_expr, run_tasks

_RUNTIME = None


def runtime() -> CpuRuntime:
    global _RUNTIME
    if _RUNTIME is None:
        _RUNTIME = CpuRuntime()
    return _RUNTIME


def with_temps(tl, arrays):
    arrays = {k: v.copy() for k, v in arrays.items()}
    for ref in tl.temps:
        key = (ref.kind, ref.key, ref.grad)
        if key not in arrays:
            arrays[key] = np.zeros(ref.shape or (1,) * max(ref.ndim, 1), ref.dtype.np)
    return arrays


def build_args(tl, abi, arrays, scalars) -> np.ndarray:
    buf = np.zeros(abi.arg_buffer_size, np.uint8)
    for i, spec in enumerate(tl.args):
        off = abi.arg_offsets[i]
        if off >= 0:
            v = cast_value(scalars[i], spec.dtype)
            np_dt = spec.dtype.np  # u1 -> uint32 0/1, like memory
            buf[off:off + np_dt.itemsize] = np.array([v], np_dt).view(np.uint8)
    for arg, axis, off in abi.shape_offsets:
        ext = arrays[("ndarray", arg, False)].shape[axis]
        buf[off:off + 4] = np.array([ext], np.int32).view(np.uint8)
    return buf


def compile_and_load(tl):
    abi = kernel_abi(tl)
    prog = compile_tasks(tl, abi)
    mod = runtime().load(prog.llvm_ir, [t.symbol for t in prog.tasks])
    return abi, prog, mod


def run_llvm(tl, arrays, scalars=(), loaded=None, parallel=True):
    """Run `tl` on copies of `arrays` ({(kind, key, grad): ndarray}); returns the arrays."""
    arrays = with_temps(tl, arrays)
    abi, prog, mod = loaded or compile_and_load(tl)
    for a in arrays.values():
        assert a.flags.c_contiguous
    bufs = (ctypes.c_void_p * max(len(abi.bindings), 1))(
        *[arrays[(r.kind, r.key, r.grad)].ctypes.data for r in abi.bindings])
    args = build_args(tl, abi, arrays, scalars)
    mem = Memory(arrays, scalars)
    rt = runtime()
    for task, info in zip(tl.tasks, prog.tasks):
        fn = mod.function(info.symbol)
        if task.kind == "serial":
            rt.run(fn, bufs, args, 0, 1, parallel=False)
        else:
            begin, end = int(eval_expr(task.begin, mem)), int(eval_expr(task.end, mem))
            rt.run(fn, bufs, args, begin, end, parallel=parallel)
    return arrays


def run_interp(tl, arrays, scalars=()):
    arrays = with_temps(tl, arrays)
    run_tasks(tl, Memory(arrays, scalars))
    return arrays
