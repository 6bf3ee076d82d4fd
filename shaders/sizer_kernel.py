"""The GPU sizer kernel: an interpreter of the sizer bytecode (`sizer/FORMAT.md`) that runs on
the device, written in spirad's own kernel language.

spirad compiles this file like any user kernel (SPIR-V for Vulkan / Metal, LLVM for the CPU), so
no shader compiler has to be installed and the same source serves every backend. The host side
(`spirad/backends/gpu_sizer.py`) builds the tables, launches the three kernels below in one batch
and reads back the result:

    sizer_eval     one invocation per *job*: sweeps a node span of the bytecode (one root, or a
                   slice of a root's outermost MaxOverRange) exactly as `sizer.eval_bytecode`
                   does -- one forward pass, explicit jumps, one int64 value slot per node, no
                   recursion -- and writes the job's value (or its error) to the job state
    sizer_reduce   one invocation per root: max over the root's jobs, pending / error summary
    sizer_layout   one invocation: capacities = max(value, 0) and `sizer.compute_layout`:
                   [stride_float, stride_int, (offset, max_size) per stack], plus an error word

and, for the fast path of `spirad/backends/gpu_sizer_reduce.py` (a MaxOverRange whose body is a
non-decreasing function of one data read), `sizer_minmax` / `sizer_minmax_total`: the min, max
and a bad-value flag of the elements the range reads (at the end of this file).

Inputs (all int32 words unless noted):

prog   the bytecode of `sizer.encode`, in the *device dialect*: the host has already resolved
       SCALAR_ARG / NDARRAY_SHAPE records into CONST (or into ERR, op 13, when the host
       evaluator would raise on them), and the `a` word of FIELD_LOAD / NDARRAY_READ holds an
       index into the leaf table instead of a field id / argument index. After the bytecode
       (at word `index_off + n_index`) follow:
           A+0 leaf_off  A+1 n_leaves  A+2 stack_off  A+3 n_stacks
           leaf k at leaf_off + 12k:  dtype, slot, rank, base, shape[0..8]
               (element (i0, .., in) is element base + C-order linear index of the slot array)
               dtype 1 i32, 2 u32 / u1, 3 i64 (all read as int32 words from slot `di<slot>`),
                     4 f32 (slot `df<slot>`), 5 f64 (slot `dd<slot>`)
           stack k at stack_off + 2k: entry size in bytes, kind (0 float, 1 int, 2 primal:
               a float stack without adjoint entries; see `sizer.layout`)
jobs   [n_jobs, n_roots, (job_begin, job_end) per root, job records of 8 words]
       job: first node, last node, top (a LOOP node whose range is replaced by [lo, hi), or -1),
            root, lo (2 words, little-endian int64), hi (2 words)
val    int64, `vstride` slots per job (the longest root span): the interpreter's value array;
       job j keeps node i's value at j * vstride + i - first
jst    int64, 8 per job: status (0 fresh, 1 suspended, 2 done, 3 error), resume ip, value,
       error code, error node, error value, error axis, steps used
rres   int64, 4 per root: max over jobs, pending jobs, error code, index of the failing job
res    int64: status (0 ok, 1 pending, 2 error), error code, failing root, pending jobs,
       stride_float, stride_int, then (offset, capacity, value) per root
meta   uint32: the task's adstack metadata words [stride_float, stride_int, (offset,
       max_size) per stack] (`spirad.backends.adstack_support.meta_words`)

Semantics match `sizer` exactly: int64 values in [-(2**62-1), 2**62-1] checked after every record
(overflow is an error, never a wrap), SUB clamped at 0, reads bounds-checked per axis, float data
truncated toward zero, NaN / inf / |x| >= 2**62 an error. The interpreter stops after `budget`
records and saves `ip` (its whole state is `val` and `ip`), so a device with a loop-iteration cap
(lavapipe: 65,535 per invocation) is never driven past it: the host launches another round.
"""

import spirad as sd

MAX_ABS = (1 << 62) - 1
SENTINEL = -(1 << 62)        # below every valid value: the MaxOverRange accumulator's start
LIMIT_F = 4611686018427387904.0   # 2**62 as a float: |x| >= this does not fit the range
LEAF_WORDS = 12
JOB_WORDS = 8
JST_WORDS = 8
RRES_WORDS = 4
RES_HEADER = 6

# error codes (jst[3], rres[2], res[1])
ERR_INDEX = 1       # a read index outside [0, shape[axis])
ERR_OVERFLOW = 2    # a value outside the sizer range
ERR_NONFINITE = 3   # NaN / inf read from float data
ERR_HOST = 4        # a SCALAR_ARG / NDARRAY_SHAPE the host evaluator rejects (op 13)
ERR_RANK = 5        # the number of indices differs from the array's rank
ERR_LAYOUT = 6      # the per-thread stride overflows (compute_layout raises)
ERR_META32 = 7      # a metadata word does not fit 32 bits (meta_words raises)

