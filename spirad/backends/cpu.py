"""CPU backend: LLVM code from `llvm_codegen`, run by its JIT runtime over a thread pool.

Fields and ndarrays are numpy-owned byte arrays passed to task functions by pointer; kernel
temporaries are small arrays owned by the compiled program.
"""
from __future__ import annotations

import ctypes

import numpy as np


def is_available() -> bool:
    try:
        import llvmlite  # noqa: F401
        return True
    except ImportError:
        return False


def unavailable_reason() -> str:
    return "llvmlite is not installed (pip install llvmlite)"


def create(state):
    return CpuBackend(state)


class CpuProgram:
    def __init__(self, fns, kinds, temps, nbind):
        self.fns, self.kinds, self.temps = fns, kinds, temps
        self.bufs = (ctypes.c_void_p * max(nbind, 1))()


class CpuBackend:
    name = "cpu"

    def __init__(self, state):
        from llvm_codegen.cpu_runtime import CpuRuntime
        n = state.options.get("cpu_max_num_threads")
        self.rt = CpuRuntime(num_workers=n)

    def allocate(self, nbytes):
        return np.zeros(max(int(nbytes), 8), dtype=np.uint8)

    def view(self, storage, np_dtype, shape):
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(np_dtype).itemsize
        return storage[:n].view(np_dtype).reshape(shape)

    def compile(self, tl, abi):
        from llvm_codegen.codegen import compile_tasks
        prog = compile_tasks(tl, abi)
        mod = self.rt.load(prog.llvm_ir, [t.symbol for t in prog.tasks])
        fns = [mod.function(t.symbol) for t in prog.tasks]
        temps = {k: np.zeros(8, np.uint8) for k, r in enumerate(abi.bindings) if r.kind == "temp"}
        p = CpuProgram(fns, [t.kind for t in prog.tasks], temps, len(abi.bindings))
        p.module = mod  # keep the JIT code alive
        return p

    def launch(self, program, storages, argbuf, ranges):
        bufs = program.bufs
        for k, st in enumerate(storages):
            bufs[k] = (st if st is not None else program.temps[k]).ctypes.data
        args = ctypes.c_char_p(argbuf)
        addr = ctypes.cast(args, ctypes.c_void_p).value
        run = self.rt.run
        for fn, kind, (b, e) in zip(program.fns, program.kinds, ranges):
            if e > b:
                run(fn, bufs, addr, b, e, kind == "range")

    def sync(self):
        pass

    def close(self):
        self.rt.close()
