"""The GPU sizer's pure part (`spirad.backends.gpu_sizer.device_program`), without any device:
the device-dialect rewrite (records folded to CONST / OP_ERR, leaf indices), the leaf and stack
tables, the data slots, the job tables (slices that cover each range exactly and respect the
record budget), the prepass, error messages — and, through a Python model of the sizer kernel
that reads only the table words (`device_model`), agreement with the host reference
`sizer.eval_tree` on random expressions."""
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sizer as sz
import sizer.device_format as F
from kernel_ir import dtypes as T
from sizer.bytecode import Op, const_value
from spirad.backends.gpu_sizer import device_program as dp
from tests.sizer_gpu import device_model as model
from tests.sizer.sizer_strategies import exprs, make_context, seeds

V0, V1 = sz.BoundVariable(0), sz.BoundVariable(1)
_DT = {np.dtype(np.int32): T.i32, np.dtype(np.uint32): T.u32, np.dtype(np.int64): T.i64,
       np.dtype(np.float32): T.f32, np.dtype(np.float64): T.f64}


def _leaves(ctx):
    """Leaves over the context's arrays (numpy arrays stand in for device storages)."""
    out = {}
    for kind, arrays in (("ndarray", ctx.ndarrays), ("field", ctx.fields)):
        for k, a in arrays.items():
            a = np.array(a, order="C")       # (keeps 0-d arrays 0-d)
            out[(kind, k)] = dp.Leaf(a, _DT[a.dtype], a.shape)
    return out


def _shapes(ctx):
    return {k: np.shape(a) for k, a in ctx.ndarrays.items()}


def _model_outcomes(program, budget=model.UNLIMITED, slice_budget=1 << 16):
    """Per root ('ok', value) / ('error',): prepass, then rounds until no job is pending."""
    split = program.split
    if program.prepass:
        pre = dp.prepass_table(program.prepass)
        split = dp.prepass_split(program, model.run_jobs(program, pre))
    jobs = dp.job_table(program.roots, split, slice_budget)
    state, rounds, values = None, 0, {}
    while True:
        state = model.run_jobs(program, jobs, budget, state, rounds, values)
        rounds += 1
        per = model.reduce_roots(jobs, state)
        if "pending" not in per or any(p != "pending" and p[0] == "error" for p in per):
            break
    return [("error",) if p[0] == "error" else p for p in per], rounds


def _reference(roots, ctx):
    out = []
    for r in roots:
        try:
            out.append(("ok", sz.eval_tree(r, ctx)))
        except sz.SizerError:
            out.append(("error",))
    return out


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(roots=st.lists(exprs(), min_size=1, max_size=3), seed=seeds)
def test_tables_evaluate_like_the_host_reference(roots, seed):
    ctx = make_context(seed)
    program = dp.build(roots, leaves=_leaves(ctx), scalars=ctx.scalars, shapes=_shapes(ctx))
    got, _ = _model_outcomes(program)
    assert got == _reference(roots, ctx), [str(r) for r in roots]


def test_suspended_jobs_resume_to_the_same_values():
    """A budget far below a root's work: jobs suspend, later rounds resume from the saved `ip`."""
    ctx = make_context(3)
    e = sz.MaxOverRange(0, sz.Const(0), sz.Const(50), sz.MaxOverRange(
        1, sz.Const(0), sz.Add(V0, sz.Const(3)), sz.Add(sz.Mul(V0, V1), sz.FieldLoad(1, ()))))
    program = dp.build([e, sz.Const(4)], leaves=_leaves(ctx), scalars={}, shapes={})
    got, rounds = _model_outcomes(program, budget=37, slice_budget=37)
    assert got == _reference([e, sz.Const(4)], ctx) and rounds > 3


