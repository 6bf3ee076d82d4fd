"""The GPU sizer's pure part: a task's size expressions -> the tables the sizer kernel reads.

Everything here is a function of its arguments (no spirad state, no device, no buffers), so the
rewrite is tested without a GPU (`tests/sizer_gpu/test_device_program.py`). The word layouts
come from `sizer.device_format` and are described in `sizer/FORMAT.md` ("Device tables").

`build` encodes the expressions with the launch's scalar args / ndarray shapes folded in and
rewrites the bytecode into the *device dialect*: a remaining SCALAR_ARG / NDARRAY_SHAPE record is
resolved on the host into CONST, or into OP_ERR with the host evaluator's message kept for the
error report; the `a` word of FIELD_LOAD / NDARRAY_READ becomes an index into the leaf table.
The aux header, leaf table and stack table follow the bytecode. Leaves are assigned to data
slots (aliasing views of their buffers, per dtype class); a task whose leaves do not fit the
slots or int32 word indices raises `Unsupported` (it is sized on the host instead).

`job_table` cuts each root into jobs: a root whose outermost MaxOverRange has known bounds is
split into slices of its range, each small enough that one invocation runs at most about
`slice_budget` records, and spread over at least `MIN_JOBS` invocations when long; a root whose
range bounds read device data is described by `prepass_table` (its bounds are evaluated in a
first round, `prepass_split` reads them back) before it is split.

`error_message` turns a device error record (code, node, value, axis) into the message of the
`sizer.SizerError` the host raises, naming the leaf as the host evaluator would.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import sizer as sz
import sizer.device_format as F
from sizer.bytecode import Header, Op, const_value, const_words
from sizer.evaluate import to_int

MIN_JOBS = 1024             # a split root spreads over at least this many invocations (if long)
MAX_JOBS_PER_ROOT = 32768   # sizer_reduce loops over a root's jobs: stay under any loop cap

# data slots in `sizer_eval`'s parameter order (di0.., df0.., dd0..): the dtype each is read as
SLOT_DTYPES = ("i32",) * F.INT_SLOTS + ("f32",) * F.F32_SLOTS + ("f64",) * F.F64_SLOTS
_SLOT_CLASS = {F.DT_I32: "i32", F.DT_U32: "i32", F.DT_I64: "i32", F.DT_F32: "f32",
               F.DT_F64: "f64"}


class Unsupported(Exception):
    """This task's leaves cannot be read by the GPU sizer; evaluate on the host."""


@dataclass(frozen=True)
class Leaf:
    """One array a FIELD_LOAD / NDARRAY_READ reads: backend storage, element dtype (a
    `kernel_ir.dtypes.DType`; only its name is used here), full shape, and the element offset of
    element 0 in the storage."""
    storage: object
    dtype: object
    shape: tuple
    base: int = 0


@dataclass(frozen=True)
class DeviceProgram:
    """The device tables of one set of expressions at one launch's scalars / shapes / leaves."""
    code: np.ndarray        # the host bytecode (error messages name its records)
    words: np.ndarray       # int32: device-dialect bytecode, aux header, leaf and stack tables
    rec: np.ndarray         # int64 (n_nodes, 4): the device-dialect records
    roots: tuple            # (first node, root node) per root
    n_stacks: int
    vstride: int            # value slots per job: the longest root span
    slots: tuple            # per data slot (SLOT_DTYPES order): the storage it aliases, or None
    leaf_info: dict         # leaf index -> (leaf key, shape)
    host_errors: dict       # node -> message of a record the host resolved to OP_ERR
    split: dict             # root -> (loop node, begin, end): outermost ranges known on the host
    prepass: tuple          # (root, first node, begin node, end node, loop node): read on device

    @property
    def n_roots(self) -> int:
        return len(self.roots)


