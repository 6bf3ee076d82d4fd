"""The GPU sizer's wire format: every word layout and code the host and the device kernel share.

The host (`spirad.backends.gpu_sizer`) builds tables of int32 words and reads back int64 result
records; the device side (`shaders/sizer_kernel.py`, spirad kernels) indexes those same words.
Both import their offsets, record sizes and codes from here, so a layout is written exactly once
(a module-level int is a compile-time constant inside a spirad kernel). `FORMAT.md` ("Device
tables") describes each table; the names below follow it.

Naming: `X_WORDS` is the size of one record of table X, `X_<FIELD>` the word offset of a field
inside that record. Codes are small ints; every error code has a message in `ERR_NAMES`.
"""

from __future__ import annotations

from .bytecode import (H_INDEX_OFF, H_N_INDEX, H_NODES_OFF, MAX_INDICES, R_A, R_B, R_C, R_OP,
                       RECORD_WORDS, Op)
from .errors import MAX_ABS
from .layout import COUNTER_BYTES

# -- value range -------------------------------------------------------------------------------
SENTINEL = -(1 << 62)                   # below every valid value: a MaxOverRange's start value
LIMIT_F = 4611686018427387904.0         # 2**62 as a float: |x| >= this has no sizer int
U32_MAX = (1 << 32) - 1                 # metadata words are uint32

# -- the device dialect of the bytecode (`prog`) -------------------------------------------------
# The host resolves SCALAR_ARG / NDARRAY_SHAPE records into CONST, or into OP_ERR when the host
# evaluator would raise on them; FIELD_LOAD / NDARRAY_READ keep their op, with `a` a leaf index.
OP_ERR = 13

# After the bytecode (at word index_off + n_index) follows the aux header ...
AUX_WORDS = 4
AUX_LEAF_OFF, AUX_N_LEAVES, AUX_STACK_OFF, AUX_N_STACKS = range(AUX_WORDS)

# ... the leaf table (one record per array a read can address) ...
LEAF_WORDS = 4 + MAX_INDICES
LEAF_DTYPE, LEAF_SLOT, LEAF_RANK, LEAF_BASE, LEAF_SHAPE = range(5)  # shape: MAX_INDICES words

# ... and the stack table (one record per adstack of the task, in stack order).
STACK_WORDS = 2
STACK_ENTRY_SIZE, STACK_KIND = range(STACK_WORDS)

# leaf dtype codes: int data is read as int32 words from an int slot (i64: two words)
DT_I32, DT_U32, DT_I64, DT_F32, DT_F64 = 1, 2, 3, 4, 5
DTYPE_CODES = {"i32": DT_I32, "u32": DT_U32, "u1": DT_U32, "i64": DT_I64, "f32": DT_F32,
               "f64": DT_F64}

# stack kind codes (the layout kinds of `sizer.layout`)
KIND_FLOAT, KIND_INT, KIND_PRIMAL = 0, 1, 2
STACK_KIND_CODES = {"float": KIND_FLOAT, "int": KIND_INT, "primal": KIND_PRIMAL}

# data slots of `sizer_eval`: aliasing views of the leaves' buffers, per dtype class
INT_SLOTS, F32_SLOTS, F64_SLOTS = 4, 2, 2
DATA_SLOTS = INT_SLOTS + F32_SLOTS + F64_SLOTS
# storage buffers each kernel binds besides the arguments and the status buffer (checked
# against the kernels' signatures when shaders/sizer_kernel.py is imported)
EVAL_BUFFERS = 4 + DATA_SLOTS           # prog, jobs, val, jst, data slots
REDUCE_BUFFERS = 3                      # jobs, jst, rres
LAYOUT_BUFFERS = 5                      # prog, rres, jst, res, meta
MINMAX_BUFFERS = 4                      # di, df, dd, part
MINMAX_TOTAL_BUFFERS = 2                # part, out

