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
        return (tl, abi)

    def launch(self, program, storages, argbuf, ranges, adstack=None):
        tl, abi = program
        scalars, shapes = abi.unpack_args(tl.args, argbuf)
        arrays = {}
        for ref, st in zip(abi.bindings, storages):
            if ref.kind == "field":
                shape = ref.shape
            elif ref.kind == "ndarray":
                shape = tuple(shapes[ref.key][ax] for ax in range(ref.ndim))
            else:
                shape = (1,)
                st = self.temps.setdefault((id(program),) + ref.buffer, np.zeros(8, dtype=np.uint8))
            arrays[ref.buffer] = self.view(st, ref.dtype.np, shape)
        for a, axes in shapes.items():
            key = ("ndarray", a, False)
            if key not in arrays:  # shape queried but never indexed
                arrays[key] = np.zeros(tuple(axes[k] for k in range(len(axes))), dtype=np.uint8)
        caps = {}
        if adstack is not None:
            for t, sized in zip(tl.tasks, adstack.sized):
                if sized is not None:
                    caps.update(zip(adstack_allocas(t), sized.caps))
        mem = Memory(arrays, scalars, caps)
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
