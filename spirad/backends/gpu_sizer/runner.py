"""Host side of the GPU sizer: evaluate a task's size expressions on the device.

The device side is `shaders/sizer_kernel.py`, three ordinary spirad kernels (compiled by the
backend's own code generator, so nothing extra is installed). Per sizing (a cache miss of
`spirad.sizing_cache`):

1. *Plan* (cached per task until its scalar args, shapes or leaf buffers change): encode the
   expressions with the launch's scalar args / ndarray shapes folded in, rewrite the bytecode into
   the device dialect (remaining SCALAR_ARG / NDARRAY_SHAPE records resolved on the host to CONST
   or ERR; the `a` word of FIELD_LOAD / NDARRAY_READ becomes a leaf-table index), append the leaf
   and stack tables, and build the *job* table. A root `MaxOverRange(v, b, e, body)` whose `b`
   and `e` are constants is split into slices of `v` (one job each) so that no invocation runs
   more records than the device's loop-iteration cap allows and the work spreads over many
   invocations; when `b` / `e` read device data, one extra round evaluates them first.
   Uploaded once per plan.
2. *Run*: `sizer_eval` (one invocation per job), `sizer_reduce` (max per root),
   `sizer_layout` (capacities and `compute_layout`, metadata words) recorded in one batch; one
   sync; read back the small result. An invocation that hits its record budget saves its `ip`
   and the host runs another round (rare: only when a loop body is far costlier than estimated).
Before planning, `reduce_ranges` applies the fast path of `gpu_sizer_reduce`: a MaxOverRange
whose body is a non-decreasing function of one data read becomes the body at the maximum the
device computes for the read range (`sizer_minmax`: one load per element instead of one
interpreted record sweep per element); when nothing device-resident is left, the host finishes
the (now constant) expression.

3. *Errors*: an evaluation error (bad read index, overflow, NaN / inf data, rank mismatch) comes
   back as (code, node, value, axis); the host raises `sizer.SizerError` naming the leaf.

Data leaves are read straight from the fields' / ndarrays' device buffers through aliasing
ndarrays: int data (i32, u32, u1, i64) as int32 words in up to `INT_SLOTS` buffers, f32 data in up
to `F32_SLOTS`, f64 data in up to `F64_SLOTS` (devices with f64 only). A task whose leaves do not
fit these slots, or whose shapes do not fit int32 words, is evaluated on the host instead
(`Unsupported`); results are identical either way.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import sizer as sz
from sizer.bytecode import Op, const_words
from sizer.evaluate import to_int

INT_SLOTS, F32_SLOTS, F64_SLOTS = 4, 2, 2
LEAF_WORDS, JOB_WORDS, JST_WORDS, RRES_WORDS, RES_HEADER, RES_ROOT = 12, 8, 8, 4, 6, 3
OP_ERR = 13
DTYPE_CODES = {"i32": 1, "u32": 2, "u1": 2, "i64": 3, "f32": 4, "f64": 5}
STACK_KIND_CODES = {"float": 0, "int": 1, "primal": 2}  # layout kinds, as the shader reads them
MIN_JOBS = 1024             # a split root spreads over at least this many invocations (if long)
MAX_JOBS_PER_ROOT = 32768   # sizer_reduce loops over a root's jobs: stay under any loop cap
DEFAULT_BUDGET = 1 << 16    # records per invocation used to size slices on uncapped devices
BUDGET_MARGIN = 64
UNLIMITED = 1 << 62

ERR_NAMES = {1: "index out of range", 2: "overflow", 3: "non-finite or out-of-range float",
             4: "leaf rejected by the host", 5: "wrong number of indices",
             6: "per-thread stride overflows", 7: "metadata word does not fit 32 bits"}


class Unsupported(Exception):
    """This task's leaves cannot be read by the GPU sizer; evaluate on the host."""


@dataclass(frozen=True)
class Leaf:
    """One array a FIELD_LOAD / NDARRAY_READ reads: backend storage, element dtype (a
    `kernel_ir.dtypes.DType`), full shape, and the element offset of element 0 in the storage."""
    storage: object
    dtype: object
    shape: tuple
    base: int = 0


@dataclass
class Result:
    values: list          # per root: the evaluated value (may be negative); None on error
    errors: list          # per root: 0, or the error code of its failing evaluation
    caps: list            # per root: max(value, 0)
    metadata: list        # [stride_float, stride_int, (offset, max_size) per stack] (with layout)
    dispatches: int       # sizer_eval rounds run (1 unless an invocation ran out of budget)


