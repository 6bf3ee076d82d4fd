"""Test harness: run a TaskList on a `gfx_runtime` VulkanRuntime and on the IR interpreter.

Not production glue (the driver owns that); it follows the conventions of `spirv_codegen.lower`:
binding 0 = argument buffer filled from the KernelABI, binding 1 = status, binding 2+k =
`abi.bindings[k]`, push constants (begin, end, threads_per_row), `dispatch_geometry`.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from spirad.ir.abi import kernel_abi
from spirad.ir.dtypes import u1
from spirad.ir.interpreter import Memory, cast_value, eval_expr, run_tasks
from spirv_codegen import (STATUS_WORDS, SpirvCaps, compile_tasks, dispatch_geometry, validate)


def runtime_available() -> bool:
    try:
        import gfx_runtime.vulkan.runtime  # noqa: F401
    except Exception:
        return False
    return True


def device_caps(rt, **override) -> SpirvCaps:
    c = SpirvCaps.from_device(rt.caps)
    return SpirvCaps(**{**c.__dict__, **override})


@dataclass
class Result:
    arrays: dict
    status: np.ndarray


def _mem_key(ref):
    return (ref.kind, ref.key, ref.grad)


def _gpu_array(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.astype(np.uint32) if a.dtype == np.bool_ else a


def arg_bytes(tl, abi, scalars, arrays) -> bytes:
    buf = bytearray(abi.arg_buffer_size)
    for i, a in enumerate(tl.args):
        off = abi.arg_offsets[i]
        if off < 0:
            continue
        dt = a.dtype
        v = cast_value(scalars[i], dt)
        if dt == u1:
            struct.pack_into("<I", buf, off, int(bool(v)))
        else:
            buf[off:off + dt.nbytes] = np.asarray(v, dtype=dt.np).tobytes()
    for arg, axis, off in abi.shape_offsets:
        struct.pack_into("<i", buf, off, arrays[("ndarray", arg, False)].shape[axis])
    return bytes(buf)


def run_vulkan(rt, tl, arrays: dict, scalars, caps: SpirvCaps | None = None,
               check_valid: bool = True, max_groups=None) -> Result:
    """Compile and run every task of `tl`; returns the arrays (copies) and the status words."""
    abi = kernel_abi(tl)
    caps = caps or device_caps(rt)
    tasks = compile_tasks(tl, abi, caps)
    if check_valid:
        for t in tasks:
            validate(t.words)
    arrays = {k: np.array(v, copy=True) for k, v in arrays.items()}
    for ref in tl.temps:
        arrays.setdefault(_mem_key(ref), np.zeros(ref.shape or (), dtype=ref.dtype.np))
    mem = Memory(arrays, scalars)
    args = rt.alloc(abi.arg_buffer_size)
    args.write(arg_bytes(tl, abi, scalars, arrays))
    status = rt.alloc(4 * STATUS_WORDS)
    bufs = []
    for ref in abi.bindings:
        a = _gpu_array(arrays[_mem_key(ref)])
        b = rt.alloc(max(a.nbytes, 4))
        if a.nbytes:
            b.write(a.tobytes())
        bufs.append(b)
    max_groups = max_groups or tuple(getattr(rt.caps, "max_compute_work_group_count",
                                             (65535,) * 3))
    for t, st in zip(tl.tasks, tasks):
        pipe = rt.pipeline(st.words, st.num_bindings, st.push_constant_bytes)
        if t.kind == "serial":
            begin = end = 0
            groups, tpr = (1, 1, 1), 1
        else:
            begin, end = int(eval_expr(t.begin, mem)), int(eval_expr(t.end, mem))
            groups, tpr = dispatch_geometry(end - begin, max_groups, st.local_size)
        pc = struct.pack("<iiI", begin, end, tpr)
        rt.dispatch(pipe, [args, status] + bufs, groups, pc)
    rt.flush()
    out = {}
    for ref, b in zip(abi.bindings, bufs):
        k = _mem_key(ref)
        orig = arrays[k]
        a = _gpu_array(orig)
        got = np.frombuffer(b.read(0, a.nbytes).tobytes(), dtype=a.dtype).reshape(a.shape)
        out[k] = got.astype(np.bool_) if orig.dtype == np.bool_ else got.copy()
    for k, v in arrays.items():
        out.setdefault(k, v)
    st_words = np.frombuffer(status.read().tobytes(), dtype=np.uint32).copy()
    for b in [args, status] + bufs:
        b.free()
    return Result(out, st_words)


def run_reference(tl, arrays: dict, scalars) -> dict:
    arrays = {k: np.array(v, copy=True) for k, v in arrays.items()}
    for ref in tl.temps:
        arrays.setdefault(_mem_key(ref), np.zeros(ref.shape or (), dtype=ref.dtype.np))
    run_tasks(tl, Memory(arrays, scalars))
    return arrays


def assert_close(got: dict, want: dict, rtol=1e-5, atol=1e-6, f64_rtol=1e-12, f64_atol=1e-13,
                 what=""):
    for k, w in want.items():
        g = got[k]
        if w.dtype.kind == "f":
            rt_, at_ = (f64_rtol, f64_atol) if w.dtype == np.float64 else (rtol, atol)
            np.testing.assert_allclose(g, w, rtol=rt_, atol=at_, equal_nan=True,
                                       err_msg=f"{what} array {k}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what} array {k}")