OP_ERR = 13


@sd.kernel
def sizer_eval(prog: sd.types.ndarray(), jobs: sd.types.ndarray(), val: sd.types.ndarray(),
               jst: sd.types.ndarray(),
               di0: sd.types.ndarray(), di1: sd.types.ndarray(), di2: sd.types.ndarray(),
               di3: sd.types.ndarray(), df0: sd.types.ndarray(), df1: sd.types.ndarray(),
               dd0: sd.types.ndarray(), dd1: sd.types.ndarray(),
               n_jobs: sd.i32, round_: sd.i32, budget: sd.i64, vstride: sd.i32,
               with_f64: sd.template()):
    for j in range(n_jobs):
        n_roots = jobs[1]
        jw = 2 + 2 * n_roots + JOB_WORDS * j
        first = jobs[jw]
        last = jobs[jw + 1]
        top = jobs[jw + 2]
        lo: sd.i64 = (sd.cast(jobs[jw + 5], sd.i64) << 32) | (sd.cast(jobs[jw + 4], sd.i64) & 0xFFFFFFFF)
        hi: sd.i64 = (sd.cast(jobs[jw + 7], sd.i64) << 32) | (sd.cast(jobs[jw + 6], sd.i64) & 0xFFFFFFFF)
        js = JST_WORDS * j
        status: sd.i64 = 0
        ip = first
        if round_ > 0:
            status = jst[js]
            ip = sd.cast(jst[js + 1], sd.i32)
        if status < 2:
            base = prog[6]
            ix = prog[7]
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
                r = base + 4 * ip
                op = prog[r]
                a = prog[r + 1]
                b = prog[r + 2]
                c = prog[r + 3]
                nxt = ip + 1
                if op == 1:    # CONST
                    val[vb + ip] = (sd.cast(b, sd.i64) << 32) | (sd.cast(a, sd.i64) & 0xFFFFFFFF)
                elif op == 6:  # ADD
                    s: sd.i64 = val[vb + a] + val[vb + b]
                    if s > MAX_ABS or s < -MAX_ABS:
                        err = ERR_OVERFLOW
                        err_val = s
                    val[vb + ip] = s
                elif op == 7:  # SUB, clamped at 0
                    d: sd.i64 = val[vb + a] - val[vb + b]
                    if d < 0:
                        d = 0
                    if d > MAX_ABS:
                        err = ERR_OVERFLOW
                        err_val = d
                    val[vb + ip] = d
                elif op == 8:  # MUL, overflow checked before multiplying
                    x: sd.i64 = val[vb + a]
                    y: sd.i64 = val[vb + b]
                    ax: sd.i64 = x
                    if x < 0:
                        ax = -x
                    ay: sd.i64 = y
                    if y < 0:
                        ay = -y
                    if ax != 0 and ay != 0:
                        if ax > MAX_ABS // ay:
                            err = ERR_OVERFLOW
                    val[vb + ip] = x * y
                elif op == 9:  # MAX
                    x2: sd.i64 = val[vb + a]
                    y2: sd.i64 = val[vb + b]
                    if y2 > x2:
                        x2 = y2
                    val[vb + ip] = x2
                elif op == 12:  # BOUND_VAR
                    val[vb + ip] = val[vb + a]
                elif op == 10:  # LOOP
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
                        val[vb + c] = SENTINEL
                elif op == 11:  # MOR
                    acc: sd.i64 = val[vb + ip]
                    body: sd.i64 = val[vb + a]
                    if body > acc:
                        acc = body
                    val[vb + ip] = acc
                    nv: sd.i64 = val[vb + b] + 1
                    endv: sd.i64 = val[vb + prog[base + 4 * b + 2]]
                    if b == top:
                        endv = hi
                    if nv < endv:
                        val[vb + b] = nv
                        nxt = b + 1
                elif op == 4 or op == 5:  # FIELD_LOAD / NDARRAY_READ (a = leaf index)
                    lw = prog[7] + prog[4]
                    lf = prog[lw] + LEAF_WORDS * a
                    dt = prog[lf]
                    slot = prog[lf + 1]
                    rank = prog[lf + 2]
                    lin: sd.i64 = 0
                    if rank != c:
                        err = ERR_RANK
                        err_val = c
                    for k in sd.static(range(8)):
                        if k < c and err == 0:
                            iv: sd.i64 = val[vb + prog[ix + b + k]]
                            n: sd.i64 = sd.cast(prog[lf + 4 + k], sd.i64)
                            if iv < 0 or iv >= n:
                                err = ERR_INDEX
                                err_val = iv
                                err_axis = k
                            lin = lin * n + iv
                    v: sd.i64 = 0
                    lin = lin + sd.cast(prog[lf + 3], sd.i64)
                    if err == 0:
                        if dt <= 3:
                            wi = sd.cast(lin, sd.i32)
                            if dt == 3:
                                wi = 2 * wi
                            w0 = 0
                            w1 = 0
                            if slot == 0:
                                w0 = di0[wi]
                                if dt == 3:
                                    w1 = di0[wi + 1]
                            elif slot == 1:
                                w0 = di1[wi]
                                if dt == 3:
                                    w1 = di1[wi + 1]
                            elif slot == 2:
                                w0 = di2[wi]
                                if dt == 3:
                                    w1 = di2[wi + 1]
                            else:
                                w0 = di3[wi]
                                if dt == 3:
                                    w1 = di3[wi + 1]
                            if dt == 1:
                                v = sd.cast(w0, sd.i64)
                            elif dt == 2:
                                v = sd.cast(w0, sd.i64) & 0xFFFFFFFF
                            else:
                                v = (sd.cast(w1, sd.i64) << 32) | (sd.cast(w0, sd.i64) & 0xFFFFFFFF)
                                if v > MAX_ABS or v < -MAX_ABS:
                                    err = ERR_OVERFLOW
                                    err_val = v
                        elif dt == 4:
                            f = df0[0]
                            if slot == 0:
                                f = df0[sd.cast(lin, sd.i32)]
                            else:
                                f = df1[sd.cast(lin, sd.i32)]
                            if f > -LIMIT_F and f < LIMIT_F:
                                v = sd.cast(f, sd.i64)
                            else:
                                err = ERR_NONFINITE
                        else:
                            if sd.static(with_f64):
                                g = dd0[0]
                                if slot == 0:
                                    g = dd0[sd.cast(lin, sd.i32)]
                                else:
                                    g = dd1[sd.cast(lin, sd.i32)]
                                if g > -LIMIT_F and g < LIMIT_F:
                                    v = sd.cast(g, sd.i64)
                                else:
                                    err = ERR_NONFINITE
                    val[vb + ip] = v
                else:  # OP_ERR: a leaf the host evaluator rejects
                    err = ERR_HOST
                if err != 0:
                    err_node = ip
                    break
                ip = nxt
            if err != 0:
                jst[js] = 3
                jst[js + 3] = err
                jst[js + 4] = err_node
                jst[js + 5] = err_val
                jst[js + 6] = err_axis
            elif ip > last:
                jst[js] = 2
                jst[js + 2] = val[vb + last]
            else:
                jst[js] = 1
                jst[js + 1] = ip
            jst[js + 7] = steps


