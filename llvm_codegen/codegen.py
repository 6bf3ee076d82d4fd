"""spirad IR (TaskList) -> one LLVM module with one function per task.

    compile_tasks(tl, abi, options=CodegenOptions()) -> CpuCode(llvm_ir, tasks=(CpuTaskInfo, ...))

Each task function is `void @sym(ptr bufs, ptr args, i64 begin, i64 end, i32 worker)` (see
`llvm_codegen.cpu_program`). A 'range' task loops over [begin, end) inside the function, so the
per-iteration cost is not a call; a 'serial' task runs its body once. Op lowering lives in
tables: `lower_ops` (pure ops), `lower_memory` (args, locals, globals), `lower_control`,
`lower_adstack` (ADSTACK_*: heap-backed stacks; a task with adstacks also reads
`bufs[n..n+3]` = meta, heap_float, heap_int, status with n = len(abi.bindings), see there).

`bounds_check=True` (the CPU backend passes `sd.init(debug=True)`) makes every GLOBAL_LOAD /
GLOBAL_STORE / ATOMIC_ADD check its indices against the axis extents; an out-of-range access is
skipped and recorded (STATUS_INDEX_OUT_OF_RANGE) in the status buffer bufs[n+3], which every task
then reads. The status words are documented in `llvm_codegen.cpu_program`. With the default
`bounds_check=False` no check code at all is emitted (a test compares the IR).

`options` (`llvm_codegen.options.CodegenOptions`) holds the switches: SPMD lanes on / off and
their count, the math lowering, the debug print. The code generator reads no environment; the
SPMD choice of each task (lanes, and the analysis' reason when scalar) is made once here and
recorded in `CpuTaskInfo`, which the CPU backend reads instead of analysing again.
"""
from __future__ import annotations

import re
import sys

from llvmlite import ir

from kernel_ir.abi import KernelABI
from kernel_ir.dtypes import i32, i64
from kernel_ir.nodes import Task, TaskList, walk
from kernel_ir.ops import LOOPS, Op

from . import local_arrays, math_policy, spmd
from .context import CodegenError, FnContext, ModuleLib
from .lltypes import I32, I64, PTR, VOID
from .lower_adstack import LOWER_ADSTACK, setup_adstacks
from .lower_control import LOWER_CONTROL, emit_counted_loop
from .lower_math import emit_kept, variant_sites
from .lower_memory import LOWER_MEMORY, global_accesses, set_oob_check
from .lower_ops import LOWER_OPS, convert
from .options import CodegenOptions
from .cpu_program import CpuCode, CpuTaskInfo
from .target import CPU, Target
from .spmd_scoped_locals import blend_free_stores

LOWER = {**LOWER_OPS, **LOWER_MEMORY, **LOWER_CONTROL, **LOWER_ADSTACK}  # every Op (a test checks it)

TASK_FN_TYPE = ir.FunctionType(VOID, [PTR, PTR, I64, I64, I32])  # 64-bit ranges (fields > 2**31)
# Every task function realigns its stack to a cache line on entry (`alignstack`): the caller
# (ctypes, on whichever thread runs the chunk) only guarantees the ABI's 16 bytes, and a task
# that spills 32- or 64-byte vectors (SPMD lanes, vectorised loops, vector libm calls) otherwise
# gets spill slots that straddle two cache lines or not depending on that thread's stack depth:
# kernel b's gradient ran 13% slower on one worker thread than on the other (issue #27).
STACK_ALIGN = 64


def task_symbol(tl: TaskList, k: int, task: Task) -> str:
    base = f"{tl.name}_{k}_{task.name}" if task.name else f"{tl.name}_{k}"
    return "spirad_" + re.sub(r"[^A-Za-z0-9_]", "_", base)


