"""The GPU sizer kernel: an interpreter of the sizer bytecode (`sizer/FORMAT.md`) that runs on
the device, written in spirad's own kernel language.

spirad compiles this file like any user kernel (SPIR-V for Vulkan / Metal, LLVM for the CPU), so
no shader compiler has to be installed and the same source serves every backend. The host side
(`spirad/backends/gpu_sizer/`) builds the tables, launches the three kernels below in one batch
and reads back the result:

    sizer_eval     one invocation per *job*: sweeps a node span of the bytecode (one root, or a
                   slice of a root's outermost MaxOverRange) exactly as `sizer.eval_bytecode`
                   does -- one forward pass, explicit jumps, one int64 value slot per node, no
                   recursion -- and writes the job's value (or its error) to the job state
    sizer_reduce   one invocation per root: max over the root's jobs, pending / error summary
    sizer_layout   one invocation: capacities = max(value, 0) and `sizer.compute_layout`; writes
                   the task's adstack metadata words [stride_float, stride_int, (offset,
                   max_size) per stack] into `meta` (the buffer the task's launches bind) and
                   everything the host needs into `res` (status, the first error with its node,
                   value and axis, strides, and per root offset, capacity, value, error): the
                   host's one read-back

and, for the fast path of `spirad/backends/gpu_sizer/reduce.py` (a MaxOverRange whose body is a
non-decreasing function of one data read), `sizer_minmax` / `sizer_minmax_total`: the min, max
and a bad-value flag of the elements the range reads (at the end of this file).

Every table layout, word offset and code comes from `sizer.device_format` (imported as `F`; a
module-level int is a compile-time constant here), the tables themselves are described in
`sizer/FORMAT.md` ("Device tables"). Nothing about the format is written in this file.

Semantics match `sizer` exactly: int64 values in [-(2**62-1), 2**62-1] checked after every record
(overflow is an error, never a wrap), SUB clamped at 0, reads bounds-checked per axis, float data
truncated toward zero, NaN / inf / |x| >= 2**62 an error. The interpreter stops after `budget`
records and saves `ip` (its whole state is `val` and `ip`), so a device with a loop-iteration cap
(lavapipe: 65,535 per invocation) is never driven past it: the host launches another round.
"""

import inspect

import spirad as sd
import sizer.device_format as F
from sizer.device_format import Op


