"""The compile pipeline, in order: frontend -> passes -> offload -> codegen (per backend).

    parse (frontend.compile_kernel) -> inline_calls -> lower_prints -> forward_stores -> simplify
        -> dce
        -> offload -> simplify_tasks -> dce_tasks -> backend.compile            = compile_forward
    forward task list -> reverse_mode (passes/autodiff) -> simplify_tasks -> dce_tasks
        -> backend.compile, with the adstack sizing of the result           = compile_adjoint
    forward task list -> forward_mode (passes/forward_mode) -> simplify_tasks -> dce_tasks
        -> backend.compile                                             = compile_forward_mode

What a backend compiles is the task list after `promote_accumulators`, `serialise` (only under
`init(deterministic=True)`: passes/deterministic), `expand_math` (math functions without a
native lowering become IR ops), `demote_atomics`, `taichi_addresses` and, with the default
bounds checks on, `version_loops` (passes/bounds_versioning); autodiff sees the task
list before them, and the offline cache stores both.

With `verify=True` (tests, `init(debug=True)`, SPIRAD_VERIFY=1) the verifier runs after every
stage. Each of the three first asks the offline cache (`spirad.compile.offline_cache`): a hit gives the
task lists and the backend's compiled form, and only the launch data is rebuilt (`_program`). The backend that compiles is the current state's (`spirad.backends` loads it by name).
"""
from __future__ import annotations

import functools
import time
import weakref
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

from kernel_ir import verifier
from kernel_ir.abi import adstack_allocas, kernel_abi
from kernel_ir.interpreter import BINARY_IMPL, UNARY_IMPL, cast_value
from kernel_ir.nodes import GlobalRef, KernelIR, TaskList, globals_used
from kernel_ir.ops import Op
from kernel_ir.rewrite import expr_nodes

from . import gc_pause, offline_cache
from ..runtime import state as _state
from ..backends.base import default_checks
from ..runtime.launch import DEVICE_BOUNDS, Compiled
from passes.dce import dce_kernel, dce_tasks
from passes.expand_math import expand_math
from passes.forward_stores import forward_stores
from passes.inline import inline_calls
from passes.lower_print import lower_prints
from passes.offload import offload
from passes.demote_atomics import demote_atomics
from passes.deterministic import serialise
from passes.promote_accumulators import promote_accumulators
from passes.shape_specialise import specialise_shapes
from passes.simplify import simplify_kernel, simplify_tasks
from passes.taichi_layout import taichi_addresses
from passes.bounds_versioning import version_loops
from passes.independent_loops import parallelise
from ..data.snode_layout import layout_of
from ..runtime.logger import logger, ms
from ..runtime.sizing_cache import ProgramSizing

KERNEL_STAGES = (("inline", inline_calls), ("forward_stores", forward_stores),
                 ("simplify", simplify_kernel), ("dce", dce_kernel))
TASK_STAGES = (("simplify_tasks", simplify_tasks), ("dce_tasks", dce_tasks))


def lower(k: KernelIR, verify: bool = False, prints=None, independent: bool = False,
          shapes=None, lanes: bool = False, aliases=None):
    """Kernel IR -> verified task list; `prints`: the state's PrintBuffer (PRINT lowering);
    `shapes`: ndarray argument index -> full shape, the extents made constants after inlining
    (passes/shape_specialise; None: a generic program). Returns (task list, its copy with the provably independent serialised loops parallel
    (passes/independent_loops), or None: not `independent`, or no loop qualifies). `lanes`
    (not with `independent`): only the loops `work_estimate.worth_lanes` picks are made
    parallel, for their SIMD lanes (`env_lanes`). `aliases`: the groups of ndarray buffers that
    share memory at the launches of this program (`Kernel._alias_partition`; every other
    ndarray an alias class of its own), None: undecided."""
    if verify:
        verifier.verify_kernel(k)
    for name, stage in KERNEL_STAGES:
        k = stage(k)
        if name == "inline" and prints is not None:
            k = lower_prints(k, prints)
        if name == "inline" and shapes:
            k = specialise_shapes(k, shapes)
        if verify:
            verifier.verify_kernel(k, inlined=True)
    tl = _tasks(k, verify)
    if not (independent or lanes):
        return tl, None
    from ..backends.work_estimate import worth_lanes, worth_splitting
    if independent:
        kp = parallelise(k, worth_splitting, aliases=aliases)
    else:
        from llvm_codegen.codegen import fewest_lane_trips

        from .. import options
        least = fewest_lane_trips(options.llvm_codegen_options())
        kp = parallelise(k, lambda loop: worth_lanes(loop, least), lanes=True,
                         aliases=aliases)
    return tl, (_tasks(kp, verify) if kp is not k else None)


