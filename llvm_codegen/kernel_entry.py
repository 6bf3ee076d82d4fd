"""The GPU kernel entry ('grid' in `llvm_codegen.target`): one thread per heap row, grid stride.

    void @sym(ptr bufs, ptr args, i32 begin, i32 end, i32 nthreads, i32 block)   (kernel cc)

`bufs` is a device array of buffer addresses laid out like the CPU's (`llvm_codegen.cpu_program`,
adstack and status buffers included). Thread `tid = group_id * block + local_id` of a grid of
`nthreads` threads (the launch makes the grid exactly `nthreads` threads) runs the iterations
`begin + tid + k * nthreads < end` of a 'range' task, so neighbouring threads touch neighbouring
elements (coalesced); a 'serial' task runs on thread 0 only. `tid` is the thread's row of the
adstack heaps, which therefore need `nthreads` rows. The loop counter is i64, so the stride never
wraps near 2**31.

Device ranges (`compile_tasks(..., device_ranges={task index, ...})`): a range task whose bounds
read fields / ndarrays / temporaries (`for i in range(n[None])`) evaluates `task.begin` and
`task.end` itself, in every thread, from device memory at the kernel's start, and ignores the
`begin` / `end` arguments: the launch needs no host read of the bound, and the grid (any size;
the grid stride covers the range) is chosen without knowing it. The bound is read in stream
order, after every earlier launch, so a bound written by an earlier kernel is seen as written.

Emulation (`thread_id == 'param'`): the same kernel, internal and always inlined, takes `tid` as
a seventh argument; the exported symbol is a CPU driver

    void @sym(ptr bufs, ptr args, i32 begin, i32 end, i32 nthreads, i32 tid0, i32 tid1)

that runs threads tid0 .. tid1-1 one after another (`llvm_codegen.device_runtime.emu_runtime`
splits the grid's threads over CPU workers).
"""
from __future__ import annotations

from llvmlite import ir

from kernel_ir.dtypes import i64
from kernel_ir.nodes import Task, TaskList
from kernel_ir.rewrite import expr_nodes

from .context import FnContext, ModuleLib
from .lltypes import I32, I64, PTR, VOID
from .lower_adstack import setup_adstacks
from .lower_memory import global_accesses
from .lower_ops import convert

GRID_FN_TYPE = ir.FunctionType(VOID, [PTR, PTR, I32, I32, I32, I32])
EMU_THREAD_FN_TYPE = ir.FunctionType(VOID, [PTR, PTR, I32, I32, I32, I32, I32])
EMU_DRIVER_FN_TYPE = ir.FunctionType(VOID, [PTR, PTR, I32, I32, I32, I32, I32])

_SREG = {"nvptx": ("llvm.nvvm.read.ptx.sreg.ctaid.x", "llvm.nvvm.read.ptx.sreg.tid.x"),
         "amdgpu": ("llvm.amdgcn.workgroup.id.x", "llvm.amdgcn.workitem.id.x")}


def _thread_id(ctx: FnContext, fn: ir.Function) -> ir.Value:
    t = ctx.lib.target
    eb = ctx.entry_b
    if t.thread_id == "param":
        return fn.args[6]
    group, local = (eb.call(ctx.lib.declare(name, I32, []), []) for name in _SREG[t.thread_id])
    return eb.add(eb.mul(group, fn.args[5], flags=["nuw"]), local, name="tid", flags=["nuw"])