@sd.kernel
def sizer_eval(prog: sd.types.ndarray(), jobs: sd.types.ndarray(), val: sd.types.ndarray(),
               jst: sd.types.ndarray(),
               di0: sd.types.ndarray(), di1: sd.types.ndarray(), di2: sd.types.ndarray(),
               di3: sd.types.ndarray(), df0: sd.types.ndarray(), df1: sd.types.ndarray(),
               dd0: sd.types.ndarray(), dd1: sd.types.ndarray(),
               n_jobs: sd.i32, round_: sd.i32, budget: sd.i64, vstride: sd.i32,
               with_f64: sd.template(), n_int: sd.template(), n_f32: sd.template()):
    for j in range(n_jobs):
        n_roots = jobs[F.JOBS_N_ROOTS]
        jw = F.JOBS_HEADER + F.JOBS_ROOT_WORDS * n_roots + F.JOB_WORDS * j
        first = jobs[jw + F.JOB_FIRST]
        last = jobs[jw + F.JOB_LAST]
        top = jobs[jw + F.JOB_TOP]
        lo: sd.i64 = (sd.cast(jobs[jw + F.JOB_LO + 1], sd.i64) << 32) | \
            (sd.cast(jobs[jw + F.JOB_LO], sd.i64) & 0xFFFFFFFF)
        hi: sd.i64 = (sd.cast(jobs[jw + F.JOB_HI + 1], sd.i64) << 32) | \
            (sd.cast(jobs[jw + F.JOB_HI], sd.i64) & 0xFFFFFFFF)
        js = F.JST_WORDS * j
        status: sd.i64 = F.JOB_FRESH
        ip = first
        if round_ > 0:
            status = jst[js + F.JST_STATUS]
            ip = sd.cast(jst[js + F.JST_IP], sd.i32)
        if status < F.JOB_DONE:
            base = prog[F.H_NODES_OFF]
            ix = prog[F.H_INDEX_OFF]
            lw = prog[F.H_INDEX_OFF] + prog[F.H_N_INDEX] + F.AUX_LEAF_OFF
            vb = j * vstride - first   # this job's value slots: nodes first..last
            steps: sd.i64 = 0
            err = 0
            err_node = 0
            err_val: sd.i64 = 0
            err_axis = 0
            while ip <= last:
                if steps >= budget:
                    break
                steps += 1
                r = base + F.RECORD_WORDS * ip
                op = prog[r + F.R_OP]
                a = prog[r + F.R_A]
                b = prog[r + F.R_B]
                c = prog[r + F.R_C]
                nxt = ip + 1
                if op == Op.CONST:
                    val[vb + ip] = (sd.cast(b, sd.i64) << 32) | (sd.cast(a, sd.i64) & 0xFFFFFFFF)
                elif op == Op.ADD:
                    s: sd.i64 = val[vb + a] + val[vb + b]
                    if s > F.MAX_ABS or s < -F.MAX_ABS:
                        err = F.ERR_OVERFLOW
                        err_val = s
                    val[vb + ip] = s
                elif op == Op.SUB:  # clamped at 0
                    d: sd.i64 = val[vb + a] - val[vb + b]
                    if d < 0:
                        d = 0
                    if d > F.MAX_ABS:
                        err = F.ERR_OVERFLOW
                        err_val = d
                    val[vb + ip] = d
                elif op == Op.MUL:  # overflow checked before multiplying
                    x: sd.i64 = val[vb + a]
                    y: sd.i64 = val[vb + b]
                    ax: sd.i64 = x
                    if x < 0:
                        ax = -x
                    ay: sd.i64 = y
                    if y < 0:
                        ay = -y
                    if ax != 0 and ay != 0:
                        if ax > F.MAX_ABS // ay:
                            err = F.ERR_OVERFLOW
                    val[vb + ip] = x * y
                elif op == Op.MAX:
                    x2: sd.i64 = val[vb + a]
                    y2: sd.i64 = val[vb + b]
                    if y2 > x2:
                        x2 = y2
                    val[vb + ip] = x2
                elif op == Op.BOUND_VAR:
                    val[vb + ip] = val[vb + a]
                elif op == Op.LOOP:
                    bv: sd.i64 = val[vb + a]
                    ev: sd.i64 = val[vb + b]
                    if ip == top:
                        bv = lo
                        ev = hi
                    if bv >= ev:
                        val[vb + c] = 0
                        nxt = c + 1
                    else:
                        val[vb + ip] = bv
                        val[vb + c] = F.SENTINEL
                elif op == Op.MOR:
                    acc: sd.i64 = val[vb + ip]
                    body: sd.i64 = val[vb + a]
                    if body > acc:
                        acc = body
                    val[vb + ip] = acc
                    nv: sd.i64 = val[vb + b] + 1
                    endv: sd.i64 = val[vb + prog[base + F.RECORD_WORDS * b + F.R_B]]  # LOOP's end
                    if b == top:
                        endv = hi
                    if nv < endv:
                        val[vb + b] = nv
                        nxt = b + 1
                elif op == Op.FIELD_LOAD or op == Op.NDARRAY_READ:  # a = leaf index
                    lf = prog[lw] + F.LEAF_WORDS * a
                    dt = prog[lf + F.LEAF_DTYPE]
                    slot = prog[lf + F.LEAF_SLOT]
                    rank = prog[lf + F.LEAF_RANK]
                    lin: sd.i64 = 0
                    if rank != c:
                        err = F.ERR_RANK
                        err_val = c
                    for k in sd.static(range(F.MAX_INDICES)):
                        if k < c and err == 0:
                            iv: sd.i64 = val[vb + prog[ix + b + k]]
                            n: sd.i64 = sd.cast(prog[lf + F.LEAF_SHAPE + k], sd.i64)
                            if iv < 0 or iv >= n:
                                err = F.ERR_INDEX
                                err_val = iv
                                err_axis = k
                            lin = lin * n + iv
                    v: sd.i64 = 0
                    lin = lin + sd.cast(prog[lf + F.LEAF_BASE], sd.i64)
                    if err == 0:
                        if dt <= F.DT_I64:
                            wi = sd.cast(lin, sd.i32)
                            if dt == F.DT_I64:
                                wi = 2 * wi
                            w0 = 0
                            w1 = 0
                            # slots past n_int / n_f32 are never read (no binding): a backend
                            # with few storage buffers (Metal) compiles a smaller kernel
                            if slot == 0:
                                w0 = di0[wi]
                                if dt == F.DT_I64:
                                    w1 = di0[wi + 1]
                            if sd.static(n_int > 1):
                                if slot == 1:
                                    w0 = di1[wi]
                                    if dt == F.DT_I64:
                                        w1 = di1[wi + 1]
                            if sd.static(n_int > 2):
                                if slot == 2:
                                    w0 = di2[wi]
                                    if dt == F.DT_I64:
                                        w1 = di2[wi + 1]
                            if sd.static(n_int > 3):
                                if slot == 3:
                                    w0 = di3[wi]
                                    if dt == F.DT_I64:
                                        w1 = di3[wi + 1]
                            if dt == F.DT_I32:
                                v = sd.cast(w0, sd.i64)
                            elif dt == F.DT_U32:
                                v = sd.cast(w0, sd.i64) & 0xFFFFFFFF
                            else:
                                v = (sd.cast(w1, sd.i64) << 32) | (sd.cast(w0, sd.i64) & 0xFFFFFFFF)
                                if v > F.MAX_ABS or v < -F.MAX_ABS:
                                    err = F.ERR_OVERFLOW
                                    err_val = v
                        elif dt == F.DT_F32:
                            f = df0[0]
                            if slot == 0:
                                f = df0[sd.cast(lin, sd.i32)]
                            if sd.static(n_f32 > 1):
                                if slot == 1:
                                    f = df1[sd.cast(lin, sd.i32)]
                            if f > -F.LIMIT_F and f < F.LIMIT_F:
                                v = sd.cast(f, sd.i64)
                            else:
                                err = F.ERR_NONFINITE
                        else:
                            if sd.static(with_f64):
                                g = dd0[0]
                                if slot == 0:
                                    g = dd0[sd.cast(lin, sd.i32)]
                                else:
                                    g = dd1[sd.cast(lin, sd.i32)]
                                if g > -F.LIMIT_F and g < F.LIMIT_F:
                                    v = sd.cast(g, sd.i64)
                                else:
                                    err = F.ERR_NONFINITE
                    val[vb + ip] = v
                else:  # OP_ERR: a record the host evaluator rejects
                    err = F.ERR_HOST
                if err != 0:
                    err_node = ip
                    break
                ip = nxt
            if err != 0:
                jst[js + F.JST_STATUS] = F.JOB_ERROR
                jst[js + F.JST_ERR] = err
                jst[js + F.JST_ERR_NODE] = err_node
                jst[js + F.JST_ERR_VALUE] = err_val
                jst[js + F.JST_ERR_AXIS] = err_axis
            elif ip > last:
                jst[js + F.JST_STATUS] = F.JOB_DONE
                jst[js + F.JST_VALUE] = val[vb + last]
            else:
                jst[js + F.JST_STATUS] = F.JOB_SUSPENDED
                jst[js + F.JST_IP] = ip
            jst[js + F.JST_STEPS] = steps




