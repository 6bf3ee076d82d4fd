"""A Python model of `sizer_eval` + `sizer_reduce`, reading nothing but the words of the tables
`device_program` builds (offsets and codes from `sizer.device_format`), so the pure rewrite is
checked end to end without a device: tables -> values, errors and suspended jobs.

Leaf storages are numpy arrays here (any object works for `device_program`); int data is read as
int32 words, float data as f32 / f64, exactly as the kernel's slot views do.
"""
import numpy as np

import sizer.device_format as F
from sizer.bytecode import Op, const_value
from spirad.backends.gpu_sizer.device_program import SLOT_DTYPES

UNLIMITED = 1 << 62


def _slot_data(program):
    out = []
    for name, st in zip(SLOT_DTYPES, program.slots):
        out.append(None if st is None else np.ascontiguousarray(st).reshape(-1).view(
            {"i32": np.int32, "f32": np.float32, "f64": np.float64}[name]))
    return out


def _first_slot(dt):
    cl = {F.DT_F32: "f32", F.DT_F64: "f64"}.get(dt, "i32")
    return SLOT_DTYPES.index(cl)


def run_jobs(program, jobs, budget=UNLIMITED, state=None, round_=0, values=None):
    """One round over job table `jobs`: the job states (n_jobs x JST_WORDS, int64), as the kernel
    writes them. A later round (`round_` > 0) resumes from the previous round's `state` and
    value slots `values` (a dict job -> {node: value}, kept by the caller like the kernel's
    `val` buffer)."""
    w = [int(x) for x in program.words]
    jobs = [int(x) for x in jobs]
    data = _slot_data(program)
    n_jobs, n_roots = jobs[F.JOBS_N_JOBS], jobs[F.JOBS_N_ROOTS]
    jst = np.zeros((n_jobs, F.JST_WORDS), np.int64) if state is None else state.copy()
    base, ix = w[F.H_NODES_OFF], w[F.H_INDEX_OFF]
    leaf_off = w[w[F.H_INDEX_OFF] + w[F.H_N_INDEX] + F.AUX_LEAF_OFF]
    vals = {} if values is None else values
    for j in range(n_jobs):
        jw = F.JOBS_HEADER + F.JOBS_ROOT_WORDS * n_roots + F.JOB_WORDS * j
        first, last, top = jobs[jw + F.JOB_FIRST], jobs[jw + F.JOB_LAST], jobs[jw + F.JOB_TOP]
        lo = const_value(jobs[jw + F.JOB_LO], jobs[jw + F.JOB_LO + 1])
        hi = const_value(jobs[jw + F.JOB_HI], jobs[jw + F.JOB_HI + 1])
        ip = first
        if round_ > 0:
            if jst[j, F.JST_STATUS] >= F.JOB_DONE:
                continue
            ip = int(jst[j, F.JST_IP])
        val = vals.setdefault(j, {})
        steps, err, err_val, err_axis = 0, 0, 0, 0
        while ip <= last and steps < budget:
            steps += 1
            r = base + F.RECORD_WORDS * ip
            op, a, b, c = w[r + F.R_OP], w[r + F.R_A], w[r + F.R_B], w[r + F.R_C]
            nxt = ip + 1
            v = 0
            if op == Op.CONST:
                v = const_value(a, b)
            elif op in (Op.ADD, Op.SUB, Op.MUL):
                x, y = val[a], val[b]
                v = x + y if op == Op.ADD else max(x - y, 0) if op == Op.SUB else x * y
                if abs(v) > F.MAX_ABS:
                    err, err_val = F.ERR_OVERFLOW, v
            elif op == Op.MAX:
                v = max(val[a], val[b])
            elif op == Op.BOUND_VAR:
                v = val[a]
            elif op == Op.LOOP:
                bv, ev = (lo, hi) if ip == top else (val[a], val[b])
                if bv >= ev:
                    val[c], nxt, v = 0, c + 1, None
                else:
                    val[c], v = F.SENTINEL, bv
            elif op == Op.MOR:
                v = max(val[ip], val[a])
                end = hi if b == top else val[w[base + F.RECORD_WORDS * b + F.R_B]]
                if val[b] + 1 < end:
                    val[b] += 1
                    nxt = b + 1
            elif op in (Op.FIELD_LOAD, Op.NDARRAY_READ):
                lf = leaf_off + F.LEAF_WORDS * a
                dt, slot, rank = w[lf + F.LEAF_DTYPE], w[lf + F.LEAF_SLOT], w[lf + F.LEAF_RANK]
                lin = 0
                if rank != c:
                    err, err_val = F.ERR_RANK, c
                for k in range(c):
                    if err:
                        break
                    iv, n = val[w[ix + b + k]], w[lf + F.LEAF_SHAPE + k]
                    if not 0 <= iv < n:
                        err, err_val, err_axis = F.ERR_INDEX, iv, k
                    lin = lin * n + iv
                lin += w[lf + F.LEAF_BASE]
                if not err:
                    arr = data[_first_slot(dt) + slot]
                    if dt == F.DT_I32:
                        v = int(arr[lin])
                    elif dt == F.DT_U32:
                        v = int(arr[lin]) & 0xFFFFFFFF
                    elif dt == F.DT_I64:
                        v = const_value(int(arr[2 * lin]), int(arr[2 * lin + 1]))
                        if abs(v) > F.MAX_ABS:
                            err, err_val = F.ERR_OVERFLOW, v
                    else:
                        f = float(arr[lin])
                        if -F.LIMIT_F < f < F.LIMIT_F:
                            v = int(f)
                        else:
                            err = F.ERR_NONFINITE
            else:
                assert op == F.OP_ERR, op
                err = F.ERR_HOST
            if err:
                jst[j, [F.JST_STATUS, F.JST_ERR, F.JST_ERR_NODE, F.JST_ERR_VALUE,
                        F.JST_ERR_AXIS]] = (F.JOB_ERROR, err, ip, err_val, err_axis)
                break
            if v is not None:
                val[ip] = v
            ip = nxt
        if not err:
            if ip > last:
                jst[j, F.JST_STATUS], jst[j, F.JST_VALUE] = F.JOB_DONE, val[last]
            else:
                jst[j, F.JST_STATUS], jst[j, F.JST_IP] = F.JOB_SUSPENDED, ip
        jst[j, F.JST_STEPS] = steps
    return jst


def reduce_roots(jobs, jst):
    """Per root, as `sizer_reduce`: ('ok', max over its jobs) or ('error', code) or 'pending'."""
    jobs = [int(x) for x in jobs]
    out = []
    for r in range(jobs[F.JOBS_N_ROOTS]):
        jb = jobs[F.JOBS_HEADER + F.JOBS_ROOT_WORDS * r]
        je = jobs[F.JOBS_HEADER + F.JOBS_ROOT_WORDS * r + 1]
        rows = jst[jb:je]
        errs = [int(x[F.JST_ERR]) for x in rows if x[F.JST_STATUS] == F.JOB_ERROR]
        if errs:
            out.append(("error", errs[0]))
        elif (rows[:, F.JST_STATUS] != F.JOB_DONE).any():
            out.append("pending")
        else:
            out.append(("ok", int(max(F.SENTINEL, *rows[:, F.JST_VALUE].tolist()))))
    return out