def _tasks(k: KernelIR, verify: bool) -> TaskList:
    tl = offload(k)
    if verify:
        verifier.verify_tasks(tl)
    for name, stage in TASK_STAGES:
        tl = stage(tl)
        if verify:
            verifier.verify_tasks(tl)
    return tl


class _Deep:
    """Compiling a deep expression (a generated chain of hundreds of additions) recurses in the
    frontend's visitor about twice per level: the recursion limit is raised to DEEP_LIMIT while
    compiling, so ~4,000 levels compile; deeper ones raise a SpiradSyntaxError naming the
    statement (frontend.transformer), never a bare RecursionError."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        import sys
        self.old = sys.getrecursionlimit()
        if self.old < DEEP_LIMIT:
            sys.setrecursionlimit(DEEP_LIMIT)

    def __exit__(self, exc_type, exc, tb):
        import sys
        sys.setrecursionlimit(self.old)
        if exc_type is RecursionError:  # below the frontend: a pass or a code generator
            from kernel_ir.errors import SpiradSyntaxError
            raise SpiradSyntaxError(f"kernel {self.name} nests expressions too deeply to compile; "
                                    f"split long chains of operations into several statements "
                                    f"with intermediate variables") from None
        return False


DEEP_LIMIT = 8000



_loaded = False  # the last `_cached` call was a hit (the log line of `_logged` says so)
_saved = False   # the last `_stored` call wrote the offline cache


def _logged(kind: str):
    """Log each compile (INFO): the program, whether it was compiled or loaded from the
    offline cache, and the time it took (`spirad.runtime.logger`); the compile runs with the
    cyclic garbage collector paused (`gc_pause`)."""
    def deco(fn):
        @functools.wraps(fn)
        def compile_logged(*args, **kwargs):
            global _loaded, _saved
            if not logger.isEnabledFor(20):  # logging.INFO
                with gc_pause.paused():
                    return fn(*args, **kwargs)
            _loaded = _saved = False
            t0 = time.perf_counter()
            with gc_pause.paused():
                c = fn(*args, **kwargs)
            dt = time.perf_counter() - t0
            arch = _state.current().arch
            if _loaded:
                logger.info("loaded kernel %s (%s, %s) from the offline cache in %s", c.tl.name,
                            kind, arch, ms(dt))
            else:
                stored = " (stored in the offline cache)" if _saved else ""
                logger.info("compiled kernel %s (%s, %s) in %s%s", c.tl.name, kind, arch, ms(dt),
                            stored)
            return c
        return compile_logged
    return deco


@_logged("forward")
def compile_forward(kernel, specs, state, shapes=None, aliases=None) -> Compiled:
    """A kernel's forward program for one signature (`specs`: see `frontend.compile_kernel`);
    `shapes` (ndarray argument index -> full shape, or None): the program specialised on them
    (passes/shape_specialise), run only for launches of exactly these shapes (`Kernel._forward`);
    `aliases` (None, or the groups of ndarray buffers sharing memory): the program specialised
    on that partition (passes/independent_loops rule 5), run only for launches whose storages
    overlap exactly so (`Kernel._alias_partition`)."""
    with _Deep(kernel.fn.__name__):
        return _compile_forward(kernel, specs, state, shapes, aliases)


def held_weakly(a) -> bool:
    """Whether the programs compiled for template argument `a` hold it weakly: an instance of
    a `@data_oriented` class (`self` of a kernel method). Programs are cached by its identity;
    holding it strongly would keep every such object a program made alive (a program that
    makes one per step leaks its memory: Taichi's test_oop_memory_leak), so its programs are
    dropped with it instead (`Kernel._forward`), before its id can be reused."""
    return getattr(type(a), "_data_oriented", False) and hasattr(type(a), "__weakref__") \
        and not isinstance(a, type)


def _compile_forward(kernel, specs, state, shapes=None, aliases=None) -> Compiled:
    from .kernel_return import return_spec
    returns = return_spec(kernel, state)
    templates = tuple(weakref.ref(sp[1]) if sp[0] == "template" and held_weakly(sp[1]) else sp[1]
                      for sp in specs if sp[0] in ("template", "struct"))
    key = offline_cache.forward_key(kernel, specs, state) if returns is None else None
    if shapes:  # a specialisation is never served to a launch of other shapes
        key = offline_cache.derived_key(key, f"shapes {sorted(shapes.items())!r}")
    if aliases is not None:  # nor one assuming disjoint ndarrays to a launch aliasing them
        key = offline_cache.derived_key(key, f"ndarray alias groups {aliases!r}")
    c = _cached(key, state, lambda tl: None, templates)
    if c is None:
        from ..frontend.transformer import compile_kernel
        kir = compile_kernel(kernel, specs, state, returns)
        tl, ptl = lower(kir, verify=debug_enabled(state), prints=state.prints,
                        independent=independent_loops(state), shapes=shapes,
                        lanes=env_lanes(state), aliases=aliases)
        c = _stored(_program(tl, state, None, templates, returns, cache_key=key, parallel=ptl))
    return c


@_logged("adjoint")
def compile_adjoint(fwd: Compiled, args, state) -> Compiled:
    """The adjoint program of a forward program (`args`: the launch's, for which ndarrays have
    gradients), with the adstack sizing of its tasks."""
    with _Deep(fwd.tl.name):
        c = _compile_adjoint(fwd, args, state)
    if c.sizing is not None and c.checkpointed is None and not state.options.ad_stack_size:
        c = replace(c, checkpointed=CheckpointedAdjoints.of(fwd, args, state))
    return c


@dataclass(frozen=True, eq=False)
class CheckpointedAdjoints:
    """`Compiled.checkpointed` of an adjoint with adstacks: S -> the adjoint with its tasks'
    top-level loops checkpointed every S trips (passes/autodiff/loop_checkpoint.py), or None
    when no loop of it stores a stacked local. The launch path calls it from `_budgeted` when
    a launch's adstack heap would pass `init(ad_stack_memory=)` (the runtime cannot import
    the compiler, so the compiler hands it this callable). Compiled on first use per S (kept in
    `made`), not stored in the offline cache."""
    fwd: Compiled
    args: tuple     # per argument: what `grad_of` reads of it (needs_grad), not the array
    state: object
    made: dict = field(default_factory=dict)  # S -> the checkpointed adjoint (or None)

    @staticmethod
    def of(fwd: Compiled, args, state) -> "CheckpointedAdjoints":
        return CheckpointedAdjoints(fwd, tuple(
            SimpleNamespace(needs_grad=bool(getattr(a, "needs_grad", False))) for a in args),
            state)

    def __call__(self, every: int):
        if every not in self.made:
            with _Deep(self.fwd.tl.name):
                self.made[every] = _compile_checkpointed(self.fwd, self.args, self.state, every)
        return self.made[every]


def _compile_checkpointed(fwd: Compiled, args, state, every: int):
    from passes.autodiff.pipeline import reverse_mode
    opts = state.options
    tl, counting_tl = reverse_mode(fwd.tl, grad_of_factory(args, state), None, None,
                                   verify=debug_enabled(state),
                                   adstack_enabled=opts.ad_stack_experimental_enabled,
                                   checkpoint=every, warn_overwritten_reads=_warn_overwritten())
    if not any(a.arg.name.endswith(".ckpt") for t in tl.tasks for a in adstack_allocas(t)):
        return None
    tl = dce_tasks(simplify_tasks(tl))
    counting = _program(dce_tasks(simplify_tasks(counting_tl)), state, None, fwd.template_refs)
    return _program(tl, state, ProgramSizing.of(tl, opts.adstack_cache, counting),
                    fwd.template_refs)


def _compile_adjoint(fwd: Compiled, args, state) -> Compiled:
    """The adjoint and, when some stack is measured, its counting program (sizing_cache)."""
    opts = state.options
    cache = opts.adstack_cache
    key = offline_cache.derived_key(fwd.cache_key, "adjoint")
    count_key = offline_cache.derived_key(fwd.cache_key, "adjoint_count")
    c = _cached(key, state, lambda tl: None, fwd.template_refs)
    if c is not None:
        measures = any(a.arg.measured >= 0 for t in c.tl.tasks for a in adstack_allocas(t))
        counting = _cached(count_key, state, lambda tl: None, fwd.template_refs) if measures \
            else None
        if not measures or counting is not None:  # else compile both again
            return replace(c, sizing=ProgramSizing.of(c.tl, cache, counting))
    from passes.autodiff.pipeline import reverse_mode
    tl, counting_tl = reverse_mode(fwd.tl, grad_of_factory(args, state),
                                   opts.default_ad_stack_size, opts.ad_stack_size,
                                   verify=debug_enabled(state),
                                   adstack_enabled=opts.ad_stack_experimental_enabled,
                                   warn_overwritten_reads=_warn_overwritten())
    tl = dce_tasks(simplify_tasks(tl))
    counting = None
    if counting_tl is not None:
        counting_tl = dce_tasks(simplify_tasks(counting_tl))
        counting = _stored(_program(counting_tl, state, None, fwd.template_refs,
                                    cache_key=count_key))
    return _stored(_program(tl, state, ProgramSizing.of(tl, cache, counting), fwd.template_refs,
                            cache_key=key))


@_logged("forward mode")
def compile_forward_mode(fwd: Compiled, args, state) -> Compiled:
    """The forward-mode program of a forward program (primals and duals; `sd.ad.FwdMode`);
    `args`: the launch's, for which ndarrays have duals."""
    with _Deep(fwd.tl.name):
        return _compile_forward_mode(fwd, args, state)