@sd.kernel
def sizer_reduce(jobs: sd.types.ndarray(), jst: sd.types.ndarray(), rres: sd.types.ndarray(),
                 n_roots: sd.i32):
    for r in range(n_roots):
        jb = jobs[2 + 2 * r]
        je = jobs[3 + 2 * r]
        acc: sd.i64 = SENTINEL
        pending: sd.i64 = 0
        err: sd.i64 = 0
        err_job: sd.i64 = 0
        for k in range(jb, je):
            s = jst[JST_WORDS * k]
            if s == 3:
                if err == 0:
                    err = jst[JST_WORDS * k + 3]
                    err_job = k
            elif s == 2:
                v: sd.i64 = jst[JST_WORDS * k + 2]
                if v > acc:
                    acc = v
            else:
                pending += 1
        rres[RRES_WORDS * r] = acc
        rres[RRES_WORDS * r + 1] = pending
        rres[RRES_WORDS * r + 2] = err
        rres[RRES_WORDS * r + 3] = err_job


@sd.kernel
def sizer_layout(prog: sd.types.ndarray(), rres: sd.types.ndarray(), res: sd.types.ndarray(),
                 meta: sd.types.ndarray(), n_roots: sd.i32):
    for _t in range(1):
        status: sd.i64 = 0
        err: sd.i64 = 0
        err_root: sd.i64 = 0
        pending: sd.i64 = 0
        for r in range(n_roots):
            e = rres[RRES_WORDS * r + 2]
            if e != 0 and err == 0:
                err = e
                err_root = r
            pending += rres[RRES_WORDS * r + 1]
        if err != 0:
            status = 2
        elif pending != 0:
            status = 1
        aux = prog[7] + prog[4]
        stack_off = prog[aux + 2]
        n_stacks = prog[aux + 3]
        off_f: sd.i64 = 0
        off_i: sd.i64 = 8 * sd.cast(n_stacks, sd.i64)
        lay_err = 0
        big = 0
        for r in range(n_roots):
            cap: sd.i64 = rres[RRES_WORDS * r]
            if cap < 0:
                cap = 0
            off: sd.i64 = 0
            if r < n_stacks and lay_err == 0:
                size: sd.i64 = sd.cast(prog[stack_off + 2 * r], sd.i64)
                kind = prog[stack_off + 2 * r + 1]
                region: sd.i64 = 0
                if cap > MAX_ABS // size:
                    lay_err = 1
                else:
                    region = (cap * size + 7) // 8 * 8
                if region > MAX_ABS:
                    lay_err = 1
                if lay_err == 0:
                    if kind != 1:
                        off = off_f
                        off_f = off_f + region
                        if kind == 0 and off_f <= MAX_ABS:
                            off_f = off_f + region  # the adjoint half
                        if off_f > MAX_ABS:
                            lay_err = 1
                    else:
                        off = off_i
                        off_i = off_i + region
                        if off_i > MAX_ABS:
                            lay_err = 1
            res[RES_HEADER + 3 * r] = off
            res[RES_HEADER + 3 * r + 1] = cap
            res[RES_HEADER + 3 * r + 2] = rres[RRES_WORDS * r]
            if r < n_stacks:
                meta[2 + 2 * r] = sd.cast(off, sd.u32)
                meta[3 + 2 * r] = sd.cast(cap, sd.u32)
                if off > 4294967295 or cap > 4294967295:
                    big = 1
        if n_stacks == 0:
            off_f = 0
            off_i = 0
        elif off_f > 4294967295 or off_i > 4294967295:
            big = 1
        if status == 0 and n_stacks > 0:
            if lay_err != 0:
                status = 2
                err = ERR_LAYOUT
            elif big != 0:
                status = 2
                err = ERR_META32
        res[0] = status
        res[1] = err
        res[2] = err_root
        res[3] = pending
        res[4] = off_f
        res[5] = off_i
        meta[0] = sd.cast(off_f, sd.u32)
        meta[1] = sd.cast(off_i, sd.u32)