def build(exprs, *, leaves: dict, scalars: dict, shapes: dict, entry_sizes=None, kinds=None,
          has_f64: bool = True, int_slots: int = F.INT_SLOTS,
          f32_slots: int = F.F32_SLOTS) -> DeviceProgram:
    """The device tables of `exprs`. `leaves`: {('field', id) | ('ndarray', arg): Leaf};
    `scalars`: {arg: value}; `shapes`: {arg: shape tuple}; `entry_sizes` / `kinds`: the stacks
    (one per root, or None: no layout). Raises `Unsupported`."""
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
    h = Header(code[:sz.HEADER_WORDS])
    if h.n_roots == 0:
        raise Unsupported("no roots")
    dev = code.astype(np.int64)
    rec = dev[h.nodes_off:h.index_off].reshape(h.n_nodes, sz.RECORD_WORDS)
    table, leaf_index, leaf_info, slots = _leaf_table(leaves, has_f64, int_slots, f32_slots)
    host_errors = _resolve_host_records(rec, leaf_index, scalars, shapes)

    n_stacks = len(entry_sizes) if entry_sizes is not None else 0
    leaf_off = len(dev) + F.AUX_WORDS
    stack_off = leaf_off + F.LEAF_WORDS * len(table)
    aux = [0] * F.AUX_WORDS
    aux[F.AUX_LEAF_OFF], aux[F.AUX_N_LEAVES] = leaf_off, len(table)
    aux[F.AUX_STACK_OFF], aux[F.AUX_N_STACKS] = stack_off, n_stacks
    stacks = []
    for size, kind in zip(entry_sizes or (), kinds or ()):
        row = [0] * F.STACK_WORDS
        row[F.STACK_ENTRY_SIZE], row[F.STACK_KIND] = int(size), F.STACK_KIND_CODES[kind]
        stacks += row
    words = np.concatenate([dev, np.array(aux + [w for row in table for w in row] + stacks,
                                          dtype=np.int64)]).astype(np.int32)

    roots = tuple(tuple(r) for r in dev[h.roots_off:h.nodes_off].reshape(h.n_roots, 2).tolist())
    split, prepass = {}, []
    for r, (first, last) in enumerate(roots):
        if rec[last, F.R_OP] != Op.MOR:
            continue
        p = int(rec[last, F.R_B])
        ba, ea = int(rec[p, F.R_A]), int(rec[p, F.R_B])
        if rec[ba, F.R_OP] == Op.CONST and rec[ea, F.R_OP] == Op.CONST:
            split[r] = (p, const_value(rec[ba, F.R_A], rec[ba, F.R_B]),
                        const_value(rec[ea, F.R_A], rec[ea, F.R_B]))
        else:
            prepass.append((r, first, ba, ea, p))
    vstride = max(last - first + 1 for first, last in roots)
    return DeviceProgram(code, words, rec, roots, n_stacks, vstride, slots, leaf_info,
                         host_errors, split, tuple(prepass))


def _leaf_table(leaves: dict, has_f64: bool, int_slots: int = F.INT_SLOTS,
                f32_slots: int = F.F32_SLOTS):
    """(leaf records, leaf key -> index, index -> (key, shape), per-slot storages); at most
    `int_slots` / `f32_slots` distinct int / f32 buffers (the slots the backend's kernel reads)."""
    limits = {"i32": min(int_slots, F.INT_SLOTS), "f32": min(f32_slots, F.F32_SLOTS),
              "f64": F.F64_SLOTS if has_f64 else 0}
    first_slot = {cl: SLOT_DTYPES.index(cl) for cl in limits}
    slot_of: dict = {}          # (class, id(storage)) -> slot number within the class
    slots = [None] * F.DATA_SLOTS
    table, leaf_index, leaf_info = [], {}, {}
    for key, lf in leaves.items():
        dt = F.DTYPE_CODES.get(lf.dtype.name)
        if dt is None:
            raise Unsupported(f"leaf dtype {lf.dtype}")
        cl = _SLOT_CLASS[dt]
        sk = (cl, id(lf.storage))
        if sk not in slot_of:
            n_in = sum(1 for c, _ in slot_of if c == cl)
            if n_in >= limits[cl]:
                raise Unsupported(f"more than {limits[cl]} '{cl}' data buffers")
            slot_of[sk] = n_in
            slots[first_slot[cl] + n_in] = lf.storage
        shape = tuple(int(s) for s in lf.shape)
        if len(shape) > sz.MAX_INDICES or any(s >= 2**31 for s in shape):
            raise Unsupported("shape does not fit int32 words")
        count = int(np.prod(shape, dtype=object)) if shape else 1
        if lf.base >= 2**31 or (lf.base + count) * (2 if dt == F.DT_I64 else 1) >= 2**31:
            raise Unsupported("array too large for int32 word indices")
        row = [0] * F.LEAF_WORDS
        row[F.LEAF_DTYPE], row[F.LEAF_SLOT], row[F.LEAF_RANK] = dt, slot_of[sk], len(shape)
        row[F.LEAF_BASE] = lf.base
        row[F.LEAF_SHAPE:F.LEAF_SHAPE + len(shape)] = shape
        leaf_index[key] = len(table)
        leaf_info[len(table)] = (key, shape)
        table.append(row)
    return table, leaf_index, leaf_info, tuple(slots)


def _resolve_host_records(rec, leaf_index: dict, scalars: dict, shapes: dict) -> dict:
    """Rewrite `rec` in place into the device dialect; returns {node: message} of OP_ERR records."""
    host_errors = {}
    ops = rec[:, F.R_OP]
    for i in np.flatnonzero((ops >= Op.SCALAR_ARG) & (ops <= Op.NDARRAY_READ)).tolist():
        op, a, b = int(rec[i, F.R_OP]), int(rec[i, F.R_A]), int(rec[i, F.R_B])
        if op in (Op.FIELD_LOAD, Op.NDARRAY_READ):
            key = ("field" if op == Op.FIELD_LOAD else "ndarray", a)
            if key in leaf_index:
                rec[i, F.R_A] = leaf_index[key]
            else:
                rec[i, F.R_OP] = F.OP_ERR
                what = "FieldLoad" if op == Op.FIELD_LOAD else "NdarrayRead"
                host_errors[i] = f"{what}({a}): no data for this leaf"
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
            rec[i] = (F.OP_ERR, 0, 0, 0)
            host_errors[i] = str(e)
    return host_errors