def _compile_forward_mode(fwd: Compiled, args, state) -> Compiled:
    key = offline_cache.derived_key(fwd.cache_key, "forward_mode")
    c = _cached(key, state, lambda tl: None, fwd.template_refs, fwd.returns)
    if c is not None:
        return c
    from passes.forward_mode import forward_mode
    verify = debug_enabled(state)
    tl = forward_mode(fwd.tl, dual_of_factory(args, state))
    if verify:
        verifier.verify_tasks(tl)
    tl = dce_tasks(simplify_tasks(tl))
    if verify:
        verifier.verify_tasks(tl)
    return _stored(_program(tl, state, None, fwd.template_refs, fwd.returns, cache_key=key))


def compile_validation(fwd: Compiled, state) -> Compiled:
    """The forward program instrumented for `Tape(validation=True)` (passes/validation)."""
    from passes.validation import instrument
    from ..recording.tape_validation import current
    v = current()
    tl = instrument(fwd.tl, v.checkbit_of, v.violations.ref())
    if debug_enabled(state):
        verifier.verify_tasks(tl)
    return _program(tl, state, None, fwd.template_refs, fwd.returns)


def _cached(key, state, sizing_of, templates, returns=None) -> Compiled | None:
    """The program stored under offline-cache `key`, rebuilt for this process, or None."""
    entry = offline_cache.load(key, state)
    if entry is None or not offline_cache.fields_match(entry["tl"], state, key.fields):
        return None
    tl = entry["tl"]
    c = _program(tl, state, sizing_of(tl), templates, returns, blob=entry["blob"],
                 ctl=entry.get("ctl"), cache_key=key)
    global _loaded
    _loaded = True
    return c


