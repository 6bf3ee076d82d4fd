"""IR-level checks of the pipeline: the verifier after every pass, inlining, simplification,
DCE, offloading into tasks (forwarding and temporaries), and pass results agreeing with the
reference interpreter."""
import numpy as np
import pytest

import spirad as sd
from spirad.runtime import state as _state
from spirad.compile.driver import KERNEL_STAGES, TASK_STAGES
from spirad.frontend.transformer import compile_kernel
from kernel_ir import dtypes as T
from kernel_ir import verifier
from kernel_ir.builder import IRBuilder
from kernel_ir.interpreter import Memory, run_tasks
from kernel_ir.nodes import Block, KernelIR, walk
from kernel_ir.ops import Op
from passes.offload import offload


@pytest.fixture(autouse=True)
def _init():
    sd.init(arch="cpu", debug=True)


def stages(kernel, *args):
    """Every stage's output, with the verifier run after each one."""
    st = _state.current()
    _, specs = kernel._signature(args, st)
    k = compile_kernel(kernel, specs, st)
    verifier.verify_kernel(k)
    out = {"frontend": k}
    for name, stage in KERNEL_STAGES:
        k = stage(k)
        verifier.verify_kernel(k, inlined=True)
        out[name] = k
    tl = offload(k)
    verifier.verify_tasks(tl)
    out["offload"] = tl
    for name, stage in TASK_STAGES:
        tl = stage(tl)
        verifier.verify_tasks(tl)
        out[name] = tl
    return out


def ops_of(block_or_tl):
    if hasattr(block_or_tl, "tasks"):
        return [n.op for t in block_or_tl.tasks for n in walk(t.body)]
    body = block_or_tl.body if hasattr(block_or_tl, "body") else block_or_tl
    return [n.op for n in walk(body)]


x = None
y = None
s = None


def _fields():
    global x, y, s
    x = sd.field(sd.f32, shape=8)
    y = sd.field(sd.i32, shape=8)
    s = sd.field(sd.f32, shape=())


@sd.func
def twice(v):
    return v * 2