# -- the MaxOverRange fast path (`spirad/backends/gpu_sizer_reduce.py`) --------------------------
# One leaf's elements first + v * stride for v in [0, count), read as in sizer_eval (dt: the
# DTYPE_CODES of the host; int data as int32 words from `di`, f32 from `df`, f64 from `dd`).
# Per part of `chunk` elements: (min, max, bad), bad = 1 when a value has no sizer int
# (NaN, inf, |x| >= 2**62, an i64 beyond MAX_ABS); then one invocation folds the parts.

@sd.kernel
def sizer_minmax(di: sd.types.ndarray(), df: sd.types.ndarray(), dd: sd.types.ndarray(),
                 part: sd.types.ndarray(), first: sd.i64, stride: sd.i64, count: sd.i32,
                 chunk: sd.i32, n_parts: sd.i32, dt: sd.template()):
    for j in range(n_parts):
        mn: sd.i64 = MAX_ABS
        mx: sd.i64 = -MAX_ABS
        bad: sd.i64 = 0
        lo = j * chunk
        hi = lo + chunk
        if hi > count:
            hi = count
        for t in range(lo, hi):
            lin: sd.i64 = first + sd.cast(t, sd.i64) * stride
            v: sd.i64 = 0
            if sd.static(dt == 1):
                v = sd.cast(di[sd.cast(lin, sd.i32)], sd.i64)
            elif sd.static(dt == 2):
                v = sd.cast(di[sd.cast(lin, sd.i32)], sd.i64) & 0xFFFFFFFF
            elif sd.static(dt == 3):
                wi = sd.cast(2 * lin, sd.i32)
                v = (sd.cast(di[wi + 1], sd.i64) << 32) | (sd.cast(di[wi], sd.i64) & 0xFFFFFFFF)
                if v > MAX_ABS or v < -MAX_ABS:
                    bad = 1
                    v = 0
            elif sd.static(dt == 4):
                f = df[sd.cast(lin, sd.i32)]
                if f > -LIMIT_F and f < LIMIT_F:
                    v = sd.cast(f, sd.i64)
                else:
                    bad = 1
            else:
                g = dd[sd.cast(lin, sd.i32)]
                if g > -LIMIT_F and g < LIMIT_F:
                    v = sd.cast(g, sd.i64)
                else:
                    bad = 1
            mn = sd.min(mn, v)
            mx = sd.max(mx, v)
        part[3 * j] = mn
        part[3 * j + 1] = mx
        part[3 * j + 2] = bad


@sd.kernel
def sizer_minmax_total(part: sd.types.ndarray(), out: sd.types.ndarray(), n_parts: sd.i32,
                       slot: sd.i32):
    for _t in range(1):
        mn: sd.i64 = MAX_ABS
        mx: sd.i64 = -MAX_ABS
        bad: sd.i64 = 0
        for j in range(n_parts):
            mn = sd.min(mn, part[3 * j])
            mx = sd.max(mx, part[3 * j + 1])
            bad = sd.max(bad, part[3 * j + 2])
        out[3 * slot] = mn
        out[3 * slot + 1] = mx
        out[3 * slot + 2] = bad
