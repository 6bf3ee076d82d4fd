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
from sizer import compute_layout
from kernel_ir.abi import adstack_allocas, adstack_kind, kernel_abi
from kernel_ir.interpreter import Memory, cast_value, eval_expr, run_tasks

_RUNTIMES: dict = {}


def runtime() -> CpuRuntime:
    """The runtime of the CPU target the tests run for (SPIRAD_CPU_TARGET, as spirad's)."""
    from spirad.options import cpu_target
    spec = cpu_target()
    if spec not in _RUNTIMES:
        _RUNTIMES[spec] = CpuRuntime(target=spec)
    return _RUNTIMES[spec]


def with_temps(tl, arrays):
    arrays = {k: v.copy() for k, v in arrays.items()}
    for ref in tl.temps:
        key = (ref.kind, ref.key, ref.grad)
        if key not in arrays:
            arrays[key] = np.zeros(ref.shape or (1,) * max(ref.ndim, 1), ref.dtype.np)
    return arrays


def build_args(tl, abi, arrays, scalars) -> np.ndarray:
    vals = [cast_value(scalars[i], s.dtype) if abi.arg_offsets[i] >= 0 else None
            for i, s in enumerate(tl.args)]
    buf = abi.pack_args(tl.args, vals, lambda a, ax: arrays[("ndarray", a, False)].shape[ax])
    return np.frombuffer(bytes(buf), np.uint8).copy()


def codegen_options():
    """The CPU code generator's switches as spirad would pass them (tests set SPIRAD_CPU_*)."""
    from spirad.options import llvm_codegen_options
    return llvm_codegen_options()


def default_widths() -> tuple[int, int]:
    """(lanes of an SPMD task whose varying values are at most 32-bit, of one with a 64-bit
    value) by default on the target in force (SPIRAD_CPU_TARGET, else the host): two registers
    a 32-bit value, one a 64-bit value (`codegen.default_lanes`): (32, 16) with AVX-512,
    (16, 8) with AVX2, (8, 4) with SSE / NEON."""
    from llvm_codegen import math_policy
    w = math_policy.lanes("f32", codegen_options().vector_bits)
    return 2 * w, w


def lane_widths() -> tuple[int, int]:
    """`default_widths`, or SPIRAD_CPU_SPMD_LANES for both where forced (CI runs the CPU
    suites again with 4 and 8 lanes: scripts/test.sh)."""
    forced = codegen_options().lanes
    return (forced, forced) if forced else default_widths()


def compile_and_load(tl):
    abi = kernel_abi(tl)
    prog = compile_tasks(tl, abi, options=codegen_options())
    mod = runtime().load(prog.llvm_ir, [t.symbol for t in prog.tasks])
    return abi, prog, mod


def _run_tasks(tl, prog, mod, rt, bufs, args, mem, parallel):
    """Launch the compiled tasks in order, as the CPU backend does: a serial task on one
    thread, a parallel one over the range its bounds evaluate to (read from `mem`)."""
    for task, info in zip(tl.tasks, prog.tasks):
        fn = mod.function(info.symbol)
        if task.kind == "serial":
            rt.run(fn, bufs, args, 0, 1, parallel=False)
        else:
            begin, end = int(eval_expr(task.begin, mem)), int(eval_expr(task.end, mem))
            rt.run(fn, bufs, args, begin, end, parallel=parallel)


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
    _run_tasks(tl, prog, mod, rt, bufs, args, mem, parallel)
    return arrays


def run_interp(tl, arrays, scalars=()):
    arrays = with_temps(tl, arrays)
    run_tasks(tl, Memory(arrays, scalars))
    return arrays


# -- adstacks ---------------------------------------------------------------------------------
GUARD = 64          # guard bytes on each side of every adstack buffer (keeps 8-byte alignment)
GUARD_BYTE = 0xA5   # guard fill
HEAP_FILL = 0xEE    # heap fill: the code must not rely on zeroed heaps


class Guarded:
    """A uint8 buffer of `nbytes` with GUARD bytes of GUARD_BYTE on each side."""

    def __init__(self, nbytes: int, fill: int = 0):
        self.raw = np.full(GUARD + nbytes + GUARD, GUARD_BYTE, np.uint8)
        self.data = self.raw[GUARD:GUARD + nbytes]
        self.data[:] = fill
        self.addr = self.raw.ctypes.data + GUARD

    def guards_intact(self) -> bool:
        return bool((self.raw[:GUARD] == GUARD_BYTE).all() and
                    (self.raw[GUARD + self.data.size:] == GUARD_BYTE).all())


def task_capacities(tl, capacities) -> list:
    """Per task, the capacity of each stack in `adstack_allocas` order. `capacities`: a dict
    {ADSTACK_ALLOCA node: cap} (as the interpreter's Memory takes) or a sequence per task of
    sequences per stack."""
    if isinstance(capacities, dict):
        return [[int(capacities[a]) for a in adstack_allocas(t)] for t in tl.tasks]
    out = [list(map(int, c)) for c in capacities]
    for t, c in zip(tl.tasks, out):
        assert len(c) == len(adstack_allocas(t)), "one capacity per stack of each task"
    return out