def test_scalars_and_shapes_fold_to_const_or_err():
    """Records the host can resolve become CONST; ones the host evaluator rejects become OP_ERR
    with the host's message; the `a` word of a read becomes its leaf index."""
    nd = np.arange(6, dtype=np.int32)
    leaves = {("ndarray", 3): dp.Leaf(nd, T.i32, (6,)), ("field", 9): dp.Leaf(nd, T.i32, (6,))}
    roots = [sz.Add(sz.NdarrayRead(3, (sz.ScalarArg(0),)), sz.NdarrayShape(3, 0)),
             sz.ScalarArg(1),                       # NaN: the host evaluator raises
             sz.NdarrayShape(3, 4),                 # axis out of range
             sz.FieldLoad(9, (sz.Const(1),)),
             sz.FieldLoad(7, (sz.Const(1),))]       # no data for this leaf
    program = dp.build(roots, leaves=leaves, scalars={0: 2, 1: float("nan")}, shapes={3: (6,)})
    rec = program.rec
    ops = rec[:, F.R_OP].tolist()
    assert Op.SCALAR_ARG not in ops and Op.NDARRAY_SHAPE not in ops
    reads = [i for i, o in enumerate(ops) if o in (Op.FIELD_LOAD, Op.NDARRAY_READ)]
    assert [int(rec[i, F.R_A]) for i in reads] == [0, 1]  # leaf indices in the leaf table
    errs = [i for i, o in enumerate(ops) if o == F.OP_ERR]
    assert len(errs) == 3
    msgs = [program.host_errors[i] for i in errs]
    assert "ScalarArg(1)" in msgs[0] and "axis out of range" in msgs[1] \
        and "FieldLoad(7)" in msgs[2]
    for i, m in zip(errs, msgs):
        assert dp.error_message(program, F.ERR_HOST, i, 0, 0) == m
    got, _ = _model_outcomes(program)
    assert got == [("ok", 2 + 6), ("error",), ("error",), ("ok", 1), ("error",)]
    # the words the kernel reads: the rewritten records sit where the header says
    h = sz.bytecode.Header(program.words[:sz.HEADER_WORDS])
    assert (program.words[h.nodes_off:h.index_off].reshape(-1, 4) == rec).all()


def test_leaf_and_stack_tables_and_slots():
    a32 = np.zeros(12, np.int32)
    a64 = np.zeros(5, np.int64)
    f32 = np.zeros((2, 3), np.float32)
    leaves = {("ndarray", 0): dp.Leaf(a32, T.i32, (3, 4)),
              ("field", 5): dp.Leaf(a32, T.u1, (2,), base=7),   # same buffer: same slot
              ("field", 6): dp.Leaf(a64, T.i64, (5,)),
              ("ndarray", 1): dp.Leaf(f32, T.f32, (2, 3))}
    roots = [sz.NdarrayRead(0, (sz.Const(1), sz.Const(2))), sz.FieldLoad(5, (sz.Const(0),)),
             sz.FieldLoad(6, (sz.Const(4),)), sz.NdarrayRead(1, (sz.Const(1), sz.Const(0)))]
    program = dp.build(roots, leaves=leaves, scalars={}, shapes={}, entry_sizes=[4, 8, 4, 8],
                       kinds=["float", "int", "primal", "float"])
    w = program.words.astype(np.int64)
    h = sz.bytecode.Header(w[:sz.HEADER_WORDS])
    aux = w[h.index_off + h.n_index:][:F.AUX_WORDS]
    assert aux[F.AUX_N_LEAVES] == 4 and aux[F.AUX_N_STACKS] == 4
    leaf = w[aux[F.AUX_LEAF_OFF]:aux[F.AUX_STACK_OFF]].reshape(4, F.LEAF_WORDS)
    assert leaf[:, F.LEAF_DTYPE].tolist() == [F.DT_I32, F.DT_U32, F.DT_I64, F.DT_F32]
    assert leaf[:, F.LEAF_SLOT].tolist() == [0, 0, 1, 0]
    assert leaf[:, F.LEAF_RANK].tolist() == [2, 1, 1, 2]
    assert leaf[:, F.LEAF_BASE].tolist() == [0, 7, 0, 0]
    assert leaf[0, F.LEAF_SHAPE:F.LEAF_SHAPE + 3].tolist() == [3, 4, 0]
    stacks = w[aux[F.AUX_STACK_OFF]:].reshape(4, F.STACK_WORDS)
    assert stacks[:, F.STACK_ENTRY_SIZE].tolist() == [4, 8, 4, 8]
    assert stacks[:, F.STACK_KIND].tolist() == [F.KIND_FLOAT, F.KIND_INT, F.KIND_PRIMAL,
                                                F.KIND_FLOAT]
    assert len(w) == aux[F.AUX_STACK_OFF] + 4 * F.STACK_WORDS
    assert program.slots[0] is a32 and program.slots[1] is a64
    assert program.slots[dp.SLOT_DTYPES.index("f32")] is f32
    assert sum(s is not None for s in program.slots) == 3