def compile_tasks(tl: TaskList, abi: KernelABI, bounds_check: bool = False,
                  target: Target = CPU, options: CodegenOptions = CodegenOptions(),
                  choices: dict | None = None, device_ranges=frozenset(),
                  oob_check: bool = False) -> CpuCode:
    """`target` (`llvm_codegen.target`): the CPU JIT (default), a GPU, or the CPU emulation of a
    GPU; GPU targets get the grid-stride kernel entry of `llvm_codegen.kernel_entry`.
    `choices`: {task index: `spmd_choice(...)`} a backend already made for tasks of `tl` (with
    the same `bounds_check` and `options`), used instead of analysing those tasks again.
    `device_ranges` (GPU targets): indices of range tasks whose kernel evaluates its own bounds
    from device memory instead of taking them as launch arguments.
    `oob_check` (ignored with `bounds_check`): the default bounds checks (`lower_memory`): an
    out-of-range access is skipped and flagged (STATUS_OUT_OF_BOUNDS); tasks then read the
    status buffer like bounds-checked ones."""
    choices = choices or {}
    oob_check = bool(oob_check) and not bounds_check
    module = ir.Module(name=tl.name)
    if target.triple:
        module.triple = target.triple
    lib = ModuleLib(module, target)
    infos = []
    for k, task in enumerate(tl.tasks):
        sym = task_symbol(tl, k, task)
        if target.is_gpu_entry:
            from .kernel_entry import lower_grid_task  # GPU targets only (CPU first compile: #27)
            nstacks, width = lower_grid_task(lib, sym, task, tl, abi, k, bounds_check, LOWER,
                                             options, k in device_ranges, oob_check), 1
        else:
            nstacks, width = _lower_task(lib, sym, task, tl, abi, k, bounds_check, options,
                                         choices.get(k), oob_check)
        infos.append(CpuTaskInfo(sym, task.kind, nstacks, lanes=width))
    emit_kept(lib)
    return CpuCode(str(module), tuple(infos), bool(bounds_check), oob_check)


def _lower_task(lib: ModuleLib, sym: str, task: Task, tl: TaskList, abi: KernelABI,
                task_index: int, bounds_check: bool, options: CodegenOptions, choice=None,
                oob_check: bool = False):
    fn = ir.Function(lib.module, TASK_FN_TYPE, sym)
    for a, name in zip(fn.args, ("bufs", "args", "begin", "end", "worker")):
        a.name = name
    fn.attributes.add("nounwind")
    fn.attributes.alignstack = STACK_ALIGN
    width, why = choice or _spmd_choice(task, bounds_check, options)
    if width > 1:
        ctx = spmd.SpmdContext(lib, fn, abi, tl.args, LOWER, options)
        ctx.setup_spmd(width, why)
        ctx.one_path_checks = bool(task.lanes)  # a heavy lane task: half its checked code
        if task.lanes:  # and its locals' old values dead where no lane reads them
            ctx.scoped_locals = True
            ctx.narrow_elements = True  # and i32 element indices into small fields
            ctx.blend_free = blend_free_stores(task.body)
    else:
        ctx = FnContext(lib, fn, abi, tl.args, LOWER, options)
        if lib.target.arch == "cpu":
            ctx.local_arrays = local_arrays.plan(task) or None
    ctx.worker = fn.args[4]
    ctx.task_index = task_index
    ctx.variant_sites = variant_sites(task)
    if bounds_check:
        ctx.bounds_check = True
        ctx.access_sites = {n: i for i, n in enumerate(global_accesses(task))}
    elif oob_check:
        set_oob_check(ctx, task)
    nstacks = setup_adstacks(ctx, task, task_index)  # without adstacks: nothing emitted
    if width > 1:
        spmd.setup_lane_counts(ctx)  # stacks pushed under varying control: per-lane counts
    start = ctx.block("start")
    ctx.b = ir.IRBuilder(start)
    ret = ctx.block("ret")
    if task.kind == "serial":
        ctx.top_continue = ret
        ctx.lower_block(task.body)
        ctx.close_into(ret)
    elif task.kind == "range":
        dt = task.index.dtype
        begin, end = (convert(ctx, v, i64, dt) for v in (fn.args[2], fn.args[3]))

        def body(i, latch, exit_):
            ctx.env[task.index] = i
            ctx.top_continue = latch
            ctx.lower_block(task.body)

        if width > 1:
            spmd.lower_task(ctx, task, begin, end)
        else:
            emit_counted_loop(ctx, begin, end, dt, body, name="task")
        ctx.b.branch(ret)
    else:
        raise CodegenError(f"LLVM codegen: unknown task kind {task.kind!r}")
    ctx.b.position_at_end(ret)
    ctx.b.ret_void()
    ctx.entry_b.branch(start)
    if options.debug and task.kind == "range":
        how = f"SPMD, {width} lanes{_mask_note(why)}" if width > 1 else \
            f"scalar ({why.reason or 'SPIRAD_CPU_SPMD=0'})"
        print(f"[spirad cpu] {sym}: {how}", file=sys.stderr)
    return nstacks, width