@dataclass
class _Plan:
    key: tuple
    code: np.ndarray            # the original (host) bytecode, for error messages
    prog: object                # Ndarray i32: device-dialect bytecode + tables
    jobs: object                # Ndarray i32
    n_jobs: int
    n_roots: int
    vstride: int
    slots: list                 # 8 aliasing Ndarrays (di0..3, df0..1, dd0..1)
    leaf_info: dict             # leaf index -> (name, shape)
    host_errors: dict           # node -> message of a leaf the host rejects
    prepass: list = field(default_factory=list)  # roots whose loop bounds need a first round
    split: dict = field(default_factory=dict)
    keep: tuple = ()            # storages the slot aliases point into
    roots: list = field(default_factory=list)   # (first node, root node) per root
    rec: object = None          # device-dialect node records (int64, n_nodes x 4)


def _as_i32(x: int) -> int:
    return x - (1 << 32) if x >= 1 << 31 else x


class GpuSizer:
    """One per backend: compiled sizer kernels, scratch buffers, per-task plans.

    `loop_cap`: the device's loop-iteration cap per invocation (None: none)."""

    def __init__(self, backend, loop_cap=None):
        import weakref
        self.be = backend
        self.loop_cap = loop_cap
        self.has_f64 = bool(backend.capabilities().get("f64", False))
        self.plans = weakref.WeakKeyDictionary()  # TaskSizing -> its last _Plan
        self.budget = self.loop_cap - BUDGET_MARGIN if self.loop_cap else UNLIMITED
        self.slice_budget = self.loop_cap - BUDGET_MARGIN if self.loop_cap else DEFAULT_BUDGET
        self._compiled = {}
        self._minmax = {}  # leaf dtype code -> compiled sizer_minmax
        self.reduced_nodes = 0  # MaxOverRange nodes the fast path replaced (tests read it)
        self._scratch = {}
        self._dummies = None

    # -- buffers -------------------------------------------------------------------------------
    def _ndarray(self, dtype, n):
        from ..ndarray import Ndarray
        return Ndarray(dtype, (max(int(n), 1),))

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
        if self._dummies is None:
            from kernel_ir import dtypes as T
            self._dummies = (self._ndarray(T.i32, 4), self._ndarray(T.f32, 4),
                             self._ndarray(T.f64 if self.has_f64 else T.i32, 4))
        return self._dummies

    # -- plan ----------------------------------------------------------------------------------
    def plan(self, exprs, *, leaves: dict, scalars: dict, shapes: dict, entry_sizes=None,
             kinds=None, key=None) -> _Plan:
        """Encode and upload. `leaves`: {('field', id) | ('ndarray', arg): Leaf}; `scalars`:
        {arg: value}; `shapes`: {arg: shape tuple}. Raises `Unsupported`."""
        from kernel_ir import dtypes as T
        # bytecode, with every scalar / shape the host can convert folded in
        ok_scalars = {}
        for i, v in scalars.items():
            try:
                ok_scalars[i] = to_int(v, f"ScalarArg({i})")
            except sz.SizerError:
                pass
        try:
            code = sz.encode(exprs, scalar_args=ok_scalars, ndarray_shapes=shapes)
        except sz.SizerError:
            code = sz.encode(exprs, fold=False)
        h = sz.bytecode.Header(code[:sz.HEADER_WORDS])
        if h.n_roots == 0:
            raise Unsupported("no roots")
        dev = code.astype(np.int64)
        rec = dev[h.nodes_off:h.index_off].reshape(h.n_nodes, 4)

        # leaves -> slots and the leaf table
        classes = {1: "i", 2: "i", 3: "i", 4: "f", 5: "d"}
        limits = {"i": INT_SLOTS, "f": F32_SLOTS, "d": F64_SLOTS if self.has_f64 else 0}
        slot_of: dict = {}          # (class, id(storage)) -> slot
        slot_store: dict = {}       # (class, slot) -> storage
        leaf_index: dict = {}
        table, leaf_info = [], {}
        for lk, lf in leaves.items():
            code_ = DTYPE_CODES.get(lf.dtype.name)
            if code_ is None:
                raise Unsupported(f"leaf dtype {lf.dtype}")
            cl = classes[code_]
            sk = (cl, id(lf.storage))
            if sk not in slot_of:
                n_in = sum(1 for c, _ in slot_of if c == cl)
                if n_in >= limits[cl]:
                    raise Unsupported(f"more than {limits[cl]} '{cl}' data buffers")
                slot_of[sk] = n_in
                slot_store[(cl, n_in)] = lf.storage
            shape = tuple(int(s) for s in lf.shape)
            if len(shape) > sz.MAX_INDICES or any(s >= 2**31 for s in shape):
                raise Unsupported("shape does not fit int32 words")
            count = int(np.prod(shape, dtype=object)) if shape else 1
            words = (lf.base + count) * (2 if code_ == 3 else 1)
            if lf.base >= 2**31 or words >= 2**31:
                raise Unsupported("array too large for int32 word indices")
            leaf_index[lk] = len(table)
            leaf_info[len(table)] = (lk, shape)
            table.append([code_, slot_of[sk], len(shape), lf.base] + list(shape)
                         + [0] * (sz.MAX_INDICES - len(shape)))

        host_errors = {}
        ops = rec[:, 0]
        for i in np.flatnonzero((ops >= Op.SCALAR_ARG) & (ops <= Op.NDARRAY_READ)).tolist():
            op, a, b = int(rec[i, 0]), int(rec[i, 1]), int(rec[i, 2])
            if op in (Op.FIELD_LOAD, Op.NDARRAY_READ):
                lk = ("field" if op == Op.FIELD_LOAD else "ndarray", a)
                if lk in leaf_index:
                    rec[i, 1] = leaf_index[lk]
                else:
                    rec[i, 0] = OP_ERR
                    host_errors[i] = f"{'FieldLoad' if op == Op.FIELD_LOAD else 'NdarrayRead'}" \
                                     f"({a}): no data for this leaf"
                continue
            try:
                if op == Op.SCALAR_ARG:
                    if a not in scalars:
                        raise sz.SizerError(f"ScalarArg({a}): no scalar argument {a}")
                    v = to_int(scalars[a], f"ScalarArg({a})")
                else:
                    shape = shapes.get(a)
                    if shape is None:
                        raise sz.SizerError(f"NdarrayShape({a}, {b}): no ndarray argument {a}")
                    if not 0 <= b < len(shape):
                        raise sz.SizerError(f"NdarrayShape({a}, {b}): axis out of range for "
                                            f"rank {len(shape)}")
                    v = to_int(shape[b], f"NdarrayShape({a}, {b})")
                lo, hi = const_words(v)
                rec[i] = (Op.CONST, lo, hi, 0)
            except sz.SizerError as e:
                rec[i] = (OP_ERR, 0, 0, 0)
                host_errors[i] = str(e)

        # stacks and the aux header
        n_stacks = len(entry_sizes) if entry_sizes is not None else 0
        aux_off = len(dev)
        leaf_off = aux_off + 4
        stack_off = leaf_off + LEAF_WORDS * len(table)
        aux = [leaf_off, len(table), stack_off, n_stacks]
        flat_leaves = [w for row in table for w in row]
        stacks = []
        if n_stacks:
            for s_, k_ in zip(entry_sizes, kinds):
                stacks += [int(s_), STACK_KIND_CODES[k_]]
        prog_words = np.concatenate([dev, np.array(aux + flat_leaves + stacks, dtype=np.int64)])
        prog = self._ndarray(T.i32, len(prog_words))
        self._write(prog, prog_words.astype(np.int32))

        # jobs: split roots whose outermost MaxOverRange has constant bounds
        roots = dev[h.roots_off:h.nodes_off].reshape(h.n_roots, 2).tolist()
        split, prepass = {}, []
        for r, (first, last) in enumerate(roots):
            if rec[last, 0] != Op.MOR:
                continue
            p = int(rec[last, 2])
            ba, ea = int(rec[p, 1]), int(rec[p, 2])
            if rec[ba, 0] == Op.CONST and rec[ea, 0] == Op.CONST:
                bv = sz.bytecode.const_value(int(rec[ba, 1]), int(rec[ba, 2]))
                ev = sz.bytecode.const_value(int(rec[ea, 1]), int(rec[ea, 2]))
                split[r] = (p, bv, ev)
            else:
                prepass.append((r, first, ba, ea, p))

        slots = []
        dummy_i, dummy_f, dummy_d = self._dummy()
        from ..ndarray import Ndarray
        for cl, n, dtype, dummy in (("i", INT_SLOTS, T.i32, dummy_i), ("f", F32_SLOTS, T.f32, dummy_f),
                                    ("d", F64_SLOTS, T.f64, dummy_d)):
            for k in range(n):
                st = slot_store.get((cl, k))
                if st is None:
                    slots.append(dummy)
                else:
                    slots.append(Ndarray._alias(st, dtype, (max(st.nbytes // dtype.nbytes, 1),)))
        vstride = max(last - first + 1 for first, last in roots)
        plan = _Plan(key, code, prog, None, 0, h.n_roots, vstride, slots, leaf_info,
                     host_errors, prepass, split, tuple(slot_store.values()), roots, rec)
        if not prepass:
            self._set_jobs(plan, dict(split))
        return plan

    def _set_jobs(self, plan: _Plan, split: dict):
        """Job table for known outermost ranges `split` {root: (loop node, begin, end)}."""
        from kernel_ir import dtypes as T
        per_root, jobs = [], []
        for r, (first, last) in enumerate(plan.roots):
            s = split.get(r)
            j0 = len(jobs)
            if s is not None and s[2] - s[1] > 1:
                p, bv, ev = s
                n = ev - bv
                body = max(last - p, 1)
                step = max(1, min(self.slice_budget // body, -(-n // MIN_JOBS)))
                step = max(step, -(-n // MAX_JOBS_PER_ROOT))
                for lo in range(bv, ev, step):
                    hi = min(lo + step, ev)
                    jobs.append((first, last, p, r) + const_words(lo) + const_words(hi))
            else:
                jobs.append((first, last, -1, r, 0, 0, 0, 0))
            per_root += [j0, len(jobs)]
        words = np.array([len(jobs), plan.n_roots] + per_root
                         + [w for j in jobs for w in j], dtype=np.int64).astype(np.int32)
        if plan.jobs is None or plan.jobs.shape[0] < len(words):
            plan.jobs = self._ndarray(T.i32, len(words))
        self._write(plan.jobs, words)
        plan.n_jobs = len(jobs)

    # -- run -----------------------------------------------------------------------------------
    def _launch_eval(self, plan, jobs_nd, n_jobs, round_):
        from kernel_ir import dtypes as T
        from ..launch import run_once as launch
        k = self.kernels()
        val = self.scratch("val", T.i64, n_jobs * plan.vstride)
        jst = self.scratch("jst", T.i64, n_jobs * JST_WORDS)
        args = (plan.prog, jobs_nd, val, jst, *plan.slots, n_jobs, round_, self.budget,
                plan.vstride, self.has_f64)
        launch(k["eval"](args), args)
        return jst

    def _run_prepass(self, plan):
        """Evaluate the begin / end of every root whose outermost range reads device data; a
        root whose bounds fail stays one unsplit job (its main job fails the same way)."""
        from kernel_ir import dtypes as T
        jobs = []
        for (r, first, ba, ea, p) in plan.prepass:
            jobs.append((first, ba, -1, r, 0, 0, 0, 0))
            jobs.append((ba + 1, ea, -1, r, 0, 0, 0, 0))
        words = np.array([len(jobs), 0] + [w for j in jobs for w in j], np.int64).astype(np.int32)
        nd = self.scratch("prejobs", T.i32, len(words))
        self._write(nd, words)
        round_ = 0
        while True:
            jst = self._launch_eval(plan, nd, len(jobs), round_)
            self.be.sync()
            st = self._read(jst, np.int64, len(jobs) * JST_WORDS).reshape(len(jobs), JST_WORDS)
            if (st[:, 0] >= 2).all():
                break
            round_ += 1
        split = dict(plan.split)
        for k, (r, first, ba, ea, p) in enumerate(plan.prepass):
            if st[2 * k, 0] == 2 and st[2 * k + 1, 0] == 2:
                split[r] = (p, int(st[2 * k, 2]), int(st[2 * k + 1, 2]))
        self._set_jobs(plan, split)
        return round_ + 1

    def run(self, plan: _Plan, layout: bool = False, raise_errors: bool = True) -> Result:
        """Evaluate every root of `plan`. With `raise_errors`, an evaluation error raises
        `SizerError` naming the leaf; else it is reported per root in `Result.errors`. With
        `layout`, `Result.metadata` holds the device-computed layout (a layout error raises)."""
        from kernel_ir import dtypes as T
        from ..launch import run_once as launch
        k = self.kernels()
        rounds = 0
        if plan.prepass:
            rounds += self._run_prepass(plan)
        n_roots = plan.n_roots
        rres = self.scratch("rres", T.i64, n_roots * RRES_WORDS)
        nres = RES_HEADER + RES_ROOT * n_roots
        res = self.scratch("res", T.i64, nres)
        meta = self.scratch("meta", T.u32, 2 + 2 * n_roots)
        round_ = 0
        while True:
            jst = self._launch_eval(plan, plan.jobs, plan.n_jobs, round_)
            a2 = (plan.jobs, jst, rres, n_roots)
            launch(k["reduce"](a2), a2)
            a3 = (plan.prog, rres, res, meta, n_roots)
            launch(k["layout"](a3), a3)
            self.be.sync()
            out = self._read(res, np.int64, nres)
            rounds += 1
            if out[0] != 1:
                break
            round_ += 1
        status, err, err_root = int(out[0]), int(out[1]), int(out[2])
        per = out[RES_HEADER:].reshape(n_roots, RES_ROOT)
        errors = [0] * n_roots
        if status == 2 and err < 6:
            rr = self._read(rres, np.int64, n_roots * RRES_WORDS).reshape(n_roots, RRES_WORDS)
            if raise_errors:
                job = int(rr[err_root, 3])
                st = self._read(jst, np.int64, (job + 1) * JST_WORDS)[job * JST_WORDS:]
                self._raise(plan, st)
            errors = [int(e) for e in rr[:, 2]]
        values = [None if e else int(v) for v, e in zip(per[:, 2], errors)]
        caps = [None if v is None else max(v, 0) for v in values]
        md = []
        if layout and not any(errors):
            if status == 2:
                raise sz.SizerError(f"layout: {ERR_NAMES.get(err, err)}")
            md = [int(out[4]), int(out[5])] + [int(w) for w in per[:, :2].reshape(-1)]
        return Result(values, errors, caps, md, rounds)

    def metadata_buffer(self):
        """The uint32 metadata words written by the last `run` (an Ndarray; the task's
        AdStackMeta contents when the plan had stack entry sizes)."""
        return self._scratch.get("meta")

    def _raise(self, plan, st):
        code, node, value, axis = int(st[3]), int(st[4]), int(st[5]), int(st[6])
        h = sz.bytecode.Header(plan.code[:sz.HEADER_WORDS])
        op, a = int(plan.code[h.nodes_off + 4 * node]), int(plan.code[h.nodes_off + 4 * node + 1])
        if code == 4:
            raise sz.SizerError(plan.host_errors.get(node, f"leaf at sizer node {node}"))
        what = Op.NAMES.get(op, str(op)).title()
        if op == Op.FIELD_LOAD:
            what = f"FieldLoad(field {a})"
        elif op == Op.NDARRAY_READ:
            what = f"NdarrayRead(arg {a})"
        shape = None
        li = int(plan.rec[node, 1]) if op in (Op.FIELD_LOAD, Op.NDARRAY_READ) else None
        if li is not None and li in plan.leaf_info:
            shape = plan.leaf_info[li][1]
        if code == 1:
            n = shape[axis] if shape is not None and axis < len(shape) else "?"
            raise sz.SizerError(f"{what}: index {value} out of range [0, {n}) on axis {axis} "
                                f"(GPU sizer, node {node})")
        if code == 2:
            raise sz.SizerError(f"size expression overflow in {what} (GPU sizer, node {node})")
        if code == 3:
            raise sz.SizerError(f"{what}: non-finite value or a value outside the sizer range "
                                f"(GPU sizer, node {node})")
        if code == 5:
            raise sz.SizerError(f"{what}: {value} indices for an array of shape {shape} "
                                f"(GPU sizer, node {node})")
        raise sz.SizerError(f"GPU sizer error {code} at node {node}")

    # -- the MaxOverRange fast path (gpu_sizer_reduce) -----------------------------------------
    def reduce_ranges(self, exprs, leaves: dict, scalars: dict, shapes: dict):
        """`exprs` with every MaxOverRange that `gpu_sizer_reduce.find` accepts replaced by its
        value, from one batch of device min/max reductions and one sync; `exprs` itself when
        there is none."""
        from kernel_ir import dtypes as T
        from ..launch import run_once as launch
        from ..ndarray import Ndarray
        from . import gpu_sizer_reduce as R
        folded, found = R.find(exprs, leaves, scalars, shapes)
        if not found:
            return exprs
        reds = []
        for red in found.values():
            if red is None:
                continue
            lf = leaves[red.leaf_key]
            code = DTYPE_CODES.get(lf.dtype.name)
            last = red.first + (red.count - 1) * red.stride
            if code is None or code == 5 and not self.has_f64 or \
                    (last + 1) * (2 if code == 3 else 1) >= 2**31:
                continue  # the interpreter's limits apply (it may fall back to the host)
            reds.append((red, lf, code))
        results = {}
        if reds:
            out = self.scratch("minmax_out", T.i64, 3 * len(reds))
            dummy_i, dummy_f, dummy_d = self._dummy()
            for s, (red, lf, code) in enumerate(reds):
                dtype = {4: T.f32, 5: T.f64}.get(code, T.i32)
                view = Ndarray._alias(lf.storage, dtype,
                                      (max(lf.storage.nbytes // dtype.nbytes, 1),))
                di, df, dd = (view if code <= 3 else dummy_i, view if code == 4 else dummy_f,
                              view if code == 5 else dummy_d)
                chunk = max(R.CHUNK, -(-red.count // R.MAX_PARTS))
                n_parts = -(-red.count // chunk)
                part = self.scratch(f"minmax_part{s}", T.i64, 3 * n_parts)
                a1 = (di, df, dd, part, red.first, red.stride, red.count, chunk, n_parts, code)
                launch(self._minmax_kernel(code, a1), a1)
                a2 = (part, out, n_parts, s)
                launch(self.kernels()["minmax_total"](a2), a2)
            self.be.sync()
            words = self._read(out, np.int64, 3 * len(reds)).reshape(len(reds), 3)
            results = {red: tuple(int(w) for w in words[s]) for s, (red, _, _) in enumerate(reds)}
        done = {n: r for n, r in found.items() if r is None or r in results}
        out = R.rewrite(folded, done, results)
        self.reduced_nodes += sum(1 for a, b in zip(folded, out) if a != b)
        return out

    def _minmax_kernel(self, code, args):
        c = self._minmax.get(code)
        if c is None:
            c = self._minmax[code] = load_kernel_module().sizer_minmax.compile(args)
        return c

    def kernels(self):
        if not self._compiled:
            mod = load_kernel_module()
            cache = {}

            def compiled(kern):
                def get(args):
                    c = cache.get(kern)
                    if c is None:
                        c = cache[kern] = kern.compile(args)
                    return c
                return get
            self._compiled = {"eval": compiled(mod.sizer_eval), "reduce": compiled(mod.sizer_reduce),
                              "layout": compiled(mod.sizer_layout),
                              "minmax_total": compiled(mod.sizer_minmax_total)}
        return self._compiled

    # -- the hook `spirad.sizing_cache` calls ---------------------------------------------------
    def size(self, ts, args):
        """The SizedTask of one task's stacks for this launch, evaluated by the GPU sizer kernel;
        None when the task's leaves are unsupported (the caller evaluates on the host)."""
        from ..sizing_cache import host_sized
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
        plan = self.plans.get(ts)
        if plan is None or plan.key != key:
            try:
                plan = self.plan(exprs, leaves=leaves, scalars=scalars, shapes=shapes,
                                 entry_sizes=ts.entry_sizes, kinds=ts.kinds, key=key)
            except Unsupported:
                return None
            self.plans[ts] = plan
        return host_sized(self.run(plan).caps, ts.entry_sizes, ts.kinds)


def load_kernel_module():
    """`shaders/sizer_kernel.py` (importable as `shaders.sizer_kernel` from a checkout; else
    loaded by path next to the `spirad` package)."""
    try:
        from shaders import sizer_kernel
        return sizer_kernel
    except ImportError:
        import importlib.util
        import os
        import sys
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))), "shaders", "sizer_kernel.py")
        spec = importlib.util.spec_from_file_location("shaders.sizer_kernel", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        return mod


# -- the backend hook ------------------------------------------------------------------------

def task_leaves(ts, args) -> tuple:
    """(leaves, scalars, shapes) of a TaskSizing at this launch."""
    from ..state import current
    lv = ts.leaves
    leaves = {}
    if lv.fields:
        fields = current().field_map()
        for fid in sorted(lv.fields):
            f = fields.get(fid)
            if f is not None:
                leaves[("field", fid)] = Leaf(f._storage(), f.dtype, f.full_shape)
    for i in sorted(lv.ndarrays):
        a = args[i]
        leaves[("ndarray", i)] = Leaf(a._storage(), a.dtype, a.full_shape)
    scalars = {i: args[i] for i in lv.scalars}
    shapes = {i: args[i].full_shape for i in lv.shapes}
    return leaves, scalars, shapes
