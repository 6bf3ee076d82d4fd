"""Hand-built IR kernels for the SPIR-V tests (IRBuilder only; no frontend).

Each builder returns `(tl, arrays, scalars)` ready for `spv_harness.run_vulkan` /
`run_reference`: ndarray arguments are keyed ('ndarray', arg index, False).
"""
from __future__ import annotations

import numpy as np

from kernel_ir.builder import IRBuilder
from kernel_ir.dtypes import f32, f64, i32, i64, u1, u32
from kernel_ir.nodes import ArgSpec, GlobalRef, Node, Task, TaskList
from kernel_ir.ops import Op


def nd(key: int, dt, ndim: int = 1, name: str = "") -> GlobalRef:
    return GlobalRef("ndarray", key, dt, ndim, name=name or f"a{key}")


def index_node(dt=i32) -> Node:
    return Node(Op.LOOP_INDEX, dt, (), object())


def range_task(body, idx, n_ref_arg: int | None = None, n: int | None = None, name="t"):
    b = IRBuilder()
    begin = b.const(0, i32)
    end = b.emit(Op.NDARRAY_SHAPE, i32, (), (n_ref_arg, 0)) if n is None else b.const(n, i32)
    return Task("range", body, idx, begin, end, name)


def elementwise(op: Op, in_dts, out_dt, inputs, kind="unary"):
    """out[i] = op(in0[i], in1[i], ...) over ndarrays; returns (tl, arrays, scalars)."""
    nin = len(in_dts)
    args = tuple(ArgSpec(f"x{k}", "ndarray", d, 1) for k, d in enumerate(in_dts))
    args += (ArgSpec("out", "ndarray", out_dt, 1),)
    refs = [nd(k, d) for k, d in enumerate(in_dts)]
    out = nd(nin, out_dt, name="out")
    b = IRBuilder()
    i = index_node()
    xs = [b.global_load(r, [i]) for r in refs]
    if op == Op.CAST:
        v = b.cast(xs[0], out_dt)
    elif op == Op.SELECT:
        v = b.select(*xs)
    elif len(xs) == 1:
        v = b.unary(op, xs[0])
    else:
        v = b.binary(op, xs[0], xs[1])
    b.global_store(out, [i], v)
    task = range_task(b.finish(), i, n_ref_arg=nin)
    tl = TaskList(f"ew_{op.name.lower()}", args, (task,))
    n = len(inputs[0])
    arrays = {("ndarray", k, False): np.asarray(inputs[k], dtype=_np(d))
              for k, d in enumerate(in_dts)}
    arrays[("ndarray", nin, False)] = np.zeros(n, dtype=_np(out_dt))
    return tl, arrays, [None] * (nin + 1)


def _np(dt):
    return np.bool_ if dt == u1 else dt.np


__all__ = ["nd", "index_node", "range_task", "elementwise", "IRBuilder", "ArgSpec", "GlobalRef",
           "Task", "TaskList", "Op", "f32", "f64", "i32", "i64", "u1", "u32"]