def _mask_note(a) -> str:
    """`, masked (2 varying loops, 1 per-lane stack)` for a task with varying control flow."""
    if not (a.ctl.masked or a.ctl.loops or a.ctl.top):
        return ""
    parts = [f"{len(a.ctl.loops)} varying loop{'s' * (len(a.ctl.loops) != 1)}"]
    if a.lane_stacks:
        k = len(a.lane_stacks)
        parts.append(f"{k} per-lane stack{'s' * (k != 1)}")
    return f", masked ({', '.join(parts)})"


def spmd_choice(task, bounds_check: bool = False, options: CodegenOptions = CodegenOptions()):
    """(lanes, spmd.Analysis) the code generator will use for range task `task` (backends ask
    before compiling: spirad/backends/cpu.py's one-thread variants)."""
    return _spmd_choice(task, bounds_check, options)


def _spmd_choice(task, bounds_check, options: CodegenOptions):
    """(lanes, analysis): lanes > 1 when the task runs in SPMD lanes (`options.spmd`)."""
    if not options.spmd:
        return 1, spmd.Analysis(False, "")
    if task.serialised and not task.lanes and any(n.op in LOOPS for n in walk(task.body)):
        return 1, spmd.Analysis(False, "a serialised loop with loops inside, made parallel")
    a = spmd.analyze(task, bounds_check, options.vecmath)
    if not a.ok:
        return 1, a
    lanes = options.lanes or default_lanes(a, options.vector_bits)
    n = _constant_trips(task)
    if task.lanes and n is not None and options.lanes is None:  # one group may be all of it
        lanes = max(2, min(lanes, 1 << (max(n, 1).bit_length() - 1)))
    least = fewest_lane_trips(options) if task.lanes else \
        2 * lanes if options.min_trips is None else options.min_trips
    if n is not None and n < least:  # DiffTaichi's 16 billiard balls: lanes would only add
        return 1, spmd.Analysis(False, f"{n} iterations: fewer than {least}")  # compile time
    return lanes, a


HEAVY_LANE_TRIPS = 16  # fewest iterations of a loop made parallel for its lanes (`Task.lanes`)


def heavy_lanes(options: CodegenOptions = CodegenOptions()) -> bool:
    """Whether loops are made parallel for their lanes (`Task.lanes`) on this target: only with
    512-bit vectors (AVX-512: masked gathers and scatters in one instruction each). With AVX2
    (x86-64-v3) the lane task of Genesis' narrow phase compiled for more than 9 minutes of CPU
    (16 lanes; 8 lanes: more than 2.5) against 70 s with AVX-512 (docs/performance.md,
    glanes): too long for a default."""
    return math_policy.vector_bits(options.vector_bits) >= 512


def fewest_lane_trips(options: CodegenOptions = CodegenOptions()) -> int:
    """The fewest constant trips for which a loop made parallel for its lanes (`Task.lanes`:
    a heavy body, Genesis' narrow phase) runs in SIMD lanes: `HEAVY_LANE_TRIPS`, or
    SPIRAD_CPU_SPMD_MIN_TRIPS. Such a task takes the default lanes, or fewer (a power of two, at
    most its trips) where its trips do not fill two groups: one group of 16 lanes ran
    Genesis' narrow phase at `n_envs` 16 1.8x faster than the serial code (docs/performance.md,
    glanes), where the rule for other tasks (two groups at least) kept it scalar."""
    return HEAVY_LANE_TRIPS if options.min_trips is None else options.min_trips


def _constant_trips(task):
    """The iteration count of a range task with constant bounds, else None."""
    b, e = task.begin, task.end
    if b is not None and e is not None and b.op == Op.CONST and e.op == Op.CONST:
        return max(0, int(e.arg) - int(b.arg))
    return None


def default_lanes(analysis, vector_bits: int | None = None) -> int:
    """Two vector registers per value: 2x the target's f32 width (`vector_bits`; None: the
    host's; 32 lanes on AVX-512, 16 on AVX2, 8 on NEON) when every varying value is at most 32
    bits, else the f32 width (64-bit values then already take two registers). Each op issues twice, independently, which hides the latency of loop-carried
    chains: kernels a / b16 / b256 of bench_autodiff ran 1.3-1.8x faster at 32 lanes than at 16
    (docs/cpu_spmd.md); 64 lanes were faster still but cost ~10% more compile time."""
    host = math_policy.lanes("f32", vector_bits)
    wide = any(getattr(n.dtype, "bits", 0) == 64 for n in analysis.varying)
    return host if wide else 2 * host
