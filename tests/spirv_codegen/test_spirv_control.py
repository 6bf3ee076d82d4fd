"""Control flow, locals, atomics, dispatch geometry and lavapipe's loop cap, on Vulkan vs the
interpreter (every module is validated first)."""
from __future__ import annotations

import numpy as np
import pytest

import spv_harness as H
from spv_kit import (ArgSpec, IRBuilder, Op, Task, TaskList, f32, f64, i32, i64, index_node, nd,
                     range_task, u1, u32)
from kernel_ir.abi import STATUS_LOOP_CAP, kernel_abi
from spirv_codegen import SpirvCaps, compile_tasks, dispatch_geometry, disassemble, validate

driver = [pytest.mark.vulkan_driver, pytest.mark.xdist_group("spirv_vulkan")]


def c(b, v, dt=i32):
    return b.const(v, dt)


# -- kernels -------------------------------------------------------------------------------
def loop_break_continue(n=200):
    """out[i] = sum of j in [0, x[i]) skipping j % 3 == 0, stopping once the sum exceeds 50."""
    X, OUT = nd(0, i32, name="x"), nd(1, i32, name="out")
    b = IRBuilder()
    i = index_node()
    acc = b.alloca(i32, "acc")
    lim = b.global_load(X, [i])
    with b.range_for(c(b, 0), lim, carried=(acc,)) as j:
        with b.if_(b.binary(Op.CMP_EQ, b.binary(Op.MOD, j, c(b, 3)), c(b, 0))) as (then, _):
            with then:
                b.continue_()
        s = b.binary(Op.ADD, b.load(acc), j)
        b.store(acc, s)
        with b.if_(b.binary(Op.CMP_GT, s, c(b, 50))) as (then, _):
            with then:
                b.break_()
    b.global_store(OUT, [i], b.load(acc))
    tl = TaskList("loop_bc", (ArgSpec("x", "ndarray", i32, 1), ArgSpec("out", "ndarray", i32, 1)),
                  (range_task(b.finish(), i, n_ref_arg=0, name="loop_bc"),))
    x = np.random.RandomState(0).randint(0, 40, n).astype(np.int32)
    return tl, {("ndarray", 0, False): x, ("ndarray", 1, False): np.zeros(n, np.int32)}, [None, None]


def while_collatz(n=300):
    """out[i] = number of Collatz steps from i + 1 (WHILE + BREAK, IF/ELSE, locals)."""
    OUT = nd(0, i32, name="out")
    b = IRBuilder()
    i = index_node()
    v, steps = b.alloca(i32, "v"), b.alloca(i32, "steps")
    b.store(v, b.binary(Op.ADD, i, c(b, 1)))
    with b.while_(carried=(v, steps)):
        cur = b.load(v)
        with b.if_(b.binary(Op.CMP_LE, cur, c(b, 1))) as (then, _):
            with then:
                b.break_()
        b.store(steps, b.binary(Op.ADD, b.load(steps), c(b, 1)))
        with b.if_(b.binary(Op.CMP_EQ, b.binary(Op.AND, cur, c(b, 1)), c(b, 0))) as (then, other):
            with then:
                b.store(v, b.binary(Op.FLOORDIV, cur, c(b, 2)))
            with other:
                b.store(v, b.binary(Op.ADD, b.binary(Op.MUL, cur, c(b, 3)), c(b, 1)))
    b.global_store(OUT, [i], b.load(steps))
    tl = TaskList("collatz", (ArgSpec("out", "ndarray", i32, 1),),
                  (range_task(b.finish(), i, n_ref_arg=0),))
    return tl, {("ndarray", 0, False): np.zeros(n, np.int32)}, [None]


