"""Helpers to write kernels by hand with IRBuilder and compare LLVM against the interpreter."""
from __future__ import annotations

import numpy as np

from tests.llvm_codegen.harness import run_interp, run_llvm
from kernel_ir.builder import IRBuilder
from kernel_ir.dtypes import i32
from kernel_ir.nodes import ArgSpec, GlobalRef, Node, Task, TaskList
from kernel_ir.ops import Op
from kernel_ir.verifier import verify_tasks


def leaf_const(v, dt=i32) -> Node:
    return Node(Op.CONST, dt, (), v)


def range_task(build, begin, end, name="t", index_dtype=i32) -> Task:
    """A parallel task over [begin, end); `build(b, i)` emits the body. Bounds: int or Node."""
    b = IRBuilder()
    i = Node(Op.LOOP_INDEX, index_dtype, (), object())
    build(b, i)
    begin = begin if isinstance(begin, Node) else leaf_const(begin, index_dtype)
    end = end if isinstance(end, Node) else leaf_const(end, index_dtype)
    return Task("range", b.finish(), i, begin, end, name=name)


def serial_task(build, name="s") -> Task:
    b = IRBuilder()
    build(b)
    return Task("serial", b.finish(), name=name)


def field(key, dtype, shape, grad=False, name="") -> GlobalRef:
    return GlobalRef("field", key, dtype, len(shape), tuple(shape), name or f"f{key}", grad)


def ndarray(arg, dtype, ndim, grad=False) -> GlobalRef:
    return GlobalRef("ndarray", arg, dtype, ndim, None, f"a{arg}", grad)


def scalar(name, dtype) -> ArgSpec:
    return ArgSpec(name, "scalar", dtype)


def nd_arg(name, dtype, ndim) -> ArgSpec:
    return ArgSpec(name, "ndarray", dtype, ndim)


def kernel(name, *tasks, args=()) -> TaskList:
    return TaskList(name, tuple(args), tuple(tasks))


def key(ref: GlobalRef):
    return (ref.kind, ref.key, ref.grad)


def assert_same(got: dict, want: dict, rtol=0.0, atol=0.0):
    for k, w in want.items():
        g = got[k]
        assert g.dtype == w.dtype, k
        if rtol == 0 and atol == 0 or w.dtype.kind != "f":
            np.testing.assert_array_equal(g, w, err_msg=str(k))
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=str(k))


def check(tl, arrays, scalars=(), rtol=0.0, atol=0.0, parallel=True, verify=True):
    """Verify `tl`, run it on LLVM and on the interpreter, assert equal results; return the
    LLVM arrays."""
    if verify:
        verify_tasks(tl)
    got = run_llvm(tl, arrays, scalars, parallel=parallel)
    want = run_interp(tl, arrays, scalars)
    assert_same(got, want, rtol, atol)
    return got