def test_leaves_that_do_not_fit_are_unsupported():
    arrays = [np.zeros(2, np.int32) for _ in range(F.INT_SLOTS + 1)]
    leaves = {("ndarray", k): dp.Leaf(a, T.i32, (2,)) for k, a in enumerate(arrays)}
    roots = [sz.NdarrayRead(k, (sz.Const(0),)) for _, k in leaves]
    with pytest.raises(dp.Unsupported, match="data buffers"):
        dp.build(roots, leaves=leaves, scalars={}, shapes={})
    f64 = {("field", 0): dp.Leaf(np.zeros(2), T.f64, (2,))}
    dp.build([sz.FieldLoad(0, (sz.Const(0),))], leaves=f64, scalars={}, shapes={})
    with pytest.raises(dp.Unsupported):
        dp.build([sz.FieldLoad(0, (sz.Const(0),))], leaves=f64, scalars={}, shapes={},
                 has_f64=False)
    huge = {("field", 0): dp.Leaf(np.zeros(2, np.int64), T.i64, (2**30 + 1,))}
    with pytest.raises(dp.Unsupported, match="int32 word"):
        dp.build([sz.FieldLoad(0, (sz.Const(0),))], leaves=huge, scalars={}, shapes={})


def _jobs(words):
    words = np.asarray(words, np.int64)
    n_jobs, n_roots = int(words[F.JOBS_N_JOBS]), int(words[F.JOBS_N_ROOTS])
    ranges = words[F.JOBS_HEADER:F.JOBS_HEADER + F.JOBS_ROOT_WORDS * n_roots].reshape(-1, 2)
    jobs = words[F.JOBS_HEADER + F.JOBS_ROOT_WORDS * n_roots:].reshape(n_jobs, F.JOB_WORDS)
    lo = [const_value(a, b) for a, b in jobs[:, F.JOB_LO:F.JOB_LO + 2]]
    hi = [const_value(a, b) for a, b in jobs[:, F.JOB_HI:F.JOB_HI + 2]]
    return ranges, jobs, lo, hi


@pytest.mark.parametrize("begin,end,budget", [(0, 4 * 1024 * 1024, 65535 - 64), (-7, 10, 100),
                                              (3, 100_000, 40), (2**40, 2**40 + 5000, 1 << 16),
                                              (0, 10**9, 65471)])