class AdstackLaunch:
    """The three per-task adstack buffers (meta, heap_float, heap_int) of one task launch."""

    def __init__(self, task, caps, rows: int, lanes: int = 1):
        self.lanes = lanes  # an SPMD task's worker owns `lanes` rows, lane-interleaved
        allocas = adstack_allocas(task)
        self.layout = compute_layout(caps, [a.dtype.nbytes for a in allocas],
                                     [adstack_kind(a) for a in allocas])
        words = self.layout.metadata()
        self.meta = Guarded(4 * len(words))
        self.meta.data.view(np.uint32)[:] = words
        fb, ib = self.layout.heap_bytes(rows)
        self.heap_float = Guarded(fb, HEAP_FILL)
        self.heap_int = Guarded(ib, HEAP_FILL)

    def buffers(self):
        return (self.meta, self.heap_float, self.heap_int)


def run_llvm_adstack(tl, arrays, scalars=(), capacities=(), loaded=None, parallel=True,
                     rows=None, rt=None):
    """`run_llvm` for kernels with adstacks. Returns (arrays, status, launches).

    Per task with adstacks the task function receives `n + 4` buffers: the kernel's `n`
    bindings, then meta (Layout.metadata() as u32), heap_float (rows x stride_float bytes),
    heap_int (rows x stride_int bytes) and status (4 u32 words, zeroed once per kernel run here;
    the first error of any task wins). `rows` defaults to the runtime's num_workers (the range of
    the `worker` argument). Tasks without adstacks get only the `n` bindings. `status` is the
    4-word array; `launches[k]` is the AdstackLaunch of task k (None without stacks). Every
    guard byte around meta, the heaps and status is checked after the run. `rt`: a CpuRuntime
    (default: the shared one), e.g. one with more workers than cores.
    """
    arrays = with_temps(tl, arrays)
    abi, prog, mod = loaded or compile_and_load(tl)
    rt = rt or runtime()
    rows = rt.num_workers if rows is None else rows
    caps = task_capacities(tl, capacities) if capacities else [[] for _ in tl.tasks]
    base = [arrays[(r.kind, r.key, r.grad)].ctypes.data for r in abi.bindings]
    status = Guarded(16)
    args = build_args(tl, abi, arrays, scalars)
    mem = Memory(arrays, scalars)
    launches = []
    for task, info, c in zip(tl.tasks, prog.tasks, caps):
        if adstack_allocas(task):
            launch = AdstackLaunch(task, c, rows * info.lanes, info.lanes)  # SPMD: lanes rows a worker
            extra = [b.addr for b in launch.buffers()] + [status.addr]
        else:
            launch, extra = None, []
        launches.append(launch)
        addrs = base + extra
        bufs = (ctypes.c_void_p * max(len(addrs), 1))(*addrs)
        fn = mod.function(info.symbol)
        if task.kind == "serial":
            rt.run(fn, bufs, args, 0, 1, parallel=False)
        else:
            begin, end = int(eval_expr(task.begin, mem)), int(eval_expr(task.end, mem))
            if parallel and rows < rt.num_workers:
                raise ValueError("rows must cover every worker slot of a parallel launch")
            rt.run(fn, bufs, args, begin, end, parallel=parallel)
    launches_ok = all(l is None or all(b.guards_intact() for b in l.buffers()) for l in launches)
    assert launches_ok and status.guards_intact(), "adstack buffer guards overwritten"
    return arrays, status.data.view(np.uint32).copy(), launches


def run_interp_adstack(tl, arrays, scalars=(), capacities=None):
    """The interpreter with adstack capacities {ADSTACK_ALLOCA node: cap}."""
    arrays = with_temps(tl, arrays)
    run_tasks(tl, Memory(arrays, scalars, capacities))
    return arrays


# -- bounds checks ----------------------------------------------------------------------------
def run_llvm_checked(tl, arrays, scalars=(), parallel=True, rt=None):
    """Run `tl` compiled with `bounds_check=True`. Every binding lives inside a guarded buffer
    (GUARD bytes of GUARD_BYTE each side), the status buffer (STATUS_WORDS u32) is bufs[n+3]
    with bufs[n..n+2] null, as the CPU backend passes them. Returns (arrays, status words);
    asserts that no guard byte was overwritten (a skipped access writes nothing)."""
    from kernel_ir.abi import STATUS_WORDS
    arrays = with_temps(tl, arrays)
    abi = kernel_abi(tl)
    prog = compile_tasks(tl, abi, bounds_check=True, options=codegen_options())
    assert prog.bounds_check
    rt = rt or runtime()
    mod = rt.load(prog.llvm_ir, [t.symbol for t in prog.tasks])
    guarded = {}
    for r in abi.bindings:
        k = (r.kind, r.key, r.grad)
        a = arrays[k]
        g = Guarded(max(a.nbytes, 8))
        g.data[:a.nbytes] = a.reshape(-1).view(np.uint8)
        guarded[k] = g
    status = Guarded(4 * STATUS_WORDS)
    addrs = [guarded[(r.kind, r.key, r.grad)].addr for r in abi.bindings] + [0, 0, 0, status.addr]
    bufs = (ctypes.c_void_p * len(addrs))(*addrs)
    args = build_args(tl, abi, arrays, scalars)
    mem = Memory(arrays, scalars)
    _run_tasks(tl, prog, mod, rt, bufs, args, mem, parallel)
    assert status.guards_intact() and all(g.guards_intact() for g in guarded.values()), \
        "a bounds-checked access wrote outside its buffer"
    out = dict(arrays)
    for k, g in guarded.items():
        a = arrays[k]
        out[k] = g.data[:a.nbytes].view(a.dtype).reshape(a.shape).copy()
    return out, status.data.view(np.uint32).copy()