def nested_alloca(n=64):
    """ALLOCA inside an outer loop re-zeroes each time; 2-D output field; f64 accumulation."""
    OUT = nd(0, f64, ndim=2, name="out")
    b = IRBuilder()
    i = index_node()
    shape1 = b.emit(Op.NDARRAY_SHAPE, i32, (), (0, 1))
    with b.range_for(c(b, 0), shape1) as j:
        t = b.alloca(f64, "t")
        with b.range_for(c(b, 0), b.binary(Op.ADD, j, c(b, 1))) as k:
            kf = b.cast(b.binary(Op.ADD, k, i), f64)
            b.store(t, b.binary(Op.ADD, b.load(t), b.unary(Op.SQRT, kf)))
        b.global_store(OUT, [i, j], b.load(t))
    tl = TaskList("nested", (ArgSpec("out", "ndarray", f64, 2),),
                  (range_task(b.finish(), i, n_ref_arg=0),))
    return tl, {("ndarray", 0, False): np.zeros((n, 7), np.float64)}, [None]


def top_level_continue(n=130):
    """CONTINUE outside any loop ends the parallel iteration."""
    OUT = nd(0, u1, name="out")
    b = IRBuilder()
    i = index_node()
    with b.if_(b.binary(Op.CMP_EQ, b.binary(Op.MOD, i, c(b, 3)), c(b, 0))) as (then, _):
        with then:
            b.continue_()
    b.global_store(OUT, [i], b.const(True, u1))
    tl = TaskList("tlc", (ArgSpec("out", "ndarray", u1, 1),), (range_task(b.finish(), i, 0),))
    return tl, {("ndarray", 0, False): np.zeros(n, np.bool_)}, [None]


def serial_sum(n=50):
    """A serial task summing x (scalar args: scale f32, offset i64) into out[0]."""
    X, OUT = nd(0, f32, name="x"), nd(1, f64, name="out")
    b = IRBuilder()
    acc = b.alloca(f64, "acc")
    with b.range_for(c(b, 0), b.emit(Op.NDARRAY_SHAPE, i32, (), (0, 0))) as j:
        v = b.binary(Op.MUL, b.global_load(X, [j]), b.arg(2, f32))
        b.store(acc, b.binary(Op.ADD, b.load(acc), b.cast(v, f64)))
    b.store(acc, b.binary(Op.ADD, b.load(acc), b.cast(b.arg(3, i64), f64)))
    b.global_store(OUT, [c(b, 0)], b.load(acc))
    args = (ArgSpec("x", "ndarray", f32, 1), ArgSpec("out", "ndarray", f64, 1),
            ArgSpec("scale", "scalar", f32), ArgSpec("offset", "scalar", i64))
    tl = TaskList("serial", args, (Task("serial", b.finish(), name="serial"),))
    x = np.arange(n, dtype=np.float32) * 0.25
    return tl, {("ndarray", 0, False): x, ("ndarray", 1, False): np.zeros(1)}, \
        [None, None, 1.5, -(2 ** 40)]


def atomic_kernel(dt, n=1000):
    """acc[0] += x[i] atomically; out[i] = the old value >= 0 ? 1 : 0 (orders vary)."""
    X, ACC = nd(0, dt, name="x"), nd(1, dt, name="acc")
    b = IRBuilder()
    i = index_node()
    old = b.atomic_add(ACC, [c(b, 0)], b.global_load(X, [i]))
    b.atomic_add(ACC, [c(b, 1)], b.binary(Op.SUB, old, old))  # uses the returned value
    tl = TaskList(f"atomic_{dt}", (ArgSpec("x", "ndarray", dt, 1), ArgSpec("acc", "ndarray", dt, 1)),
                  (range_task(b.finish(), i, 0),))
    x = (np.arange(n) % 7 + 1).astype(dt.np)
    return tl, {("ndarray", 0, False): x, ("ndarray", 1, False): np.zeros(2, dt.np)}, [None, None]