@sd.kernel
def mixed(a: sd.types.ndarray(), scale: sd.f32):
    s[None] = 1.0                        # serial
    n = a.shape[0] * 2                   # forwarded (shape arithmetic)
    c = 2.0                              # forwarded (constant)
    for i in range(n // 2):              # parallel task
        a[i] = twice(a[i]) * c + scale
    t = s[None]                          # serial: a temporary across tasks
    for i in x:                          # parallel task
        x[i] = t + i
    s[None] = t + 1.0                    # serial, reads the temporary


def test_verifier_runs_after_every_stage_and_offload_splits():
    _fields()
    a = sd.ndarray(sd.f32, 5)
    out = stages(mixed, a, 1.0)
    assert Op.CALL in ops_of(out["frontend"])
    assert Op.CALL not in ops_of(out["inline"])
    tl = out["dce_tasks"]
    assert [t.kind for t in tl.tasks] == ["serial", "range", "serial", "range", "serial"]
    # the parallel bounds are host expressions: shape arithmetic, not a temporary
    t1 = tl.tasks[1]
    assert {n.op for n in walk(Block((t1.end,)))} <= {Op.NDARRAY_SHAPE, Op.CONST, Op.MUL, Op.FLOORDIV}
    assert t1.begin.op == Op.CONST
    # exactly one temporary: `t`, written by one serial task and read by later tasks
    assert len(tl.temps) == 1 and tl.temps[0].dtype == T.f32
    assert tl.temps[0].kind == "temp"


def test_offloaded_kernel_runs_like_numpy_in_the_interpreter():
    _fields()
    a = sd.ndarray(sd.f32, 5)
    tl = stages(mixed, a, 1.0)["dce_tasks"]
    data = np.arange(5, dtype=np.float32)
    mem = _memory(tl, {("ndarray", 0): data.copy()}, [None, 1.5])
    run_tasks(tl, mem)
    np.testing.assert_allclose(mem.arrays[("ndarray", 0, False)], data * 4 + 1.5)
    np.testing.assert_allclose(_arr(mem, x), np.arange(8) + 1.0)
    assert _arr(mem, s)[()] == 2.0


def _memory(tl, given, scalars):
    from kernel_ir.abi import kernel_abi
    abi = kernel_abi(tl)
    arrays = {}
    for ref in abi.bindings:
        if ref.kind == "ndarray":
            arrays[(ref.kind, ref.key, ref.grad)] = given[(ref.kind, ref.key)]
        else:
            arrays[(ref.kind, ref.key, ref.grad)] = np.zeros(ref.shape, ref.dtype.np)
    return Memory(arrays, scalars)


def _arr(mem, field):
    return mem.arrays[("field", field.id, False)]


def test_passes_preserve_meaning():
    """The unsimplified offload and the fully lowered task list compute the same values."""
    _fields()

    @sd.kernel
    def k(a: sd.types.ndarray()):
        for i in a:
            u = a[i] * 1.0 + 0 * i
            w = u
            if 1 > 2:
                w = -u
            for j in range(3):
                w = w + j * (i + 0)
            a[i] = w + sd.sin(0.5) + 2 ** 3

    a = sd.ndarray(sd.f32, 6)
    out = stages(k, a)
    raw = offload(out["inline"])
    data = np.linspace(-1, 1, 6).astype(np.float32)
    results = []
    for tl in (raw, out["dce_tasks"]):
        mem = _memory(tl, {("ndarray", 0): data.copy()}, [None])
        run_tasks(tl, mem)
        results.append(mem.arrays[("ndarray", 0, False)])
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_allclose(results[1], data + 3 * np.arange(6) + np.sin(0.5) + 8, rtol=1e-6)


def test_simplify_folds_constants_and_int_identities():
    _fields()

    @sd.kernel
    def k():
        for i in y:
            y[i] = (2 * 3 + 1) + i * 1 + 0 + (i - 0) * 0
            if 3 > 4:
                y[i] = 100
            x[i] = x[i] * 0.0 + x[i] * 1.0   # x*0.0 is not 0 for NaN/inf: kept

    tl = stages(k)["dce_tasks"]
    body = tl.tasks[0].body
    stores = [n for n in walk(body) if n.op == Op.GLOBAL_STORE and n.arg.dtype == T.i32]
    assert len(stores) == 1                          # the constant-false IF is gone
    value = stores[0].srcs[-1]
    # what is left is `7 + i`: one ADD of a constant 7 and the index
    assert value.op == Op.ADD
    assert {s.op for s in value.srcs} == {Op.CONST, Op.LOOP_INDEX}
    assert [s.arg for s in value.srcs if s.op == Op.CONST] == [7]
    assert Op.IF not in ops_of(tl)
    fstore = [n for n in walk(body) if n.op == Op.GLOBAL_STORE and n.arg.dtype == T.f32][0]
    muls = [n for n in walk(body) if n.op == Op.MUL and n.dtype == T.f32]
    assert len(muls) == 1 and muls[0].srcs[1].arg == 0.0      # x*1.0 folded, x*0.0 kept
    assert fstore.srcs[-1].op == Op.ADD


def test_dce_removes_dead_code_keeps_effects():
    _fields()

    @sd.kernel
    def k():
        for i in x:
            unused = sd.sin(x[i]) * 3.0       # dead: never read
            dead_slot = 1.0
            dead_slot = dead_slot + 2.0       # stored, never loaded
            for j in range(4):                # a loop whose body ends up empty
                tmp = j * 2
            sd.atomic_add(s[None], 1.0)       # effect, result unused: kept
            y[i] = i

    tl = stages(k)["dce_tasks"]
    ops = ops_of(tl)
    assert Op.SIN not in ops
    assert Op.RANGE_FOR not in ops
    assert Op.ALLOCA not in ops and Op.STORE not in ops
    assert ops.count(Op.ATOMIC_ADD) == 1
    assert ops.count(Op.GLOBAL_STORE) == 1
    assert Op.GLOBAL_LOAD not in ops                  # the load only fed the dead sin


def test_dce_drops_empty_serial_tasks():
    _fields()

    @sd.kernel
    def k():
        a = 1.0            # dead serial code
        for i in x:
            x[i] = 1.0

    tl = stages(k)["dce_tasks"]
    assert [t.kind for t in tl.tasks] == ["range"]


def test_parallel_nd_loop_is_one_task():
    _fields()
    m = sd.field(sd.f32, shape=(3, 4))

    @sd.kernel
    def k():
        for i, j in m:
            m[i, j] = i * 4 + j

    tl = stages(k)["dce_tasks"]
    assert len(tl.tasks) == 1 and tl.tasks[0].kind == "range"
    assert tl.tasks[0].end.op == Op.CONST and tl.tasks[0].end.arg == 12
    mem = Memory({("field", m.id, False): np.zeros((3, 4), np.float32)})
    run_tasks(tl, mem)
    np.testing.assert_array_equal(mem.arrays[("field", m.id, False)], np.arange(12).reshape(3, 4))


def test_inner_loops_stay_inside_the_task():
    _fields()

    @sd.kernel
    def k():
        for i in x:
            acc = 0.0
            for j in range(i):
                acc += j
            x[i] = acc

    tl = stages(k)["dce_tasks"]
    assert len(tl.tasks) == 1
    inner = [n for n in walk(tl.tasks[0].body) if n.op == Op.RANGE_FOR]
    assert len(inner) == 1 and not inner[0].arg.parallel
    assert len(inner[0].arg.carried) == 1          # `acc` is loop-carried


def test_verifier_rejects_broken_ir():
    b = IRBuilder()
    one = b.const(1, T.i32)
    body = b.finish()
    orphan = IRBuilder().const(2, T.i32)           # defined in another block
    bad_add = IRBuilder()
    bad_add.emit(Op.ADD, T.i32, (one, orphan))
    with pytest.raises(verifier.VerifyError, match="not defined before use"):
        verifier.verify_kernel(KernelIR("k", (), Block(body.nodes + bad_add.finish().nodes)))
    b2 = IRBuilder()
    b2.break_()
    with pytest.raises(verifier.VerifyError, match="break outside a loop"):
        verifier.verify_kernel(KernelIR("k", (), b2.finish()))
    b3 = IRBuilder()
    c = b3.const(1, T.i32)
    b3.emit(Op.IF, None, (c,), None, (Block(), Block()))
    with pytest.raises(verifier.VerifyError, match="condition must be u1"):
        verifier.verify_kernel(KernelIR("k", (), b3.finish()))
    assert issubclass(verifier.VerifyError, RuntimeError)
