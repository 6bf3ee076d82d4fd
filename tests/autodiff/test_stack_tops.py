"""The stack-tops pass (`passes/autodiff/stack_tops.py`): adstack tops and top adjoints
cached in locals.

* On what the adjoint builder emits, every float stack keeps its adjoint in a local (layout kind
  'primal'), no LOAD_TOP_ADJ / ACC_ADJ remains, and the heap is read only to reload a top after
  a POP.
* On hand-written IR where an ACC_ADJ can run before a PUSH of the same stack, that stack keeps
  its heap adjoints, and the rewritten IR computes exactly what the original does (interpreter).
* End to end, gradients with the pass equal those without it (the pass switched off: every float
  stack then uses the heap adjoint halves) on cpu and vulkan, in f64 to 1e-12.
"""
import numpy as np
import pytest

import spirad as sd
from kernel_ir.abi import adstack_allocas, adstack_kind
from kernel_ir.builder import IRBuilder
from kernel_ir.dtypes import f64, i32
from kernel_ir.interpreter import Memory, run_tasks
from kernel_ir.nodes import AdStackArg, Task, walk
from kernel_ir.ops import Op
from kernel_ir.verifier import verify_tasks
from passes.autodiff import pipeline
from passes.autodiff.stack_tops import promote_stack_tops
from tests.autodiff import test_interp_agreement as agree
from tests.llvm_codegen.kit import field, kernel, key
from tests.support.archs import EVERY_ARCH, test_archs


@pytest.fixture(autouse=True)
def _no_offline_cache(monkeypatch):
    """These tests patch a pass: programs compiled without it must not come from the cache."""
    monkeypatch.setenv("SPIRAD_OFFLINE_CACHE", "0")


# -- on reverse-mode output --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["loops", "vector_tasks", "while", "tape"])
def test_reverse_mode_keeps_every_float_adjoint_in_a_local(name, monkeypatch):
    seen = []
    real = pipeline.promote_stack_tops
    monkeypatch.setattr(pipeline, "promote_stack_tops", lambda body: seen.append(real(body))
                        or seen[-1])
    fn, kw = agree.CASES[name]
    sd.init(arch="cpu", default_fp=sd.f64, **kw)
    fn()
    assert seen, "no adjoint task was built"
    n_float = 0
    for body in seen:
        allocas = [n for n in walk(body) if n.op == Op.ADSTACK_ALLOCA]
        for a in allocas:
            assert adstack_kind(a) in ("primal", "int"), a.arg
            n_float += a.dtype.is_float
        ops = [n for n in walk(body) if n.op.name.startswith("ADSTACK")]
        assert not any(n.op in (Op.ADSTACK_LOAD_TOP_ADJ, Op.ADSTACK_ACC_ADJ) for n in ops)
        # the only heap reads left: one reload right after each POP
        pops = sum(n.op == Op.ADSTACK_POP for n in ops)
        assert sum(n.op == Op.ADSTACK_LOAD_TOP for n in ops) <= pops
        for k, n in enumerate(ops):
            if n.op == Op.ADSTACK_LOAD_TOP:
                assert ops[k - 1].op == Op.ADSTACK_POP and ops[k - 1].srcs[0] is n.srcs[0]
    assert n_float > 0


# -- hand-written IR: the fallback keeps heap adjoints where a local would be wrong -------------
OUT = field(0, f64, (6,))


def _stack(b, name):
    return b.emit(Op.ADSTACK_ALLOCA, f64, (), AdStackArg(name))


def _mixed_order_body(b):
    """Stack `late`: pushes, then accumulation (promotable). Stack `early`: an ACC_ADJ inside the
    same loop as its PUSH, so an entry's adjoint must survive the push above it (not
    promotable)."""
    late, early = _stack(b, "late"), _stack(b, "early")
    c = lambda v, dt=f64: b.const(v, dt)  # noqa: E731
    b.emit(Op.ADSTACK_PUSH, None, (early, c(0.0)))
    with b.range_for(c(0, i32), c(4, i32)) as j:
        jf = b.cast(j, f64)
        b.emit(Op.ADSTACK_PUSH, None, (late, b.binary(Op.MUL, jf, c(1.5))))
        b.emit(Op.ADSTACK_ACC_ADJ, None, (early, b.binary(Op.ADD, jf, c(0.25))))
        b.emit(Op.ADSTACK_PUSH, None, (early, b.binary(Op.MUL, jf, jf)))
    acc = b.alloca(f64, "acc")
    with b.range_for(c(0, i32), c(4, i32)) as j:
        jf = b.cast(j, f64)
        b.emit(Op.ADSTACK_ACC_ADJ, None, (late, b.emit(Op.ADSTACK_LOAD_TOP, f64, (late,))))
        b.emit(Op.ADSTACK_ACC_ADJ, None, (late, jf))
        a = b.emit(Op.ADSTACK_LOAD_TOP_ADJ, f64, (late,))
        e = b.emit(Op.ADSTACK_LOAD_TOP_ADJ, f64, (early,))
        t = b.emit(Op.ADSTACK_LOAD_TOP, f64, (early,))
        b.store(acc, b.binary(Op.ADD, b.binary(Op.MUL, b.load(acc), c(0.5)),
                              b.binary(Op.ADD, b.binary(Op.ADD, a, e), t)))
        b.emit(Op.ADSTACK_POP, None, (late,))
        b.emit(Op.ADSTACK_POP, None, (early,))
    b.global_store(OUT, [c(0, i32)], b.load(acc))
    b.global_store(OUT, [c(1, i32)], b.emit(Op.ADSTACK_LOAD_TOP, f64, (late,)))
    b.global_store(OUT, [c(2, i32)], b.emit(Op.ADSTACK_LOAD_TOP_ADJ, f64, (early,)))
    b.global_store(OUT, [c(3, i32)], b.emit(Op.ADSTACK_LOAD_TOP, f64, (early,)))


