"""SPMD lowering (llvm_codegen.spmd): the same kernels through the lane path and the scalar
path (SPIRAD_CPU_SPMD=1 / 0) give identical bits where no math function is involved, and both
equal the reference interpreter; tasks the lane path cannot take fall back to scalar and say why.
"""
from __future__ import annotations

import numpy as np
import pytest

from kernel_ir.dtypes import f32, f64, i32, i64, u1
from kernel_ir.ops import Op
from llvm_codegen import spmd
from tests.llvm_codegen.harness import (compile_and_load, default_widths, lane_widths,
                                       run_interp, run_llvm)
from tests.llvm_codegen.kit import field, kernel, range_task
from tests.support.random_kernels import generate

N = 1000 + 7  # full chunks of lanes and a masked tail
# lanes of a task with 32-bit varying values, with a 64-bit one: the target's defaults
# (codegen.default_lanes: two registers per 32-bit value) or SPIRAD_CPU_SPMD_LANES
W, W64 = lane_widths()


def _both(monkeypatch, tl, arrays, scalars=()):
    """(lanes per task, SPMD result, scalar result, interpreter result)."""
    monkeypatch.setenv("SPIRAD_CPU_SPMD", "1")
    loaded = compile_and_load(tl)
    lanes = [t.lanes for t in loaded[1].tasks]
    vec = run_llvm(tl, arrays, scalars, loaded=loaded)
    monkeypatch.setenv("SPIRAD_CPU_SPMD", "0")
    scal = run_llvm(tl, arrays, scalars)
    return lanes, vec, scal, run_interp(tl, arrays, scalars)


def _same_bits(a, b):
    return np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                          np.ascontiguousarray(b).view(np.uint8))


def _assert_all_equal(vec, scal, interp):
    for k in interp:
        assert _same_bits(vec[k], scal[k]), k
        np.testing.assert_array_equal(vec[k], interp[k], err_msg=str(k))