def _stored(c: Compiled) -> Compiled:
    """`c`, written to the offline cache under its `cache_key` unless it prints (its formats
    live in this process's print buffer) or the backend has no exportable form."""
    key = c.cache_key
    if key is not None and not c.prints and c.returns is None:
        blob = _state.backend().export_program(c.program)
        if blob is not None:
            offline_cache.store(key, {"tl": c.tl, "ctl": c.backend_tl, "blob": blob},
                                _state.current())
            global _saved
            _saved = True
    return c


def independent_loops(state) -> bool:
    """Whether forward programs run provably independent serialised loops in parallel
    (passes/independent_loops): on the CPU backend, with SPIRAD_INDEPENDENT_LOOPS=1 (off by
    default: Genesis ran slower with it, docs/performance.md), and only where the backend has
    a second worker thread. With one (`init(cpu_max_num_threads=1)`: what Genesis passes on
    the CPU unless QD_NUM_THREADS is set) a loop made parallel is never split; it would only
    change the code (a task per loop, bodies compiled as range tasks): box at `n_envs` 256
    15-23 % slower, Franka 2-8 % faster (docs/performance.md, gpar4)."""
    from .. import options
    return state.arch == "cpu" and bool(options.get("SPIRAD_INDEPENDENT_LOOPS")) and \
        _state.backend().rt.num_workers > 1