# -- the job table (`jobs`, int32) ---------------------------------------------------------------
# [n_jobs, n_roots, (job_begin, job_end) per root, job records]
JOBS_N_JOBS, JOBS_N_ROOTS = 0, 1
JOBS_HEADER = 2
JOBS_ROOT_WORDS = 2                     # per root after the header: job_begin, job_end
JOB_WORDS = 8
JOB_FIRST, JOB_LAST, JOB_TOP, JOB_ROOT, JOB_LO, JOB_HI = 0, 1, 2, 3, 4, 6  # lo / hi: 2 words
NO_TOP = -1                             # JOB_TOP of a job that sweeps its whole span

# -- job state (`jst`, int64, one record per job) ------------------------------------------------
JST_WORDS = 8
(JST_STATUS, JST_IP, JST_VALUE, JST_ERR, JST_ERR_NODE, JST_ERR_VALUE, JST_ERR_AXIS,
 JST_STEPS) = range(JST_WORDS)
JOB_FRESH, JOB_SUSPENDED, JOB_DONE, JOB_ERROR = 0, 1, 2, 3

# -- per-root results (`rres`, int64) ------------------------------------------------------------
RRES_WORDS = 4
RRES_MAX, RRES_PENDING, RRES_ERR, RRES_ERR_JOB = range(RRES_WORDS)

# -- the result the host reads back (`res`, int64): a header, then one record per root ----------
RES_HEADER = 9
(RES_STATUS, RES_ERR, RES_ERR_ROOT, RES_PENDING, RES_STRIDE_FLOAT, RES_STRIDE_INT,
 RES_ERR_NODE, RES_ERR_VALUE, RES_ERR_AXIS) = range(RES_HEADER)
RES_ROOT = 4
RES_OFFSET, RES_CAP, RES_VALUE, RES_ROOT_ERR = range(RES_ROOT)
STATUS_OK, STATUS_PENDING, STATUS_ERROR = 0, 1, 2

# -- the adstack metadata (`meta`, uint32): [stride_float, stride_int, (offset, max_size) each] -
META_HEADER = 2
META_STRIDE_FLOAT, META_STRIDE_INT = range(META_HEADER)
META_STACK = 2
META_OFFSET, META_MAX_SIZE = range(META_STACK)

# -- the fast path's min / max records (`part`, `minmax_out`, int64) -----------------------------
MINMAX_WORDS = 3
MINMAX_MIN, MINMAX_MAX, MINMAX_BAD = range(MINMAX_WORDS)

# -- error codes (jst[JST_ERR], rres[RRES_ERR], res[RES_ERR], res root records) ------------------
ERR_INDEX = 1       # a read index outside [0, shape[axis])
ERR_OVERFLOW = 2    # a value outside the sizer range
ERR_NONFINITE = 3   # NaN / inf / |x| >= 2**62 read from float data
ERR_HOST = 4        # a record the host resolved to OP_ERR
ERR_RANK = 5        # the number of indices differs from the array's rank
ERR_LAYOUT = 6      # the per-thread stride overflows (`compute_layout` raises)
ERR_META32 = 7      # a metadata word does not fit 32 bits
ERR_NAMES = {ERR_INDEX: "index out of range", ERR_OVERFLOW: "overflow",
             ERR_NONFINITE: "non-finite or out-of-range float",
             ERR_HOST: "leaf rejected by the host", ERR_RANK: "wrong number of indices",
             ERR_LAYOUT: "per-thread stride overflows",
             ERR_META32: "metadata word does not fit 32 bits"}


def meta_words(n_stacks: int) -> int:
    """Length of a task's metadata (uint32 words)."""
    return META_HEADER + META_STACK * n_stacks


def res_words(n_roots: int) -> int:
    """Length of the result (int64 words)."""
    return RES_HEADER + RES_ROOT * n_roots


# everything above, including what the kernel takes from the bytecode, errors and layout
# modules (H_*, R_*, MAX_INDICES, RECORD_WORDS, Op, MAX_ABS, COUNTER_BYTES)
__all__ = sorted(n for n in globals() if n.isupper()) + ["Op", "meta_words", "res_words"]