def long_loop(trips, tasks=1, n=4, kind="range"):
    """out[i] = number of iterations run of a loop with `trips` trips (RANGE_FOR or WHILE)."""
    OUT = nd(0, i32, name="out")
    tl_tasks = []
    for _ in range(tasks):
        b = IRBuilder()
        i = index_node()
        cnt = b.alloca(i32, "cnt")
        if kind == "range":
            with b.range_for(c(b, 0), b.arg(1, i32), carried=(cnt,)):
                b.store(cnt, b.binary(Op.ADD, b.load(cnt), c(b, 1)))
        elif kind == "while":
            with b.while_(carried=(cnt,)):
                with b.if_(b.binary(Op.CMP_GE, b.load(cnt), b.arg(1, i32))) as (then, _):
                    with then:
                        b.break_()
                b.store(cnt, b.binary(Op.ADD, b.load(cnt), c(b, 1)))
        elif kind == "sequential":  # two loops of trips // 2 each
            for _ in range(2):
                with b.range_for(c(b, 0), b.binary(Op.FLOORDIV, b.arg(1, i32), c(b, 2))):
                    b.store(cnt, b.binary(Op.ADD, b.load(cnt), c(b, 1)))
        else:  # nested: trips = outer * 300
            with b.range_for(c(b, 0), b.binary(Op.FLOORDIV, b.arg(1, i32), c(b, 300))):
                with b.range_for(c(b, 0), c(b, 300)):
                    b.store(cnt, b.binary(Op.ADD, b.load(cnt), c(b, 1)))
        b.global_store(OUT, [i], b.load(cnt))
        tl_tasks.append(range_task(b.finish(), i, 0))
    tl = TaskList("long", (ArgSpec("out", "ndarray", i32, 1), ArgSpec("trips", "scalar", i32)),
                  tuple(tl_tasks))
    return tl, {("ndarray", 0, False): np.zeros(n, np.int32)}, [None, trips]


def nested_counted(outer, inner, per_iteration, n=4):
    """out[i] = inner trips run by `outer` x `inner` nested loops. With `per_iteration` the inner
    loop holds a BREAK that never runs, so its visits are counted per iteration; without, it is
    counted in bulk at entry (`count_loop_in_bulk`). Both must stop at the same point."""
    OUT = nd(0, i32, name="out")
    b = IRBuilder()
    i = index_node()
    cnt = b.alloca(i32, "cnt")
    with b.range_for(c(b, 0), b.arg(1, i32)):
        with b.range_for(c(b, 0), b.arg(2, i32)):
            if per_iteration:
                with b.if_(b.binary(Op.CMP_LT, b.load(cnt), c(b, 0))) as (then, _):
                    with then:
                        b.break_()
            b.store(cnt, b.binary(Op.ADD, b.load(cnt), c(b, 1)))
    b.global_store(OUT, [i], b.load(cnt))
    tl = TaskList("nested_counted", (ArgSpec("out", "ndarray", i32, 1),
                                     ArgSpec("outer", "scalar", i32),
                                     ArgSpec("inner", "scalar", i32)),
                  (range_task(b.finish(), i, 0),))
    return tl, {("ndarray", 0, False): np.zeros(n, np.int32)}, [None, outer, inner]


KERNELS = {"loop_break_continue": loop_break_continue, "while_collatz": while_collatz,
           "nested_alloca": nested_alloca, "top_level_continue": top_level_continue,
           "serial_sum": serial_sum}


# -- CPU-only checks -----------------------------------------------------------------------
@pytest.mark.parametrize("cap", [None, 65535])
@pytest.mark.parametrize("name", list(KERNELS) + ["atomics", "long"])
def test_validates(name, cap):
    caps = [SpirvCaps(True, True, True, True, True, cap), SpirvCaps(True, True, True, False, False, cap)]
    if name == "atomics":
        tls = [atomic_kernel(dt)[0] for dt in (i32, u32, i64, f32, f64)]
    elif name == "long":
        tls = [long_loop(10, kind=k)[0] for k in ("range", "while", "nested", "sequential")]
    else:
        tls = [KERNELS[name]()[0]]
    for tl in tls:
        for cp in caps:
            for t in compile_tasks(tl, kernel_abi(tl), cp):
                validate(t.words)