def env_lanes(state) -> bool:
    """Whether forward programs run their heaviest provably independent serialised loops in
    SIMD lanes (passes/independent_loops with `work_estimate.worth_lanes`, each such loop a
    range task whose iterations the code generator runs in lanes, its inner loops masked): on
    the CPU backend where the threaded form of the pass (`independent_loops`) does not run,
    with SPMD code on (`SPIRAD_CPU_SPMD`), without `debug` checks (lanes refuse them), on a
    target with 512-bit vectors (`codegen.heavy_lanes`: AVX2 compiled such a task for minutes),
    and SPIRAD_ENV_LANES (on by default). Genesis' narrow phase at one thread (`n_envs` 256,
    Franka, fields): 1.8x faster in 32 lanes, the same results bit for bit
    (docs/performance.md, glanes)."""
    from llvm_codegen.codegen import heavy_lanes

    from .. import options
    return state.arch == "cpu" and bool(options.get("SPIRAD_ENV_LANES")) and \
        not independent_loops(state) and not state.debug and \
        bool(options.get("SPIRAD_CPU_SPMD")) and heavy_lanes(options.llvm_codegen_options())


def alias_specialised(state) -> bool:
    """Whether forward programs are specialised on which ndarray storages share memory
    (`Kernel._alias_partition`): where passes/independent_loops runs (`independent_loops`,
    `env_lanes`), the one pass whose result depends on them; elsewhere a second program would
    be the same code compiled twice."""
    return state.arch == "cpu" and (independent_loops(state) or env_lanes(state))


def _program(tl: TaskList, state, sizing, templates, returns=None, blob=None,
             ctl=None, cache_key=None, parallel=None) -> Compiled:
    """Codegen through the backend, plus what a launch needs: host bound functions, the
    binding sources, what the program may read and write (generations to bump), its return values
    (`kernel_return`) and whether it prints (`printing`). `blob`: the backend's exported form
    of this task list's program (an offline-cache hit), imported instead of compiled; `ctl`:
    the task list it was compiled from, stored with it (the backend passes are not run again:
    they were most of a cache hit's Python work); `cache_key`: its offline-cache key, or None;
    `parallel`: `tl` with its independent serialised loops parallel (`lower`), which the backend
    compiles instead (autodiff keeps `tl`)."""
    if ctl is None:  # what the backend compiles (`tl`: autodiff's)
        ctl = promote_accumulators(tl if parallel is None else parallel)
        if state.options.deterministic:  # ordered atomics (passes/deterministic)
            ctl = serialise(ctl, _state.backend().ordered_chunk())
        ctl = demote_atomics(expand_math(ctl))
        ctl = taichi_addresses(ctl, _layout_lookup(state), bool(state.debug))
        if default_checks(state):  # loops versioned so that their checks run once, before them
            ctl = version_loops(ctl, task_bodies=state.arch == "cpu", tails=state.arch == "cpu")
    abi = kernel_abi(ctl)
    be = _state.backend()
    internal = (returns.fields if returns is not None else ()) + \
        (tuple(state.prints.fields.values()) if state.prints is not None else ()) + \
        ((state.rng,) if state.rng is not None else ()) + \
        (state.validation.fields() if state.validation is not None else ()) + \
        ((state.asserts.flag,) if state.asserts is not None else ())
    fields = {**state.field_map(), **{f.id: f for f in internal}}
    for ref in abi.bindings:  # the program's fields get their memory (a backend places them)
        if ref.kind == "field":
            fields[ref.key]._storage()
    program = be.compile(ctl, abi) if blob is None else be.import_program(ctl, abi, blob)
    bounds = tuple(None if t.kind == "serial" else  # `ctl`'s: a serialised task is serial
                   DEVICE_BOUNDS if on_device else (_host_fn(t.begin), _host_fn(t.end))
                   for t, on_device in zip(ctl.tasks, abi.device_ranges))
    print_ids = {f.id for f in state.prints.fields.values()} if state.prints is not None else set()
    written, read = set(), set()
    for t in tl.tasks:
        r, w = globals_used(t.body)
        written |= {g.buffer for g in w}
        read |= {g.buffer for g in r}
        for bound in (t.begin, t.end) if t.kind == "range" else ():  # a range read from globals
            read |= {n.arg.buffer for n in expr_nodes(bound) if n.op == Op.GLOBAL_LOAD}
    writes, reads, srcs = [], [], []
    for ref in abi.bindings:
        if ref.kind == "field":
            srcs.append(("field", fields[ref.key]))
        elif ref.kind == "ndarray":
            srcs.append(("ndarray", ref.key, ref.buffer[2]))
        else:
            srcs.append(("temp", ref.key))
        if ref.buffer in written:
            writes.append(srcs[-1])
        if ref.buffer in read:
            reads.append(srcs[-1])
    prints = any(r.kind == "field" and r.key in print_ids for r in abi.bindings)
    return Compiled(tl, abi, program, bounds, tuple(writes), tuple(srcs), sizing, templates,
                    returns=returns, prints=prints, cache_key=cache_key, reads=tuple(reads),
                    backend_tl=ctl)