@sd.kernel
def sizer_reduce(jobs: sd.types.ndarray(), jst: sd.types.ndarray(), rres: sd.types.ndarray(),
                 n_roots: sd.i32):
    for r in range(n_roots):
        jb = jobs[F.JOBS_HEADER + F.JOBS_ROOT_WORDS * r]
        je = jobs[F.JOBS_HEADER + F.JOBS_ROOT_WORDS * r + 1]
        acc: sd.i64 = F.SENTINEL
        pending: sd.i64 = 0
        err: sd.i64 = 0
        err_job: sd.i64 = 0
        for k in range(jb, je):
            s = jst[F.JST_WORDS * k + F.JST_STATUS]
            if s == F.JOB_ERROR:
                if err == 0:
                    err = jst[F.JST_WORDS * k + F.JST_ERR]
                    err_job = k
            elif s == F.JOB_DONE:
                v: sd.i64 = jst[F.JST_WORDS * k + F.JST_VALUE]
                if v > acc:
                    acc = v
            else:
                pending += 1
        rr = F.RRES_WORDS * r
        rres[rr + F.RRES_MAX] = acc
        rres[rr + F.RRES_PENDING] = pending
        rres[rr + F.RRES_ERR] = err
        rres[rr + F.RRES_ERR_JOB] = err_job


