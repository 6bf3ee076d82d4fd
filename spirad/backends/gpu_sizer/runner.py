"""The GPU sizer's glue: device buffers, kernel launches, rounds and the one read-back.

`GpuSizer` is a backend's `gpu_sizer` hook (`BackendBase.gpu_sizer`): `spirad.runtime.sizing_cache`
calls `size(task_sizing, args)` on a cache miss of a task whose size expressions read device
data. Per call:

1. *Fast path* (`reduce`): a MaxOverRange whose body is a non-decreasing function of one data
   read becomes the body at the maximum the device computes for the read range (`sizer_minmax`:
   one load per element); when nothing device-resident is left, the host finishes the (now
   constant) expression and the layout (`sizing_cache.host_sized`).
2. *Plan* (kept per task while its scalar args, shapes, leaf buffers and expressions stay the
   same): the tables of `device_program.build`, uploaded once; the job table too, unless a
   root's range bounds read device data (then a first round evaluates them, `_run_prepass`).
3. *Run*: `sizer_eval` (one invocation per job), `sizer_reduce` (per root) and `sizer_layout`
   recorded in one batch; one sync; one read-back of the result record, which holds everything
   the host needs (status, the first error with its node / value / axis, strides, per root the
   offset, capacity and value). An invocation that hits its record budget saves its `ip` and
   the host runs another round (rare: only when a loop body is far costlier than estimated).
4. *Result*: `SizedTask(caps, layout, device_meta)`: `layout` is decoded from the read-back
   words (`sizer.Layout.from_metadata`, checked, not recomputed) and `device_meta` is the
   buffer `sizer_layout` wrote the task's metadata words into; the backend binds it as the
   task's metadata buffer (nothing is uploaded).

Metadata buffers belong to the result they hold: a launch recorded earlier, or a later cache
hit, binds its own result's buffer, so no sizing ever rewrites a buffer a SizedTask handed out.
Per task the runner keeps its last result and one *spare* buffer that no launch binds; each run
writes the spare, and when the layout comes out unchanged (the common miss: data changed, sizes
did not) the last result is returned again and the spare stays spare, so an unchanged miss
allocates nothing and the task's launches keep their descriptor sets.

Scratch buffers (job states, values, per-root results, the result record) are shared by all
tasks: every run waits for its kernels before it returns.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

import sizer as sz
import sizer.device_format as F

from ...runtime import state as _state
from . import device_program as dp
from . import reduce as R
from .device_program import Leaf, Unsupported
from .kernels import SizerKernels

DEFAULT_BUDGET = 1 << 16    # records per invocation used to size slices on uncapped devices
BUDGET_MARGIN = 64
UNLIMITED = 1 << 62


@dataclass
class Result:
    values: list          # per root: the evaluated value (may be negative); None on error
    errors: list          # per root: 0, or the error code of its failing evaluation
    caps: list            # per root: max(value, 0)
    metadata: list        # [stride_float, stride_int, (offset, max_size) per stack]; [] on error
    dispatches: int       # sizer_eval rounds run (1 unless an invocation ran out of budget)
    meta: object          # the Ndarray (uint32) sizer_layout wrote the metadata words into
    layout_error: int = 0  # F.ERR_LAYOUT / F.ERR_META32 when the layout failed, else 0


@dataclass(eq=False)
class Plan:
    """One DeviceProgram uploaded: its tables, data slot views and job table."""
    key: tuple
    program: dp.DeviceProgram
    prog: object                # Ndarray i32: program.words
    slots: tuple                # F.DATA_SLOTS Ndarrays: aliases of the leaves' buffers, or dummies
    jobs: object = None         # Ndarray i32: the job table (set once the ranges are known)
    n_jobs: int = 0

    @property
    def n_roots(self) -> int:
        return self.program.n_roots


@dataclass(eq=False)
class _TaskState:
    plan: Plan = None
    sized: object = None        # the last device-sized SizedTask (its buffer holds its words)
    spare: object = None        # a metadata Ndarray no launch binds


class GpuSizer:
    """One per backend: compiled sizer kernels, scratch buffers, per-task plans and results.

    `loop_cap`: the device's loop-iteration cap per invocation (None: none)."""

    def __init__(self, backend, loop_cap=None, int_slots=None, f32_slots=None):
        """`int_slots` / `f32_slots`: how many int / f32 data slots `sizer_eval` reads (default
        all of `sizer.device_format`); fewer bind fewer buffers (a device with few storage
        buffers), and a task whose leaves need more is sized on the host (`Unsupported`)."""
        self.be = backend
        self.int_slots = F.INT_SLOTS if int_slots is None else int(int_slots)
        self.f32_slots = F.F32_SLOTS if f32_slots is None else int(f32_slots)
        self.loop_cap = loop_cap
        self.has_f64 = bool(backend.capabilities().get("f64", False))
        self.budget = loop_cap - BUDGET_MARGIN if loop_cap else UNLIMITED
        self.slice_budget = loop_cap - BUDGET_MARGIN if loop_cap else DEFAULT_BUDGET
        self.kernels = SizerKernels()
        self.tasks = weakref.WeakKeyDictionary()  # TaskSizing -> _TaskState
        self.reduced_nodes = 0  # MaxOverRange nodes the fast path replaced (tests read it)
        self._scratch = {}
        self._dummies = None

    # -- buffers -------------------------------------------------------------------------------
    def _ndarray(self, dtype, n):
        """A scratch ndarray over a buffer of its own, not in the backend's arenas: the metadata
        the sizer writes is bound whole by the adjoint's launch (`SizedTask.device_meta`), and
        sizing never grows an arena (which would move the root buffers under the field leaves
        of the plan being built)."""
        n = max(int(n), 1)
        return _state.ALIAS_ARRAY(self.be.allocate(n * dtype.nbytes), dtype, (n,))

    def scratch(self, name, dtype, n):
        """A shared scratch ndarray of at least `n` elements, grown by doubling."""
        cur = self._scratch.get(name)
        if cur is None or cur.shape[0] < n:
            size = max(n, 2 * cur.shape[0] if cur is not None else 64)
            cur = self._scratch[name] = self._ndarray(dtype, size)
        return cur

    def _write(self, nd, arr: np.ndarray):
        self.be.write(nd._storage(), arr)

    def _read(self, nd, np_dtype, count: int) -> np.ndarray:
        return self.be.read(nd._storage(), int(count) * np.dtype(np_dtype).itemsize).view(np_dtype)

    def _dummy(self):
        """Placeholder (i32, f32, f64) ndarrays for unused data slots."""
        if self._dummies is None:
            from kernel_ir import dtypes as T
            self._dummies = (self._ndarray(T.i32, 4), self._ndarray(T.f32, 4),
                             self._ndarray(T.f64 if self.has_f64 else T.i32, 4))
        return self._dummies

    def _slot_views(self, storages) -> tuple:
        from kernel_ir import dtypes as T
        dummies = dict(zip(("i32", "f32", "f64"), self._dummy()))
        views = []
        for name, st in zip(dp.SLOT_DTYPES, storages):
            if st is None:
                views.append(dummies[name])
            else:
                dtype = getattr(T, name)
                views.append(_state.ALIAS_ARRAY(st, dtype, (max(st.nbytes // dtype.nbytes, 1),)))
        return tuple(views)

    # -- plan ----------------------------------------------------------------------------------
    def plan(self, exprs, *, leaves: dict, scalars: dict, shapes: dict, entry_sizes=None,
             kinds=None, key=None) -> Plan:
        """Build (`device_program.build`) and upload. Raises `Unsupported`."""
        from kernel_ir import dtypes as T
        program = dp.build(exprs, leaves=leaves, scalars=scalars, shapes=shapes,
                           entry_sizes=entry_sizes, kinds=kinds, has_f64=self.has_f64,
                           int_slots=self.int_slots, f32_slots=self.f32_slots)
        prog = self._ndarray(T.i32, len(program.words))
        self._write(prog, program.words)
        plan = Plan(key, program, prog, self._slot_views(program.slots))
        if not program.prepass:
            self._upload_jobs(plan, program.split)
        return plan

    def _upload_jobs(self, plan: Plan, split: dict):
        from kernel_ir import dtypes as T
        words = dp.job_table(plan.program.roots, split, self.slice_budget)
        if plan.jobs is None or plan.jobs.shape[0] < len(words):
            plan.jobs = self._ndarray(T.i32, len(words))
        self._write(plan.jobs, words)
        plan.n_jobs = int(words[F.JOBS_N_JOBS])

    # -- run -----------------------------------------------------------------------------------
    def _launch_eval(self, plan: Plan, jobs_nd, n_jobs: int, round_: int):
        from kernel_ir import dtypes as T
        vstride = plan.program.vstride
        val = self.scratch("val", T.i64, n_jobs * vstride)
        jst = self.scratch("jst", T.i64, n_jobs * F.JST_WORDS)
        self.kernels.run("sizer_eval", (plan.prog, jobs_nd, val, jst, *plan.slots, n_jobs, round_,
                                        self.budget, vstride, self.has_f64, self.int_slots,
                                        self.f32_slots))
        return jst

    def _run_prepass(self, plan: Plan) -> int:
        """Evaluate the begin / end of every root whose outermost range reads device data, then
        upload the job table; returns the rounds run."""
        from kernel_ir import dtypes as T
        words = dp.prepass_table(plan.program.prepass)
        n = int(words[F.JOBS_N_JOBS])
        nd = self.scratch("prejobs", T.i32, len(words))
        self._write(nd, words)
        round_ = 0
        while True:
            jst = self._launch_eval(plan, nd, n, round_)
            self.be.sync()
            st = self._read(jst, np.int64, n * F.JST_WORDS).reshape(n, F.JST_WORDS)
            if (st[:, F.JST_STATUS] >= F.JOB_DONE).all():
                break
            round_ += 1
        self._upload_jobs(plan, dp.prepass_split(plan.program, st))
        return round_ + 1

    def run(self, plan: Plan, layout: bool = False, raise_errors: bool = True,
            meta=None) -> Result:
        """Evaluate every root of `plan`; the metadata words go to `meta` (a uint32 Ndarray of
        at least `F.meta_words(n_stacks)` words; None: a scratch buffer). With `raise_errors`,
        an evaluation error raises `SizerError` naming the leaf; else it is reported per root in
        `Result.errors`. With `layout`, a layout error raises too."""
        from kernel_ir import dtypes as T
        program = plan.program
        rounds = self._run_prepass(plan) if program.prepass else 0
        n_roots = program.n_roots
        rres = self.scratch("rres", T.i64, n_roots * F.RRES_WORDS)
        n_res = F.res_words(n_roots)
        res = self.scratch("res", T.i64, n_res)
        if meta is None:
            meta = self.scratch("meta", T.u32, F.meta_words(program.n_stacks))
        round_ = 0
        while True:
            jst = self._launch_eval(plan, plan.jobs, plan.n_jobs, round_)
            self.kernels.run("sizer_reduce", (plan.jobs, jst, rres, n_roots))
            self.kernels.run("sizer_layout", (plan.prog, rres, jst, res, meta, n_roots))
            self.be.sync()
            out = self._read(res, np.int64, n_res)       # the one read-back of this round
            rounds += 1
            if out[F.RES_STATUS] != F.STATUS_PENDING:
                break
            round_ += 1
        status, err = int(out[F.RES_STATUS]), int(out[F.RES_ERR])
        per = out[F.RES_HEADER:].reshape(n_roots, F.RES_ROOT)
        errors = per[:, F.RES_ROOT_ERR].tolist()
        if status == F.STATUS_ERROR and any(errors) and raise_errors:
            raise sz.SizerError(dp.error_message(
                program, err, int(out[F.RES_ERR_NODE]), int(out[F.RES_ERR_VALUE]),
                int(out[F.RES_ERR_AXIS])))
        values = [None if e else int(v) for v, e in zip(per[:, F.RES_VALUE].tolist(), errors)]
        caps = [None if v is None else max(v, 0) for v in values]
        layout_error = err if status == F.STATUS_ERROR and not any(errors) else 0
        metadata = []
        if not any(errors):
            metadata = [int(out[F.RES_STRIDE_FLOAT]), int(out[F.RES_STRIDE_INT])] + \
                per[:program.n_stacks, [F.RES_OFFSET, F.RES_CAP]].reshape(-1).tolist()
        if layout and layout_error:
            raise sz.SizerError(f"layout: {F.ERR_NAMES.get(layout_error, layout_error)}")
        return Result(values, errors, caps, metadata, rounds, meta, layout_error)

    # -- the MaxOverRange fast path (reduce) ---------------------------------------------------
    def reduce_ranges(self, exprs, leaves: dict, scalars: dict, shapes: dict):
        """`exprs` with every MaxOverRange that `reduce.find` accepts replaced by its value, from
        one batch of device min/max reductions and one sync; `exprs` itself when there is none."""
        from kernel_ir import dtypes as T
        folded, found = R.find(exprs, leaves, scalars, shapes)
        if not found:
            return exprs
        reds = []
        for red in found.values():
            if red is not None:
                dt = R.device_dtype(red, leaves[red.leaf_key], self.has_f64)
                if dt is not None:
                    reds.append((red, leaves[red.leaf_key], dt))
        results = {}
        if reds:
            out = self.scratch("minmax_out", T.i64, F.MINMAX_WORDS * len(reds))
            dummy_i, dummy_f, dummy_d = self._dummy()
            for s, (red, lf, dt) in enumerate(reds):
                dtype = {F.DT_F32: T.f32, F.DT_F64: T.f64}.get(dt, T.i32)
                view = _state.ALIAS_ARRAY(lf.storage, dtype,
                                          (max(lf.storage.nbytes // dtype.nbytes, 1),))
                di = view if dtype is T.i32 else dummy_i
                df = view if dt == F.DT_F32 else dummy_f
                dd = view if dt == F.DT_F64 else dummy_d
                chunk, n_parts = R.partition(red.count)
                part = self.scratch(f"minmax_part{s}", T.i64, F.MINMAX_WORDS * n_parts)
                self.kernels.run("sizer_minmax", (di, df, dd, part, red.first, red.stride,
                                                  red.count, chunk, n_parts, dt), variant=dt)
                self.kernels.run("sizer_minmax_total", (part, out, n_parts, s))
            self.be.sync()
            words = self._read(out, np.int64, F.MINMAX_WORDS * len(reds)).reshape(
                len(reds), F.MINMAX_WORDS)
            results = {red: (int(w[F.MINMAX_MIN]), int(w[F.MINMAX_MAX]), int(w[F.MINMAX_BAD]))
                       for (red, _, _), w in zip(reds, words)}
        done = {n: r for n, r in found.items() if r is None or r in results}
        out = R.rewrite(folded, done, results)
        self.reduced_nodes += sum(1 for a, b in zip(folded, out) if a != b)
        return out

    # -- the hook `spirad.runtime.sizing_cache` calls ---------------------------------------------------
    def size(self, ts, args):
        """The SizedTask of one task's stacks for this launch, evaluated by the GPU sizer kernel;
        None when the task's leaves are unsupported (the caller evaluates on the host)."""
        from ...runtime.sizing_cache import SizedTask, check_metadata_words, host_sized
        leaves, scalars, shapes = task_leaves(ts, args)
        exprs = self.reduce_ranges(list(ts.exprs), leaves, scalars, shapes)
        if exprs != list(ts.exprs) and not any(sz.has_device_leaves(e) for e in exprs):
            ctx = sz.DictContext(scalars=scalars, shapes=shapes)  # nothing left on the device
            caps = [max(int(sz.eval_fast(e, ctx)), 0) for e in exprs]
            return host_sized(caps, ts.entry_sizes, ts.kinds)
        key = (tuple(sorted((i, repr(v)) for i, v in scalars.items())),
               tuple(sorted(shapes.items())),
               tuple((k, id(lf.storage), lf.dtype.name, lf.shape) for k, lf in leaves.items()),
               tuple(exprs))
        st = self.tasks.get(ts)
        if st is None:
            st = self.tasks[ts] = _TaskState()
        if st.plan is None or st.plan.key != key:
            try:
                st.plan = self.plan(exprs, leaves=leaves, scalars=scalars, shapes=shapes,
                                    entry_sizes=ts.entry_sizes, kinds=ts.kinds, key=key)
            except Unsupported:
                return None
        if st.spare is None:
            from kernel_ir import dtypes as T
            st.spare = self._ndarray(T.u32, F.meta_words(len(ts.entry_sizes)))
        meta = st.spare
        res = self.run(st.plan, meta=meta)
        if res.layout_error == F.ERR_LAYOUT:
            raise sz.SizerError("layout: per-thread stride overflows")
        if res.layout_error == F.ERR_META32:
            check_metadata_words(res.metadata)  # raises the host's error
        try:
            layout = sz.Layout.from_metadata(res.metadata, ts.entry_sizes, ts.kinds)
        except sz.SizerError as e:
            raise RuntimeError(f"the GPU sizer wrote an invalid adstack layout: {e}") from None
        if res.layout_error or layout.max_sizes != tuple(res.caps):
            raise RuntimeError(f"the GPU sizer's layout {res.metadata} does not hold its "
                               f"capacities {res.caps} (layout error {res.layout_error})")
        if st.sized is not None and st.sized.layout == layout:
            return st.sized      # its buffer holds these words already; the spare stays spare
        st.spare = None
        st.sized = SizedTask(tuple(res.caps), layout, device_meta=meta._storage())
        return st.sized


def task_leaves(ts, args) -> tuple:
    """(leaves, scalars, shapes) of a TaskSizing at this launch."""
    from ...runtime.state import current
    from ...runtime.state import backend
    lv = ts.leaves
    leaves = {}
    if lv.fields:
        fields = current().field_map()
        be = backend()
        for fid in sorted(lv.fields):
            f = fields.get(fid)
            if f is not None:  # a field in a root buffer: its buffer and element offset there
                buf, off = be.storage_parts(f._storage())
                leaves[("field", fid)] = Leaf(buf, f.dtype, f.full_shape, off // f.dtype.nbytes)
    for i in sorted(lv.ndarrays):
        a = args[i]
        leaves[("ndarray", i)] = Leaf(a._storage(), a.dtype, a.storage_shape)
    scalars = {i: args[i] for i in lv.scalars}
    shapes = {i: args[i].storage_shape for i in lv.shapes}
    return leaves, scalars, shapes