def _layout_lookup(state):
    """field id -> its Taichi layout (`spirad.data.snode_layout`) or None. A `Tape(validation=
    True)` checkbit field is indexed as its field (the same indices reach the same element)."""
    fields = dict(state.field_map())
    if state.validation is not None:
        for fid, cb in state.validation.checkbits.items():
            fields.setdefault(cb.id, fields.get(fid))

    def layout(key):
        f = fields.get(key)
        return layout_of(f) if f is not None else None
    return layout


def grad_of_factory(args, state):
    """ref -> the GlobalRef of its gradient, or None (no gradient: not differentiated)."""
    fields = state.field_map()

    def grad_of(ref: GlobalRef):
        if ref.kind == "field":
            f = fields.get(ref.key)
            if f is None or not f.needs_grad:
                return None
            g = f.grad
            return GlobalRef("field", g.id, g.dtype, ref.ndim, ref.shape, g.name, False)
        if ref.kind == "ndarray":
            if ref.grad or not args[ref.key].needs_grad:
                return None
            return GlobalRef("ndarray", ref.key, ref.dtype, ref.ndim, ref.shape, ref.name + ".grad",
                             True)  # (`shape`: set in a program specialised on its shapes)
        if ref.kind == "temp" and ref.dtype.is_float and not ref.grad:
            return GlobalRef("temp", ref.key, ref.dtype, 1, (1,), ref.name + ".grad", True)
        return None
    return grad_of


def dual_of_factory(args, state):
    """ref -> the GlobalRef of its forward-mode dual, or None (it has none)."""
    fields = state.field_map()

    def dual_of(ref: GlobalRef):
        if ref.kind == "field":
            f = fields.get(ref.key)
            if f is None or f._dual is None:
                return None
            d = f._dual
            return GlobalRef("field", d.id, d.dtype, ref.ndim, ref.shape, d.name)
        if ref.kind == "ndarray" and not (ref.grad or ref.dual) and args[ref.key].needs_dual:
            return GlobalRef("ndarray", ref.key, ref.dtype, ref.ndim, ref.shape, ref.name + ".dual",
                             dual=True)
        return None
    return dual_of


def _host_fn(expr):
    """A host-evaluable bound expression as a Python closure (scalars, shapes) -> int."""
    op = expr.op
    if op == Op.CONST:
        v = int(expr.arg)
        return lambda s, sh: v
    if op == Op.ARG:
        i, dt = expr.arg, expr.dtype
        return lambda s, sh: int(cast_value(s[i], dt))
    if op == Op.NDARRAY_SHAPE:
        key = expr.arg
        return lambda s, sh: sh[key]
    subs = [_host_fn(x) for x in expr.srcs]
    if op == Op.CAST:
        dt = expr.dtype
        return lambda s, sh: int(cast_value(subs[0](s, sh), dt))
    if op in BINARY_IMPL:
        f, dt = BINARY_IMPL[op], expr.srcs[0].dtype
        return lambda s, sh: int(f(cast_value(subs[0](s, sh), dt), cast_value(subs[1](s, sh), dt), dt))
    if op in UNARY_IMPL:
        f, dt = UNARY_IMPL[op], expr.dtype
        return lambda s, sh: int(f(cast_value(subs[0](s, sh), dt), dt))
    if op == Op.SELECT:
        return lambda s, sh: subs[1](s, sh) if subs[0](s, sh) else subs[2](s, sh)
    raise RuntimeError(f"bound expression op {op} is not host-evaluable")


def debug_enabled(state) -> bool:
    from .. import options
    return state.debug or options.get("SPIRAD_VERIFY")


def _warn_overwritten() -> bool:
    """SPIRAD_AD_OVERWRITTEN_READS=warn: reverse mode warns about a read of an overwritten value
    instead of refusing the kernel (read here: the passes read no switch)."""
    from .. import options
    return options.get("SPIRAD_AD_OVERWRITTEN_READS") == "warn"