@sd.kernel
def sizer_layout(prog: sd.types.ndarray(), rres: sd.types.ndarray(), jst: sd.types.ndarray(),
                 res: sd.types.ndarray(), meta: sd.types.ndarray(), n_roots: sd.i32):
    for _t in range(1):
        status: sd.i64 = F.STATUS_OK
        err: sd.i64 = 0
        err_root: sd.i64 = 0
        err_job: sd.i64 = 0
        pending: sd.i64 = 0
        for r in range(n_roots):
            e = rres[F.RRES_WORDS * r + F.RRES_ERR]
            if e != 0 and err == 0:
                err = e
                err_root = r
                err_job = rres[F.RRES_WORDS * r + F.RRES_ERR_JOB]
            pending += rres[F.RRES_WORDS * r + F.RRES_PENDING]
        if err != 0:
            status = F.STATUS_ERROR
            ej = F.JST_WORDS * err_job
            res[F.RES_ERR_NODE] = jst[ej + F.JST_ERR_NODE]
            res[F.RES_ERR_VALUE] = jst[ej + F.JST_ERR_VALUE]
            res[F.RES_ERR_AXIS] = jst[ej + F.JST_ERR_AXIS]
        elif pending != 0:
            status = F.STATUS_PENDING
        aux = prog[F.H_INDEX_OFF] + prog[F.H_N_INDEX]
        stack_off = prog[aux + F.AUX_STACK_OFF]
        n_stacks = prog[aux + F.AUX_N_STACKS]
        off_f: sd.i64 = 0
        off_i: sd.i64 = F.COUNTER_BYTES * sd.cast(n_stacks, sd.i64)
        lay_err = 0
        big = 0
        for r in range(n_roots):
            value: sd.i64 = rres[F.RRES_WORDS * r + F.RRES_MAX]
            cap: sd.i64 = value
            if cap < 0:
                cap = 0
            off: sd.i64 = 0
            if r < n_stacks and lay_err == 0:
                st = stack_off + F.STACK_WORDS * r
                size: sd.i64 = sd.cast(prog[st + F.STACK_ENTRY_SIZE], sd.i64)
                kind = prog[st + F.STACK_KIND]
                region: sd.i64 = 0
                if cap > F.MAX_ABS // size:
                    lay_err = 1
                else:
                    region = (cap * size + 7) // 8 * 8
                if region > F.MAX_ABS:
                    lay_err = 1
                if lay_err == 0:
                    if kind != F.KIND_INT:
                        off = off_f
                        off_f = off_f + region
                        if kind == F.KIND_FLOAT and off_f <= F.MAX_ABS:
                            off_f = off_f + region  # the adjoint half
                        if off_f > F.MAX_ABS:
                            lay_err = 1
                    else:
                        off = off_i
                        off_i = off_i + region
                        if off_i > F.MAX_ABS:
                            lay_err = 1
            rw = F.RES_HEADER + F.RES_ROOT * r
            res[rw + F.RES_OFFSET] = off
            res[rw + F.RES_CAP] = cap
            res[rw + F.RES_VALUE] = value
            res[rw + F.RES_ROOT_ERR] = rres[F.RRES_WORDS * r + F.RRES_ERR]
            if r < n_stacks:
                mw = F.META_HEADER + F.META_STACK * r
                meta[mw + F.META_OFFSET] = sd.cast(off, sd.u32)
                meta[mw + F.META_MAX_SIZE] = sd.cast(cap, sd.u32)
                if off > F.U32_MAX or cap > F.U32_MAX:
                    big = 1
        if n_stacks == 0:
            off_f = 0
            off_i = 0
        elif off_f > F.U32_MAX or off_i > F.U32_MAX:
            big = 1
        if status == F.STATUS_OK and n_stacks > 0:
            if lay_err != 0:
                status = F.STATUS_ERROR
                err = F.ERR_LAYOUT
            elif big != 0:
                status = F.STATUS_ERROR
                err = F.ERR_META32
        res[F.RES_STATUS] = status
        res[F.RES_ERR] = err
        res[F.RES_ERR_ROOT] = err_root
        res[F.RES_PENDING] = pending
        res[F.RES_STRIDE_FLOAT] = off_f
        res[F.RES_STRIDE_INT] = off_i
        meta[F.META_STRIDE_FLOAT] = sd.cast(off_f, sd.u32)
        meta[F.META_STRIDE_INT] = sd.cast(off_i, sd.u32)


# -- the MaxOverRange fast path (`spirad/backends/gpu_sizer/reduce.py`) --------------------------
# One leaf's elements first + v * stride for v in [0, count), read as in sizer_eval (dt: a
# `F.DT_*` code; int data as int32 words from `di`, f32 from `df`, f64 from `dd`).
# Per part of `chunk` elements a min / max record (min, max, bad), bad = 1 when a value has no
# sizer int (NaN, inf, |x| >= 2**62, an i64 beyond MAX_ABS); then one invocation folds the parts
# into record `slot` of `out`.