def _arrays(*refs, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for r in refs:
        n = int(np.prod(r.shape))
        if r.dtype.is_float:
            a = rng.uniform(-4, 4, n)
        elif r.dtype.is_bool:
            a = rng.integers(0, 2, n)
        else:
            a = rng.integers(-1000, 1000, n)
        out[(r.kind, r.key, r.grad)] = a.astype(r.dtype.np).reshape(r.shape)
    return out


@pytest.mark.parametrize("width", [None, "32"], ids=["host", "32"])
def test_uniform_loop_locals_and_tail(monkeypatch, width):
    """v = x[i]; for s in range(k): v = v * a + b (a scalar argument count): kernel a; also
    with SPIRAD_CPU_SPMD_LANES=32 (two registers per value)."""
    if width:
        monkeypatch.setenv("SPIRAD_CPU_SPMD_LANES", width)
    X, Y, K = field(0, f32, (N,)), field(1, f32, (N,)), field(2, i32, ())

    def body(b, i):
        v = b.alloca(f32, "v")
        b.store(v, b.global_load(X, [i]))
        with b.range_for(b.const(0, i32), b.global_load(K, [])):
            b.store(v, b.emit(Op.ADD, f32, (b.emit(Op.MUL, f32, (b.load(v), b.const(0.95, f32))),
                                             b.const(0.01, f32))))
        b.global_store(Y, [i], b.load(v))

    tl = kernel("ka", range_task(body, 0, N))
    arrays = _arrays(X, Y)
    arrays[("field", 2, False)] = np.array(37, np.int32)
    lanes, vec, scal, ref = _both(monkeypatch, tl, arrays)
    assert lanes == [int(width or W)]
    _assert_all_equal(vec, scal, ref)


@pytest.mark.parametrize("dt", [f32, f64, i32, i64, u1], ids=str)
def test_elementwise_dtypes_casts_select(monkeypatch, dt):
    A, B, OUT = field(0, dt, (N,)), field(1, dt, (N,)), field(2, dt, (N,))
    C = field(3, i32, (N,))

    def body(b, i):
        a, c = b.global_load(A, [i]), b.global_load(B, [i])
        lt = b.emit(Op.CMP_LT, u1, (a, c))
        if dt.is_float:
            v = b.emit(Op.SELECT, dt, (lt, b.emit(Op.SUB, dt, (a, c)), b.emit(Op.MUL, dt, (a, c))))
            b.global_store(C, [i], b.emit(Op.CAST, i32, (b.emit(Op.FLOOR, dt, (v,)),)))
        elif dt.is_bool:
            v = b.emit(Op.XOR, dt, (a, c))
            b.global_store(C, [i], b.emit(Op.CAST, i32, (lt,)))
        else:
            v = b.emit(Op.SELECT, dt, (lt, b.emit(Op.FLOORDIV, dt, (a, c)), b.emit(Op.MOD, dt, (a, c))))
            b.global_store(C, [i], b.emit(Op.CAST, i32, (b.emit(Op.SHR, dt, (v, b.const(3, dt))),)))
        b.global_store(OUT, [i], v)

    tl = kernel(f"k_{dt}", range_task(body, 0, N))
    lanes, vec, scal, ref = _both(monkeypatch, tl, _arrays(A, B, OUT, C, seed=3))
    assert lanes == [W64 if dt.bits == 64 else W]
    _assert_all_equal(vec, scal, ref)


def test_gather_scatter_2d_and_uniform_if(monkeypatch):
    """Non-consecutive reads (a 2-D field through i // 7, i % 7, a reversed index) and writes go
    lane by lane; an IF on a uniform value stays a branch."""
    R = N // 7 + 1
    X = field(0, f32, (R, 7))
    Y, Z, F = field(1, f32, (N,)), field(2, f32, (N,)), field(3, i32, ())

    def body(b, i):
        r, c = b.emit(Op.FLOORDIV, i32, (i, b.const(7, i32))), b.emit(Op.MOD, i32, (i, b.const(7, i32)))
        v = b.alloca(f32, "v")
        b.store(v, b.global_load(X, [r, c]))
        with b.if_(b.emit(Op.CMP_GT, u1, (b.global_load(F, []), b.const(0, i32)))) as (t, e):
            with t:
                b.store(v, b.emit(Op.ADD, f32, (b.load(v), b.const(1.5, f32))))
        rev = b.emit(Op.SUB, i32, (b.const(N - 1, i32), i))
        b.global_store(Y, [rev], b.load(v))             # scatter
        b.global_store(Z, [b.emit(Op.ADD, i32, (i, b.const(0, i32)))], b.load(v))  # consecutive

    tl = kernel("kg", range_task(body, 0, N))
    arrays = _arrays(X, Y, Z)
    arrays[("field", 3, False)] = np.array(1, np.int32)
    lanes, vec, scal, ref = _both(monkeypatch, tl, arrays)
    assert lanes == [W]
    _assert_all_equal(vec, scal, ref)


def test_math_within_tolerance(monkeypatch):
    """With math the lane path calls vecmath: close to the scalar path, not bit-equal."""
    X, Y = field(0, f32, (N,)), field(1, f32, (N,))

    def body(b, i):
        x = b.global_load(X, [i])
        b.global_store(Y, [i], b.emit(Op.ADD, f32, (b.emit(Op.SIN, f32, (x,)),
                                                     b.emit(Op.ATAN2, f32, (x, b.const(0.5, f32))))))

    tl = kernel("km", range_task(body, 0, N))
    lanes, vec, scal, ref = _both(monkeypatch, tl, _arrays(X, Y))
    assert lanes == [W]
    k = ("field", 1, False)
    np.testing.assert_allclose(vec[k], ref[k], rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(scal[k], ref[k], rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("flag", ["1", "auto"])
def test_f64_pow_on_lanes(monkeypatch, flag):
    """f64 pow on lanes calls vecmath's vector body (powd.py); with SPIRAD_CPU_VECMATH=1 the
    scalar path inlines the scalar body of the same IR, so both paths give identical bits; both
    within vecmath's bound of numpy longdouble (auto: the scalar path is glibc's pow)."""
    from vecmath_kit import ulp_error
    from llvm_codegen import vecmath
    monkeypatch.setenv("SPIRAD_CPU_VECMATH", flag)
    X, P, Y = field(0, f64, (N,)), field(1, f64, (N,)), field(2, f64, (N,))

    def body(b, i):
        b.global_store(Y, [i], b.emit(Op.POW, f64, (b.global_load(X, [i]), b.global_load(P, [i]))))

    tl = kernel(f"kpow64_{flag}", range_task(body, 0, N))
    rng = np.random.default_rng(4)
    x = 10.0 ** rng.uniform(-300, 300, N) * rng.choice([-1.0, 1.0], N)
    y = np.where(rng.random(N) < 0.3, np.round(rng.uniform(-9, 9, N)),
                 rng.uniform(-700, 700, N) / np.log(np.abs(x)))
    x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, -2.0]
    y[:8] = [-1.0, -3.0, -0.5, 3.0, 0.0, np.nan, np.inf, 0.5]
    arrays = {("field", 0, False): x, ("field", 1, False): y, ("field", 2, False): np.zeros(N)}
    lanes, vec, scal, _ = _both(monkeypatch, tl, arrays)
    assert lanes == [W64]
    k = ("field", 2, False)
    if flag == "1":
        assert _same_bits(vec[k], scal[k])
    with np.errstate(all="ignore"):
        ref = np.power(x.astype(np.longdouble), y.astype(np.longdouble))
    assert ulp_error(vec[k], ref, np.float64).max() <= vecmath.BOUND_ULP["f64"]["pow"]
    assert ulp_error(scal[k], ref, np.float64).max() <= 1.0


def test_fallback_says_why(monkeypatch, capfd):
    """y[i] = y[i + 1] keeps the scalar path and says why (varying IFs and integer POW now take
    lanes: test_llvm_spmd_masks.py)."""
    Y = field(0, f32, (N + 1,))
    tl = kernel("kf", range_task(lambda b, i: b.global_store(
        Y, [i], b.global_load(Y, [b.emit(Op.ADD, i32, (i, b.const(1, i32)))])), 0, N))
    monkeypatch.setenv("SPIRAD_DEBUG_CPU", "1")
    lanes, vec, scal, ref = _both(monkeypatch, tl, _arrays(Y))
    assert lanes == [1]
    _assert_all_equal(vec, scal, ref)
    err = capfd.readouterr().err
    assert "spirad_kf_0_t: scalar (global ('field', 0, False) written and accessed at other " \
           "indices in the same task)" in err


def test_debug_output_names_the_lanes(monkeypatch, capfd):
    X, Y = field(0, f32, (N,)), field(1, f32, (N,))
    tl = kernel("kd", range_task(lambda b, i: b.global_store(Y, [i], b.global_load(X, [i])), 0, N))
    monkeypatch.setenv("SPIRAD_DEBUG_CPU", "1")
    monkeypatch.setenv("SPIRAD_CPU_SPMD", "1")
    compile_and_load(tl)
    assert f"spirad_kd_0_t: SPMD, {W} lanes" in capfd.readouterr().err


def test_read_write_hazard_falls_back(monkeypatch):
    """y[i] = y[i + 1] would depend on lane order: scalar path."""
    Y = field(0, f32, (N + 1,))
    tl = kernel("kh", range_task(lambda b, i: b.global_store(
        Y, [i], b.global_load(Y, [b.emit(Op.ADD, i32, (i, b.const(1, i32)))])), 0, N))
    lanes, vec, scal, ref = _both(monkeypatch, tl, _arrays(Y))
    assert lanes == [1]
    _assert_all_equal(vec, scal, ref)


@pytest.mark.parametrize("dt", [f32, f64, i32, u1], ids=str)
def test_atomics_own_uniform_and_scattered(monkeypatch, dt):
    """ATOMIC_ADD on lanes: at the task index (each element one iteration's: a masked vector
    read-add-write), returning the old value; at one uniform target and at i % 7 (per lane,
    integer counts so the order between workers cannot change the bits)."""
    A, OWN, OLD = field(0, dt, (N,)), field(1, dt, (N,)), field(2, dt, (N,))
    CNT, HIST = field(3, i32, ()), field(4, i32, (7,))

    def body(b, i):
        a = b.global_load(A, [i])
        b.global_store(OLD, [i], b.atomic_add(OWN, [i], a))
        b.atomic_add(OWN, [i], a)                     # twice at the same element: in order
        b.atomic_add(CNT, [], b.const(1, i32))
        b.atomic_add(HIST, [b.emit(Op.MOD, i32, (i, b.const(7, i32)))], b.const(2, i32))

    tl = kernel(f"kat_{dt}", range_task(body, 0, N))
    arrays = _arrays(A, OWN, OLD, HIST, seed=5)
    arrays[("field", 3, False)] = np.array(3, np.int32)
    lanes, vec, scal, ref = _both(monkeypatch, tl, arrays)
    assert lanes == [W64 if dt.bits == 64 else W]
    _assert_all_equal(vec, scal, ref)
    assert int(vec[("field", 3, False)]) == 3 + N


def _lane_seeds(limit=24):
    """Seeds of the random corpus with a task that qualifies for lanes (analysis only)."""
    out = []
    for seed in range(300):
        if any(spmd.analyze(t).ok for t in generate(seed).tl.tasks):
            out.append(seed)
    return out[:limit]


LANE_SEEDS = _lane_seeds()


def test_the_corpus_exercises_lanes():
    assert len(LANE_SEEDS) == 24


@pytest.mark.parametrize("seed", LANE_SEEDS)
def test_random_kernels_both_paths(monkeypatch, seed):
    """Random kernels whose tasks qualify: bit-equal to the scalar path unless a math function
    is involved (then within the corpus tolerance)."""
    check_both_paths(monkeypatch, seed)


def check_both_paths(monkeypatch, seed):
    """Corpus kernel `seed` on lanes against the scalar path (also test_llvm_spmd_masks)."""
    case = generate(seed)
    monkeypatch.setenv("SPIRAD_CPU_SPMD", "1")
    loaded = compile_and_load(case.tl)
    assert max(t.lanes for t in loaded[1].tasks) in (W, W64)
    vec = run_llvm(case.tl, case.arrays, case.scalars, loaded=loaded)
    monkeypatch.setenv("SPIRAD_CPU_SPMD", "0")
    scal = run_llvm(case.tl, case.arrays, case.scalars)
    for k in scal:
        if case.exact:
            assert _same_bits(vec[k], scal[k]), (seed, k)
        else:
            w = scal[k]
            from kernel_ir.dtypes import from_numpy
            rtol, atol = case.tolerance(from_numpy(w.dtype)) if w.dtype.kind == "f" else (0, 0)
            np.testing.assert_allclose(vec[k], w, rtol=rtol, atol=atol, err_msg=f"seed {seed}")


@pytest.mark.parametrize("dt,wide", [(f32, 0), (i32, 0), (f64, 1), (i64, 1)], ids=str)
def test_default_lanes_two_registers_per_value(monkeypatch, dt, wide):
    """The default lane count is two vector registers per varying value: 2x the target's f32
    width for 32-bit values, the f32 width where a varying value is 64-bit;
    SPIRAD_CPU_SPMD_LANES overrides it."""
    want = default_widths()[wide]
    X, Y = field(0, dt, (N,)), field(1, dt, (N,))
    tl = kernel(f"kw_{dt}", range_task(lambda b, i: b.global_store(Y, [i], b.global_load(X, [i])),
                                       0, N))
    monkeypatch.setenv("SPIRAD_CPU_SPMD", "1")
    monkeypatch.delenv("SPIRAD_CPU_SPMD_LANES", raising=False)
    assert [t.lanes for t in compile_and_load(tl)[1].tasks] == [want]
    monkeypatch.setenv("SPIRAD_CPU_SPMD_LANES", "8")
    assert [t.lanes for t in compile_and_load(tl)[1].tasks] == [8]


@pytest.mark.parametrize("n", [0, 1, W - 1, W, W + 1, 3 * W + 5])
def test_loop_free_task_whole_groups_unmasked(monkeypatch, n):
    """A task without loops (axpy: y[i] = a * x[i] + y[i]) runs whole lane groups with plain
    vector loads / stores and only the tail group masked: bit-equal to the scalar path and the
    interpreter at every size around the lane count."""
    X, Y = field(0, f32, (max(n, 1),)), field(1, f32, (max(n, 1),))

    def body(b, i):
        ax = b.emit(Op.MUL, f32, (b.const(2.5, f32), b.global_load(X, [i])))
        b.global_store(Y, [i], b.emit(Op.ADD, f32, (ax, b.global_load(Y, [i]))))

    tl = kernel(f"kaxpy{n}", range_task(body, 0, n))
    lanes, vec, scal, ref = _both(monkeypatch, tl, _arrays(X, Y, seed=n))
    assert lanes == [W]
    _assert_all_equal(vec, scal, ref)
    monkeypatch.setenv("SPIRAD_CPU_SPMD", "1")
    opt = compile_and_load(tl)[2].optimized_ir
    # the tail's call and its declaration; where the target has no masked store (SSE, NEON)
    # LLVM expands the call into per-lane stores
    from llvm_codegen.cpu_target import isa
    from spirad.options import cpu_target
    masked_stores = isa(cpu_target()).name in ("AVX", "AVX2", "AVX-512")
    assert opt.count("@llvm.masked.store") in ((2,) if masked_stores else (1, 2))
    assert f"store <{W} x float>" in opt  # the whole groups'


@pytest.mark.parametrize("dt", [f32, f64, i32, u1], ids=str)
def test_one_target_atomics_reduced_in_registers(monkeypatch, dt):
    """`loss[None] += f(i)` with the old value unused: the active lanes are reduced in
    registers, then one atomic (floats: a CAS of the ordered reduction, the scalar path's
    additions in its order), also under a varying IF (a partial mask)."""
    A, LOSS, HALF = field(0, dt, (N,)), field(1, dt, ()), field(2, dt, ())

    def body(b, i):
        a = b.global_load(A, [i])
        v = a if dt.is_bool else b.emit(Op.MUL, dt, (a, a))
        b.atomic_add(LOSS, [], v)
        odd = b.emit(Op.CMP_EQ, u1, (b.emit(Op.MOD, i32, (i, b.const(3, i32))), b.const(1, i32)))
        with b.if_(odd) as (t, e):
            with t:
                b.atomic_add(HALF, [], a)

    tl = kernel(f"kloss_{dt}", range_task(body, 0, N))
    lanes, vec, scal, ref = _both(monkeypatch, tl, _arrays(A, LOSS, HALF, seed=11))
    assert lanes == [W64 if dt.bits == 64 else W]
    _assert_all_equal(vec, scal, ref)
    monkeypatch.setenv("SPIRAD_CPU_SPMD", "1")
    opt = compile_and_load(tl)[2].optimized_ir
    # one per site (per body: whole groups and the tail), not one per lane
    assert opt.count(" atomicrmw ") + opt.count(" cmpxchg ") <= 4


def test_masked_load_select_after_store(monkeypatch):
    """The shape of the store-overwrite adjoint under a varying IF: v = g[i]; g[i] = 0;
    t[None] += v (the old value unused: reduced in registers under the mask). LLVM 22 folds a
    select of a masked load past a store to its address; the lane path freezes masked loads
    (llvm_codegen/freeze.py), so t gets the values read before the zeroing."""
    X, G, T = field(0, f64, (N,)), field(1, f64, (N,)), field(2, f64, ())

    def body(b, i):
        with b.if_(b.emit(Op.CMP_GT, u1, (b.global_load(X, [i]), b.const(0.0, f64)))) as (t, e):
            with t:
                v = b.global_load(G, [i])
                b.global_store(G, [i], b.const(0.0, f64))
                b.atomic_add(T, [], v)

    tl = kernel("kzero", range_task(body, 0, N))
    arrays = _arrays(X, G, T, seed=13)
    lanes, vec, scal, ref = _both(monkeypatch, tl, arrays)
    assert lanes == [W64]
    _assert_all_equal(vec, scal, ref)
    assert vec[("field", 2, False)] != 0.0