def test_adstack_alloca_compiles():
    """Adstack ops are lowered now (test_spirv_adstack.py); a lone ALLOCA adds the 3 buffers."""
    from kernel_ir.nodes import AdStackArg
    b = IRBuilder()
    b.emit(Op.ADSTACK_ALLOCA, f32, (), AdStackArg("s"))
    tl = TaskList("ad", (), (Task("serial", b.finish()),))
    (t,) = compile_tasks(tl, kernel_abi(tl), SpirvCaps())
    validate(t.words)
    assert t.num_bindings == 2 + 0 + 3 and t.adstacks == (f32,)


def test_f64_cas_needs_int64_atomics():
    tl = atomic_kernel(f64)[0]
    with pytest.raises(RuntimeError, match="Int64Atomics"):
        compile_tasks(tl, kernel_abi(tl), SpirvCaps(True, True, False, True, False))


@pytest.mark.parametrize("n,maxg,want", [
    (0, (65535,) * 3, ((0, 1, 1), 0)),
    (1, (65535,) * 3, ((1, 1, 1), 64)),
    (64 * 65535 + 1, (65535,) * 3, ((65535, 2, 1), 64 * 65535)),
    (1000, (4, 3, 100), ((4, 3, 2), 256)),
])
def test_dispatch_geometry(n, maxg, want):
    assert dispatch_geometry(n, maxg) == want
    (gx, gy, gz), tpr = want
    assert gx * gy * gz * 64 >= n


# -- on the driver -------------------------------------------------------------------------
@pytest.mark.parametrize("cap", [None, 65535])
@pytest.mark.parametrize("name", list(KERNELS))
def test_kernel_on_vulkan(vk, name, cap):
    tl, arrays, scalars = KERNELS[name]()
    want = H.run_reference(tl, arrays, scalars)
    got = H.run_vulkan(vk, tl, arrays, scalars, H.device_caps(vk, loop_iteration_cap=cap))
    assert got.status[0] == 0
    H.assert_close(got.arrays, want, f64_rtol=1e-15, f64_atol=0)


def test_3d_dispatch_geometry_on_vulkan(vk):
    tl, arrays, scalars = top_level_continue(n=3000)
    want = H.run_reference(tl, arrays, scalars)
    got = H.run_vulkan(vk, tl, arrays, scalars, max_groups=(4, 3, 100))
    H.assert_close(got.arrays, want)


@pytest.mark.parametrize("cas", [False, True], ids=["native", "cas"])
@pytest.mark.parametrize("dt", [i32, u32, i64, f32, f64], ids=str)
def test_atomic_add_on_vulkan(vk, request, dt, cas):
    caps = H.device_caps(vk)
    if dt.kind == "f":
        caps = H.device_caps(vk, has_atomic_float32_add=caps.has_atomic_float32_add and not cas,
                             has_atomic_float64_add=caps.has_atomic_float64_add and not cas)
        native = caps.has_atomic_float32_add if dt == f32 else caps.has_atomic_float64_add
        if not cas and not native:
            pytest.skip(f"device has no native {dt} atomic add")
    elif cas:
        pytest.skip("ints have no CAS path")
    if dt.bits == 64 and not caps.has_int64_atomics and (dt.kind != "f" or cas):
        vk, caps64 = request.getfixturevalue("vk_int64_atomics")
        caps = H.device_caps(vk, **{**caps.__dict__, "has_int64_atomics": True})
    tl, arrays, scalars = atomic_kernel(dt)
    want = H.run_reference(tl, arrays, scalars)
    got = H.run_vulkan(vk, tl, arrays, scalars, caps)
    H.assert_close(got.arrays, want)


