"""The reference-interpreter backend: runs kernels with `kernel_ir.interpreter`.

Slow; for tests only (`init(arch="interp")`). It decodes the argument buffer through the ABI like
a real backend, so it also checks the launch path.
"""
from __future__ import annotations

import numpy as np

from kernel_ir.abi import adstack_allocas
from kernel_ir.interpreter import AdStackOverflowError, Memory, run_range, run_task

from .adstack_support import overflow_error, task_stacks
from .base import BackendBase
from .program import Program


class InterpProgram(Program):
    """The interpreter's program: the task list and its ABI, run as they are."""

    def __init__(self, tl, abi):
        super().__init__(tl, abi, bounds_check=False)
        self.tl, self.abi = tl, abi


class InterpBackend(BackendBase):
    name = "interp"

    def __init__(self, state):
        super().__init__(state)
        self.temps = {}

    def allocate(self, nbytes):
        return np.zeros(max(nbytes, 8), dtype=np.uint8)

    def host_storage(self, raw):
        return raw if isinstance(raw, np.ndarray) and raw.dtype == np.uint8 else None

    def view(self, storage, np_dtype, shape):
        n = int(np.prod(shape, dtype=np.int64))
        return storage[: n * np.dtype(np_dtype).itemsize].view(np_dtype).reshape(shape)

    def compile(self, tl, abi):
        return InterpProgram(tl, abi)

    def launch(self, program, storages, argbuf, ranges, adstack=None):
        tl, abi = program.tl, program.abi

        def view(k, ref, shape):
            st = storages[k] if ref.kind in ("field", "ndarray") else \
                self.temps.setdefault((id(program),) + ref.buffer, np.zeros(8, dtype=np.uint8))
            return self.view(st, ref.dtype.np, shape)
        caps = {}
        if adstack is not None:
            for t, sized in zip(tl.tasks, adstack.sized):
                if sized is not None:
                    caps.update(zip(adstack_allocas(t), sized.caps))
        mem = Memory.from_args(abi, tl.args, argbuf, view, capacities=caps)
        for ti, (t, rng) in enumerate(zip(tl.tasks, ranges)):
            try:
                if t.kind == "serial":
                    run_task(t, mem)
                elif rng is None:  # a range read from globals: evaluated when the task starts
                    run_task(t, mem)
                else:
                    run_range(t, mem, *rng)
            except AdStackOverflowError as err:
                k = adstack_allocas(t).index(err.node)
                raise overflow_error(tl.name, t.name, task_stacks(t)[k], k, err.capacity,
                                     adstack.required(ti, k)) from None


Backend = InterpBackend