def lower_grid_task(lib: ModuleLib, sym: str, task: Task, tl: TaskList, abi, task_index: int,
                    bounds_check: bool, lower_table, options=None,
                    device_range: bool = False, oob_check: bool = False) -> int:
    target = lib.target
    emulated = target.thread_id == "param"
    fn = ir.Function(lib.module, EMU_THREAD_FN_TYPE if emulated else GRID_FN_TYPE,
                     sym + ".thread" if emulated else sym)
    names = ("bufs", "args", "begin", "end", "nthreads", "block", "tid")
    for a, name in zip(fn.args, names):
        a.name = name
    fn.attributes.add("nounwind")
    if emulated:
        fn.linkage = "internal"
        fn.attributes.add("alwaysinline")
    elif target.kernel_cc:
        fn.calling_convention = target.kernel_cc
    ctx = FnContext(lib, fn, abi, tl.args, lower_table, *(() if options is None else (options,)))
    ctx.task_index = task_index
    if bounds_check:
        ctx.bounds_check = True
        ctx.access_sites = {n: i for i, n in enumerate(global_accesses(task))}
    elif oob_check:
        from .lower_memory import set_oob_check
        set_oob_check(ctx, task)
    ctx.worker = tid = _thread_id(ctx, fn)
    nstacks = setup_adstacks(ctx, task, task_index)
    start, ret = ctx.block("start"), ctx.block("ret")
    ctx.b = b = ir.IRBuilder(start)
    if task.kind == "serial":
        body = ctx.block("serial")
        b.cbranch(b.icmp_unsigned("==", tid, ir.Constant(I32, 0)), body, ret)
        b.position_at_end(body)
        ctx.top_continue = ret
        ctx.lower_block(task.body)
        ctx.close_into(ret)
    elif task.kind == "range":
        _grid_stride(ctx, task, fn, tid, ret, device_range)
    else:
        raise RuntimeError(f"LLVM codegen: unknown task kind {task.kind!r}")
    ctx.b.position_at_end(ret)
    ctx.b.ret_void()
    ctx.entry_b.branch(start)
    if emulated:
        _emu_driver(lib, sym, fn)
    return nstacks


def _device_bound(ctx: FnContext, expr) -> ir.Value:
    """One bound of a device range, lowered from the task's own IR (loads from device memory),
    as i64."""
    for n in expr_nodes(expr):
        if n not in ctx.env:
            ctx.current = n
            v = ctx.table[n.op](ctx, n)
            if v is not None:
                ctx.env[n] = v
    return convert(ctx, ctx.value(expr), expr.dtype, i64)


def _grid_stride(ctx: FnContext, task: Task, fn, tid, ret, device_range: bool = False):
    """for (i = begin + tid; i < end; i += nthreads) body(i), in i64."""
    b = ctx.b
    dt = task.index.dtype
    if device_range:
        begin, end = _device_bound(ctx, task.begin), _device_bound(ctx, task.end)
    else:
        begin, end = b.sext(fn.args[2], I64), b.sext(fn.args[3], I64)
    nthreads = b.zext(fn.args[4], I64)
    first = b.add(begin, b.zext(tid, I64), flags=["nsw"])
    pre = b.block
    head, body, latch = ctx.block("grid.head"), ctx.block("grid.body"), ctx.block("grid.latch")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64, name="grid.i")
    b.cbranch(b.icmp_signed("<", i, end), body, ret)
    b.position_at_end(body)
    ctx.env[task.index] = convert(ctx, i, i64, dt)
    ctx.top_continue = latch
    ctx.lower_block(task.body)
    ctx.close_into(latch)
    b.position_at_end(latch)
    nxt = b.add(i, nthreads, name="grid.next", flags=["nsw"])
    b.branch(head)
    i.add_incoming(first, pre)
    i.add_incoming(nxt, latch)


def _emu_driver(lib: ModuleLib, sym: str, thread_fn: ir.Function):
    fn = ir.Function(lib.module, EMU_DRIVER_FN_TYPE, sym)
    for a, name in zip(fn.args, ("bufs", "args", "begin", "end", "nthreads", "tid0", "tid1")):
        a.name = name
    fn.attributes.add("nounwind")
    bufs, args, begin, end, nthreads, tid0, tid1 = fn.args
    entry, head, body, done = (fn.append_basic_block(s) for s in ("entry", "head", "body", "done"))
    b = ir.IRBuilder(entry)
    b.branch(head)
    b.position_at_end(head)
    t = b.phi(I32, name="t")
    b.cbranch(b.icmp_unsigned("<", t, tid1), body, done)
    b.position_at_end(body)
    b.call(thread_fn, [bufs, args, begin, end, nthreads, ir.Constant(I32, 0), t])
    nxt = b.add(t, ir.Constant(I32, 1), flags=["nuw"])
    b.branch(head)
    t.add_incoming(tid0, entry)
    t.add_incoming(nxt, body)
    b.position_at_end(done)
    b.ret_void()