@pytest.mark.parametrize("kind", ["range", "while", "nested", "sequential"])
def test_loop_cap_sets_status(vk, kind):
    """Needing more than the cap sets STATUS_LOOP_CAP + the task index; never a silent result."""
    caps = H.device_caps(vk, loop_iteration_cap=65535)
    tl, arrays, scalars = long_loop(90000, tasks=2, kind=kind)
    got = H.run_vulkan(vk, tl, arrays, scalars, caps)
    assert got.status[0] == STATUS_LOOP_CAP
    assert got.status[1] == 0  # the first task
    # just under the cap runs to completion with status OK
    tl, arrays, scalars = long_loop(60000, kind=kind)
    got = H.run_vulkan(vk, tl, arrays, scalars, caps)
    assert got.status[0] == 0
    np.testing.assert_array_equal(got.arrays[("ndarray", 0, False)], 60000)


def test_loop_cap_exact_boundary(vk):
    """65,535 iterations = 65,534 back-edges still run; 65,536 would need the 65,535th."""
    caps = H.device_caps(vk, loop_iteration_cap=65535)
    for trips, status in ((65535, 0), (65536, STATUS_LOOP_CAP)):
        tl, arrays, scalars = long_loop(trips)
        got = H.run_vulkan(vk, tl, arrays, scalars, caps)
        assert got.status[0] == status, trips
        if status == 0:
            np.testing.assert_array_equal(got.arrays[("ndarray", 0, False)], trips)


def test_bulk_counted_loops_have_no_loop_cap_code_inside():
    """An innermost loop without BREAK is counted at entry (`count_loop_in_bulk`): nothing in
    its body touches the visit counter; a loop with a BREAK still counts per iteration."""
    caps = SpirvCaps(True, True, True, True, True, 65535)
    for kind, counted_inside in (("range", False), ("while", True)):
        tl = long_loop(10, kind=kind)[0]
        text = disassemble(compile_tasks(tl, kernel_abi(tl), caps)[0].words)
        body = text[text.index("OpLoopMerge"):]
        assert ("%loop_visits" in body) == counted_inside, kind


@pytest.mark.parametrize("outer,inner", [(216, 300), (217, 300), (218, 300), (1, 65533),
                                         (1, 65534), (1, 65535), (3, 21843), (3, 21844),
                                         (0, 70000), (70000, 0), (2, 1), (32767, 1)])
def test_bulk_counting_matches_per_iteration(vk, outer, inner):
    caps = H.device_caps(vk, loop_iteration_cap=65535)
    results = []
    for per_iteration in (False, True):
        tl, arrays, scalars = nested_counted(outer, inner, per_iteration)
        got = H.run_vulkan(vk, tl, arrays, scalars, caps)
        results.append(int(got.status[0]))
        if got.status[0] == 0:
            np.testing.assert_array_equal(got.arrays[("ndarray", 0, False)], outer * inner)
    assert results[0] == results[1], results
    assert results[0] in (0, STATUS_LOOP_CAP)


def test_lavapipe_truncates_without_counter(vk):
    """Why the counter exists: on lavapipe an uncounted 90,000-trip loop silently stops early."""
    if not getattr(vk.caps, "is_lavapipe", False):
        pytest.skip("lavapipe only")
    tl, arrays, scalars = long_loop(90000)
    got = H.run_vulkan(vk, tl, arrays, scalars, H.device_caps(vk, loop_iteration_cap=None))
    assert got.status[0] == 0
    assert (got.arrays[("ndarray", 0, False)] < 90000).all()


for _name in list(globals()):
    if _name.startswith("test_") and "vulkan" in _name or _name in (
            "test_loop_cap_sets_status", "test_loop_cap_exact_boundary",
            "test_bulk_counting_matches_per_iteration",
            "test_lavapipe_truncates_without_counter"):
        for _m in driver:
            globals()[_name] = _m(globals()[_name])