# -- jobs ------------------------------------------------------------------------------------------

def slice_step(n: int, body_records: int, slice_budget: int) -> int:
    """Range values per job for a root range of `n` values whose body costs `body_records`."""
    step = max(1, min(slice_budget // max(body_records, 1), -(-n // MIN_JOBS)))
    return max(step, -(-n // MAX_JOBS_PER_ROOT))


def job_table(roots, split: dict, slice_budget: int) -> np.ndarray:
    """The job table (int32 words) for `roots` with known outermost ranges `split`
    {root: (loop node, begin, end)}: one job per root, or one per slice of a split range."""
    per_root, parts = [], []
    n_jobs = 0
    for r, (first, last) in enumerate(roots):
        s = split.get(r)
        if s is not None and s[2] - s[1] > 1:
            p, bv, ev = s
            step = slice_step(ev - bv, last - p, slice_budget)
            lo = np.arange(bv, ev, step, dtype=np.int64)
            hi = np.minimum(lo + step, ev)
            jobs = np.empty((len(lo), F.JOB_WORDS), np.int32)
            jobs[:, F.JOB_FIRST], jobs[:, F.JOB_LAST] = first, last
            jobs[:, F.JOB_TOP], jobs[:, F.JOB_ROOT] = p, r
            jobs[:, F.JOB_LO:F.JOB_LO + 2] = lo.view(np.int32).reshape(-1, 2)  # little-endian
            jobs[:, F.JOB_HI:F.JOB_HI + 2] = hi.view(np.int32).reshape(-1, 2)
        else:
            jobs = np.array([_whole_job(first, last, r)], np.int32)
        per_root += [n_jobs, n_jobs + len(jobs)]
        n_jobs += len(jobs)
        parts.append(jobs.reshape(-1))
    head = np.array([0] * F.JOBS_HEADER + per_root, np.int32)
    head[F.JOBS_N_JOBS], head[F.JOBS_N_ROOTS] = n_jobs, len(roots)
    return np.concatenate([head] + parts)


def _whole_job(first: int, last: int, root: int) -> list:
    job = [0] * F.JOB_WORDS
    job[F.JOB_FIRST], job[F.JOB_LAST], job[F.JOB_TOP], job[F.JOB_ROOT] = first, last, F.NO_TOP, root
    return job


def prepass_table(prepass) -> np.ndarray:
    """Jobs evaluating the begin and the end of every range in `prepass` (two per entry; the
    table has no roots: nothing reduces them)."""
    jobs = []
    for r, first, ba, ea, _p in prepass:
        jobs += _whole_job(first, ba, r) + _whole_job(ba + 1, ea, r)
    head = [0] * F.JOBS_HEADER
    head[F.JOBS_N_JOBS] = 2 * len(prepass)
    return np.array(head + jobs, np.int32)


def prepass_split(program: DeviceProgram, jst: np.ndarray) -> dict:
    """`program.split` plus the ranges the prepass evaluated (`jst`: its job states, one row per
    job); a range whose bounds failed stays unsplit (its main job fails the same way)."""
    split = dict(program.split)
    for k, (r, _first, _ba, _ea, p) in enumerate(program.prepass):
        b, e = jst[2 * k], jst[2 * k + 1]
        if b[F.JST_STATUS] == F.JOB_DONE and e[F.JST_STATUS] == F.JOB_DONE:
            split[r] = (p, int(b[F.JST_VALUE]), int(e[F.JST_VALUE]))
    return split


# -- errors ----------------------------------------------------------------------------------------

def error_message(program: DeviceProgram, code: int, node: int, value: int, axis: int) -> str:
    """The message of a device evaluation error, naming the record of the host bytecode."""
    if code == F.ERR_HOST:
        return program.host_errors.get(node, f"leaf at sizer node {node}")
    h = Header(program.code[:sz.HEADER_WORDS])
    r = h.nodes_off + sz.RECORD_WORDS * node
    op, a = int(program.code[r + F.R_OP]), int(program.code[r + F.R_A])
    what = Op.NAMES.get(op, str(op)).title()
    shape = None
    if op in (Op.FIELD_LOAD, Op.NDARRAY_READ):
        what = f"FieldLoad(field {a})" if op == Op.FIELD_LOAD else f"NdarrayRead(arg {a})"
        info = program.leaf_info.get(int(program.rec[node, F.R_A]))
        shape = info[1] if info is not None else None
    where = f"(GPU sizer, node {node})"
    if code == F.ERR_INDEX:
        n = shape[axis] if shape is not None and axis < len(shape) else "?"
        return f"{what}: index {value} out of range [0, {n}) on axis {axis} {where}"
    if code == F.ERR_OVERFLOW:
        return f"size expression overflow in {what} {where}"
    if code == F.ERR_NONFINITE:
        return f"{what}: non-finite value or a value outside the sizer range {where}"
    if code == F.ERR_RANK:
        return f"{what}: {value} indices for an array of shape {shape} {where}"
    return f"GPU sizer error {code} ({F.ERR_NAMES.get(code, 'unknown')}) at node {node}"
