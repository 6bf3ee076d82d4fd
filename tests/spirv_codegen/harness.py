"""Test harness: run a TaskList on a `gfx_runtime` VulkanRuntime and on the IR interpreter.

Not production glue (the driver owns that); it follows the conventions of `spirv_codegen.lower`:
binding 0 = argument buffer filled from the KernelABI, binding 1 = status, binding 2+k =
`abi.bindings[k]`, push constants (begin, end, threads_per_row), `dispatch_geometry`.

Tasks with adstacks (`SpirvTask.adstacks` non-empty) additionally get the three buffers of the
Adstack ABI (`AdStackHeaps`, the runtime-side helper the production backend mirrors) and are
dispatched in chunks of at most `rows` threads (`adstack_dispatches`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sizer.layout import Layout, compute_layout
from kernel_ir.abi import adstack_allocas, kernel_abi
from kernel_ir.interpreter import Memory, cast_value, eval_expr, run_tasks
from kernel_ir.abi import STATUS_WORDS, pack_push_constants
from spirv_codegen import SpirvCaps, compile_tasks, dispatch_geometry, validate


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
    adstack: dict = None  # task index -> AdStackSnapshot (tasks with adstacks only)


# -- adstack: the runtime side of the Adstack ABI (kernel_ir/abi.py, spirv_codegen/adstack.py) --
def adstack_layout(stack_dtypes, capacities, kinds=None) -> Layout:
    """`sizer.compute_layout` for stacks of these dtypes (`SpirvTask.adstacks`), capacities and
    layout kinds (`SpirvTask.adstack_kinds`; default: 'float' / 'int' by dtype)."""
    caps = [int(c) for c in capacities]
    if len(caps) != len(stack_dtypes):
        raise ValueError(f"{len(stack_dtypes)} adstacks but {len(caps)} capacities")
    if not kinds:
        kinds = ["float" if dt.is_float else "int" for dt in stack_dtypes]
    return compute_layout(caps, [dt.nbytes for dt in stack_dtypes], kinds)


@dataclass
class AdStackSnapshot:
    layout: Layout
    rows: int
    meta: np.ndarray        # u32 words as bound
    heap_float: np.ndarray  # u32 words of the whole buffer (rows * stride + guard)
    heap_int: np.ndarray


class AdStackHeaps:
    """The three extra buffers of one launch of a task with adstacks, in binding order
    (2+n meta, 3+n AdStackHeapFloat, 4+n AdStackHeapInt).

    meta = `layout.metadata()` as u32; each heap = rows x stride bytes (+ `guard_words` words),
    at least 4 bytes (a Vulkan buffer cannot be empty; a heap with stride 0 is never touched).
    The heaps need no initialisation (ADSTACK_ALLOCA resets the counters); here they are filled
    with `fill` so tests can see which words the shader wrote."""

    def __init__(self, rt, stack_dtypes, capacities, rows: int, guard_words: int = 0,
                 fill: int = 0, kinds=None):
        if rows < 1:
            raise ValueError("adstack heaps need rows >= 1")
        self.layout = adstack_layout(stack_dtypes, capacities, kinds)
        self.rows = rows
        meta = np.asarray(self.layout.metadata(), dtype=np.int64)
        if meta.size and (meta.min() < 0 or meta.max() >= 1 << 32):
            raise ValueError(f"adstack metadata does not fit u32: {meta.tolist()}")
        fb, ib = self.layout.heap_bytes(rows)
        self.meta = rt.alloc(4 * meta.size)
        self.meta.write(meta.astype(np.uint32).tobytes())
        self.heaps = []
        for nbytes in (fb, ib):
            nbytes = max(nbytes + 4 * guard_words, 4)
            h = rt.alloc(nbytes, zero=fill == 0)
            if fill:
                h.write(np.full(nbytes // 4, fill, dtype=np.uint32).tobytes())
            self.heaps.append(h)

    def buffers(self) -> list:
        return [self.meta, *self.heaps]

    def snapshot(self) -> AdStackSnapshot:
        words = [np.frombuffer(b.read().tobytes(), dtype=np.uint32).copy()
                 for b in self.buffers()]
        return AdStackSnapshot(self.layout, self.rows, *words)

    def free(self) -> None:
        for b in self.buffers():
            b.free()


def adstack_dispatches(begin: int, end: int, rows: int, max_groups, local_size: int):
    """(groups, push-constant bytes) per dispatch of a range task with adstacks: chunks of at most
    `rows` threads, so an invocation's row (its linear id in the dispatch) is < rows."""
    out = []
    for lo in range(begin, end, rows):
        hi = min(lo + rows, end)
        groups, tpr = dispatch_geometry(hi - lo, max_groups, local_size)
        out.append((groups, pack_push_constants(lo, hi, tpr)))
    return out