@sd.kernel
def sizer_minmax(di: sd.types.ndarray(), df: sd.types.ndarray(), dd: sd.types.ndarray(),
                 part: sd.types.ndarray(), first: sd.i64, stride: sd.i64, count: sd.i32,
                 chunk: sd.i32, n_parts: sd.i32, dt: sd.template()):
    for j in range(n_parts):
        mn: sd.i64 = F.MAX_ABS
        mx: sd.i64 = -F.MAX_ABS
        bad: sd.i64 = 0
        lo = j * chunk
        hi = lo + chunk
        if hi > count:
            hi = count
        for t in range(lo, hi):
            lin: sd.i64 = first + sd.cast(t, sd.i64) * stride
            v: sd.i64 = 0
            if sd.static(dt == F.DT_I32):
                v = sd.cast(di[sd.cast(lin, sd.i32)], sd.i64)
            elif sd.static(dt == F.DT_U32):
                v = sd.cast(di[sd.cast(lin, sd.i32)], sd.i64) & 0xFFFFFFFF
            elif sd.static(dt == F.DT_I64):
                wi = sd.cast(2 * lin, sd.i32)
                v = (sd.cast(di[wi + 1], sd.i64) << 32) | (sd.cast(di[wi], sd.i64) & 0xFFFFFFFF)
                if v > F.MAX_ABS or v < -F.MAX_ABS:
                    bad = 1
                    v = 0
            elif sd.static(dt == F.DT_F32):
                f = df[sd.cast(lin, sd.i32)]
                if f > -F.LIMIT_F and f < F.LIMIT_F:
                    v = sd.cast(f, sd.i64)
                else:
                    bad = 1
            else:
                g = dd[sd.cast(lin, sd.i32)]
                if g > -F.LIMIT_F and g < F.LIMIT_F:
                    v = sd.cast(g, sd.i64)
                else:
                    bad = 1
            mn = sd.min(mn, v)
            mx = sd.max(mx, v)
        pw = F.MINMAX_WORDS * j
        part[pw + F.MINMAX_MIN] = mn
        part[pw + F.MINMAX_MAX] = mx
        part[pw + F.MINMAX_BAD] = bad


@sd.kernel
def sizer_minmax_total(part: sd.types.ndarray(), out: sd.types.ndarray(), n_parts: sd.i32,
                       slot: sd.i32):
    for _t in range(1):
        mn: sd.i64 = F.MAX_ABS
        mx: sd.i64 = -F.MAX_ABS
        bad: sd.i64 = 0
        for j in range(n_parts):
            pw = F.MINMAX_WORDS * j
            mn = sd.min(mn, part[pw + F.MINMAX_MIN])
            mx = sd.max(mx, part[pw + F.MINMAX_MAX])
            bad = sd.max(bad, part[pw + F.MINMAX_BAD])
        ow = F.MINMAX_WORDS * slot
        out[ow + F.MINMAX_MIN] = mn
        out[ow + F.MINMAX_MAX] = mx
        out[ow + F.MINMAX_BAD] = bad


def _check_signatures():
    """The kernels' buffer parameters are what `sizer.device_format` says the host binds: the
    data slots of `sizer_eval` by name and count (its dispatch on `slot` follows them), and
    every kernel's number of ndarray parameters (the `*_BUFFERS` counts a backend with a
    per-stage binding limit plans with)."""
    def ndarrays(k):
        return [n for n, p in inspect.signature(k.fn).parameters.items()
                if isinstance(p.annotation, sd.types.NdarrayType)]
    names = ndarrays(sizer_eval)
    for prefix, n in (("di", F.INT_SLOTS), ("df", F.F32_SLOTS), ("dd", F.F64_SLOTS)):
        if [p for p in names if p[:2] == prefix] != [f"{prefix}{k}" for k in range(n)]:
            raise RuntimeError(f"sizer_eval has no {n} '{prefix}' slot parameters")
    for k, n in ((sizer_eval, F.EVAL_BUFFERS), (sizer_reduce, F.REDUCE_BUFFERS),
                 (sizer_layout, F.LAYOUT_BUFFERS), (sizer_minmax, F.MINMAX_BUFFERS),
                 (sizer_minmax_total, F.MINMAX_TOTAL_BUFFERS)):
        if len(ndarrays(k)) != n:
            raise RuntimeError(f"{k.fn.__name__} binds {len(ndarrays(k))} buffers, "
                               f"sizer.device_format says {n}")


_check_signatures()