def test_slices_cover_the_range_and_respect_the_budget(begin, end, budget):
    body = sz.Add(sz.Mul(sz.NdarrayRead(0, (V0,)), sz.Const(3)), sz.Const(2))
    e = sz.MaxOverRange(0, sz.Const(begin), sz.Const(end), body)
    leaves = {("ndarray", 0): dp.Leaf(np.zeros(1, np.int32), T.i32, (1,))}
    program = dp.build([sz.Const(1), e], leaves=leaves, scalars={}, shapes={})
    assert program.split and not program.prepass
    words = dp.job_table(program.roots, program.split, budget)
    ranges, jobs, lo, hi = _jobs(words)
    assert ranges.tolist()[0] == [0, 1] and ranges[1][0] == 1 and ranges[1][1] == len(jobs)
    assert jobs[0, F.JOB_TOP] == F.NO_TOP                          # the constant root: one job
    split = jobs[1:]
    loop, first, last = program.split[1][0], program.roots[1][0], program.roots[1][1]
    assert (split[:, F.JOB_TOP] == loop).all() and (split[:, F.JOB_ROOT] == 1).all()
    assert (split[:, F.JOB_FIRST] == first).all() and (split[:, F.JOB_LAST] == last).all()
    assert lo[1] == begin and hi[-1] == end and lo[2:] == hi[1:-1]  # contiguous, exact cover
    n = end - begin
    sizes = [b - a for a, b in zip(lo[1:], hi[1:])]
    assert len(split) <= dp.MAX_JOBS_PER_ROOT
    assert len(split) >= min(dp.MIN_JOBS, n) or max(sizes) * (last - loop) <= budget
    if -(-n // dp.MAX_JOBS_PER_ROOT) * (last - loop) <= budget:
        assert max(sizes) * (last - loop) <= budget                # the budget holds when it can


def test_prepass_reads_device_bounds_first():
    ctx = sz.DictContext(ndarrays={0: np.array([9, 2, 40], np.int32)},
                         fields={0: np.array(5000, np.int64)})
    e = sz.MaxOverRange(0, sz.NdarrayRead(0, (sz.Const(1),)), sz.FieldLoad(0, ()),
                        sz.Add(V0, sz.Const(1)))
    program = dp.build([e], leaves=_leaves(ctx), scalars={}, shapes=_shapes(ctx))
    assert program.prepass and not program.split
    pre = dp.prepass_table(program.prepass)
    assert pre[F.JOBS_N_JOBS] == 2 and pre[F.JOBS_N_ROOTS] == 0
    split = dp.prepass_split(program, model.run_jobs(program, pre))
    assert split == {0: (program.prepass[0][4], 2, 5000)}
    assert _model_outcomes(program)[0] == [("ok", 5000)]


def test_error_messages_name_the_leaf():
    a = np.arange(10, dtype=np.int32)
    leaves = {("ndarray", 2): dp.Leaf(a, T.i32, (2, 5))}
    e = sz.NdarrayRead(2, (sz.Const(1), sz.Const(7)))
    program = dp.build([e], leaves=leaves, scalars={}, shapes={})
    jst = model.run_jobs(program, dp.job_table(program.roots, program.split, 100))
    code, node, value, axis = (int(jst[0, k]) for k in (F.JST_ERR, F.JST_ERR_NODE,
                                                          F.JST_ERR_VALUE, F.JST_ERR_AXIS))
    assert (code, value, axis) == (F.ERR_INDEX, 7, 1)
    assert dp.error_message(program, code, node, value, axis) == \
        f"NdarrayRead(arg 2): index 7 out of range [0, 5) on axis 1 (GPU sizer, node {node})"
    bad_rank = dp.build([sz.NdarrayRead(2, (sz.Const(1),))], leaves=leaves, scalars={}, shapes={})
    jst = model.run_jobs(bad_rank, dp.job_table(bad_rank.roots, bad_rank.split, 100))
    assert jst[0, F.JST_ERR] == F.ERR_RANK
    assert "1 indices for an array of shape (2, 5)" in dp.error_message(
        bad_rank, F.ERR_RANK, int(jst[0, F.JST_ERR_NODE]), 1, 0)


def test_sizer_package_imports_nothing_of_the_project():
    """`sizer.device_format` (shared with the shader) keeps `sizer` a leaf package."""
    import subprocess
    code = ("import sys, sizer, sizer.device_format; "
            "bad = [m for m in sys.modules if m.split('.')[0] in "
            "('spirad', 'kernel_ir', 'passes', 'shaders', 'spirv_codegen', 'gfx_runtime', 'llvm_codegen')]; "
            "assert not bad, bad")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