def _capacity_list(capacities, task_index: int):
    if capacities is None:
        raise ValueError(f"task {task_index} has adstacks: pass capacities")
    if isinstance(capacities, dict):
        return capacities[task_index]
    return capacities


def interpreter_capacities(tl, capacities) -> dict:
    """{ADSTACK_ALLOCA node: capacity} for `Memory(capacities=...)`."""
    out = {}
    for ti, t in enumerate(tl.tasks):
        nodes = adstack_allocas(t)
        if nodes:
            out.update(zip(nodes, _capacity_list(capacities, ti)))
    return out


def _mem_key(ref):
    return (ref.kind, ref.key, ref.grad)


def _gpu_array(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.astype(np.uint32) if a.dtype == np.bool_ else a


def arg_bytes(tl, abi, scalars, arrays) -> bytes:
    vals = [cast_value(scalars[i], a.dtype) if abi.arg_offsets[i] >= 0 else None
            for i, a in enumerate(tl.args)]
    return bytes(abi.pack_args(tl.args, vals,
                               lambda a, ax: arrays[("ndarray", a, False)].shape[ax]))


def run_vulkan(rt, tl, arrays: dict, scalars, caps: SpirvCaps | None = None,
               check_valid: bool = True, max_groups=None, *, capacities=None,
               rows: int | None = None, guard_words: int = 0, heap_fill: int = 0,
               bounds_check: bool = False) -> Result:
    """Compile and run every task of `tl`; returns the arrays (copies) and the status words.

    Tasks with adstacks: `capacities` = per-stack capacities (a list for every such task, or
    {task index: list}); `rows` = heap rows (default: the task's thread count, 1 for serial);
    `guard_words` extra words after each heap, everything filled with `heap_fill`.
    `bounds_check`: compile with the debug bounds checks (status code 3 on a bad index)."""
    abi = kernel_abi(tl)
    caps = caps or device_caps(rt)
    tasks = compile_tasks(tl, abi, caps, bounds_check=bounds_check)
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
    heaps = {}
    for ti, (t, st) in enumerate(zip(tl.tasks, tasks)):
        pipe = rt.pipeline(st.words, st.num_bindings, st.push_constant_bytes)
        if t.kind == "serial":
            launches = [((1, 1, 1), pack_push_constants(0, 0, 1))]
            n_rows = 1
        else:
            begin, end = int(eval_expr(t.begin, mem)), int(eval_expr(t.end, mem))
            n_rows = rows or max(end - begin, 1)
            if st.adstacks:
                launches = adstack_dispatches(begin, end, n_rows, max_groups, st.local_size)
            else:
                groups, tpr = dispatch_geometry(end - begin, max_groups, st.local_size)
                launches = [(groups, pack_push_constants(begin, end, tpr))]
        extra = []
        if st.adstacks:
            heaps[ti] = AdStackHeaps(rt, st.adstacks, _capacity_list(capacities, ti), n_rows,
                                     guard_words, heap_fill, st.adstack_kinds)
            extra = heaps[ti].buffers()
        assert st.num_bindings == 2 + len(bufs) + len(extra)
        for groups, pc in launches:
            rt.dispatch(pipe, [args, status] + bufs + extra, groups, pc)
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
    snaps = {ti: h.snapshot() for ti, h in heaps.items()}
    for b in [args, status] + bufs:
        b.free()
    for h in heaps.values():
        h.free()
    return Result(out, st_words, snaps)


def run_reference(tl, arrays: dict, scalars, capacities=None) -> dict:
    arrays = {k: np.array(v, copy=True) for k, v in arrays.items()}
    for ref in tl.temps:
        arrays.setdefault(_mem_key(ref), np.zeros(ref.shape or (), dtype=ref.dtype.np))
    caps = interpreter_capacities(tl, capacities) if capacities is not None else None
    run_tasks(tl, Memory(arrays, scalars, caps))
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