def _run(tl):
    arrays = {key(OUT): np.zeros(6)}
    run_tasks(tl, Memory(arrays))
    return arrays[key(OUT)]


def test_stack_whose_adjoint_outlives_a_push_keeps_heap_adjoints():
    b = IRBuilder()
    _mixed_order_body(b)
    body = b.finish()
    tl = kernel("mixed", Task("serial", body, name="mixed"))
    new = promote_stack_tops(body)
    tl2 = kernel("mixed", Task("serial", new, name="mixed"))
    verify_tasks(tl2)
    kinds = {a.arg.name: adstack_kind(a) for a in adstack_allocas(tl2.tasks[0])}
    assert kinds == {"late": "primal", "early": "float"}
    left = {n.op for n in walk(new) if n.op in (Op.ADSTACK_ACC_ADJ, Op.ADSTACK_LOAD_TOP_ADJ)
            and n.srcs[0].arg.name == "late"}
    assert not left  # the promoted stack's adjoint ops are all rewritten
    want = _run(tl)
    assert want[2] != 0.0  # early's bottom entry really carries an adjoint past the pushes
    np.testing.assert_array_equal(_run(tl2), want)


def test_acc_adj_before_the_first_push_keeps_heap_adjoints():
    b = IRBuilder()
    s = _stack(b, "s")
    b.emit(Op.ADSTACK_PUSH, None, (s, b.const(1.0, f64)))
    b.emit(Op.ADSTACK_ACC_ADJ, None, (s, b.const(2.0, f64)))
    b.emit(Op.ADSTACK_PUSH, None, (s, b.const(3.0, f64)))
    b.emit(Op.ADSTACK_POP, None, (s,))
    b.global_store(OUT, [b.const(0, i32)], b.emit(Op.ADSTACK_LOAD_TOP_ADJ, f64, (s,)))
    body = b.finish()
    new = promote_stack_tops(body)
    assert adstack_kind(adstack_allocas(Task("serial", new))[0]) == "float"
    tl, tl2 = (kernel("k", Task("serial", x, name="k")) for x in (body, new))
    np.testing.assert_array_equal(_run(tl2), _run(tl))
    assert _run(tl)[0] == 2.0


# -- end to end: the pass changes no gradient ---------------------------------------------------
@pytest.mark.parametrize("name", ["loops", "vector_tasks", "tape"])
@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_gradients_equal_with_heap_adjoints(arch, name, monkeypatch):
    fn, kw = agree.CASES[name]
    sd.init(arch=arch, debug=True, default_fp=sd.f64, **kw)
    with_pass = fn()
    monkeypatch.setattr(pipeline, "promote_stack_tops", lambda body: body)
    sd.init(arch=arch, debug=True, default_fp=sd.f64, **kw)
    without = fn()
    for k, (a, b) in enumerate(zip(with_pass, without)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14, err_msg=f"{name}: output {k}")
    assert any(np.any(w != 0) for w in without[1:])


def test_heap_adjoints_without_the_pass_are_float_kind(monkeypatch):
    """The comparison above really runs the heap-adjoint path: without the pass every float
    stack is of kind 'float' (primal and adjoint halves)."""
    monkeypatch.setattr(pipeline, "promote_stack_tops", lambda body: body)
    sd.init(arch="cpu", default_fp=sd.f64)
    x = sd.ndarray(sd.f64, 7, needs_grad=True)
    y = sd.ndarray(sd.f64, 7, needs_grad=True)
    steps = sd.ndarray(sd.i32, 7)
    g = agree.k_loops.compile_adjoint((x, y, steps, 5))
    kinds = {adstack_kind(a) for t in g.tl.tasks for a in adstack_allocas(t)}
    assert "float" in kinds and "primal" not in kinds
