"""The register allocator's smaller budget for huge CPU modules (`llvm_codegen.machine_code`):
it changes the allocation of a module with more live values than registers across hundreds of
blocks, LLVM's default is back for the next module, smaller modules never see it, and a kernel
compiled under it (SPIRAD_CPU_HUGE_IR=1: every module counts as huge) computes what numpy does."""
from __future__ import annotations

import numpy as np
from llvmlite import ir

import spirad as sd
from llvm_codegen import machine_code
from llvm_codegen.cpu_runtime import CpuRuntime
from tests.support.archs import test_archs

F32, I64, PTR = ir.FloatType(), ir.IntType(64), ir.PointerType()


def _pressure_ir(live: int = 48, blocks: int = 300) -> str:
    """`live` values loaded first and read across `blocks` branches, all summed at the end:
    more live ranges than registers, each crossing every block (the shape of Genesis' narrow
    phase in one function)."""
    m = ir.Module(name="pressure")
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [PTR, PTR]), name="pressure")
    x, out = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def at(p, k):
        return b.gep(p, [ir.Constant(I64, k)], source_etype=F32)
    vals = [b.load(at(x, k), typ=F32) for k in range(live)]
    acc = ir.Constant(F32, 0.0)
    for j in range(blocks):
        c = b.load(at(x, live + j), typ=F32)
        then, merge, pre = fn.append_basic_block(), fn.append_basic_block(), b.block
        b.cbranch(b.fcmp_ordered(">", c, ir.Constant(F32, 0.0)), then, merge)
        b.position_at_end(then)
        t = b.fmul(c, vals[j % live])
        for k in range(1, 6):
            t = b.fadd(t, b.fmul(vals[(7 * j + k) % live], c))
        b.store(t, at(out, j))
        b.branch(merge)
        b.position_at_end(merge)
        phi = b.phi(F32)
        phi.add_incoming(t, then)
        phi.add_incoming(c, pre)
        acc = b.fadd(acc, phi)
    for v in vals:
        acc = b.fadd(acc, v)
    b.store(acc, at(out, blocks))
    b.ret_void()
    return str(m)


def test_huge_module_gets_the_budget_and_the_default_comes_back():
    rt = CpuRuntime()
    src = _pressure_ir()
    before = rt.compile_object(src)[0]
    with machine_code.budget_for(src, len(src) - 1):      # over the threshold: huge
        huge = rt.compile_object(src)[0]
    after = rt.compile_object(src)[0]
    with machine_code.budget_for(src, len(src)):          # not over it: untouched
        small = rt.compile_object(src)[0]
    with machine_code.budget_for(src, 0):                 # 0: never
        never = rt.compile_object(src)[0]
    assert huge != before
    assert after == before and small == before and never == before


def test_is_huge():
    assert machine_code.is_huge("x" * 11, 10)
    assert not machine_code.is_huge("x" * 10, 10)
    assert not machine_code.is_huge("x" * 10 ** 6, 0)


@test_archs()
def test_kernel_compiled_as_huge_computes_the_same(arch, monkeypatch):
    """Every module huge: the CPU backend compiles this kernel under the smaller budget (the
    spy sees it), and the results are numpy's on every arch."""
    monkeypatch.setenv("SPIRAD_CPU_HUGE_IR", "1")
    huge = []
    real = machine_code.budget_for

    def spy(llvm_ir, huge_ir):
        huge.append(machine_code.is_huge(llvm_ir, huge_ir))
        return real(llvm_ir, huge_ir)
    monkeypatch.setattr(machine_code, "budget_for", spy)
    n = 64
    x = sd.ndarray(sd.f32, shape=(n, 8))
    out = sd.ndarray(sd.f32, shape=n)
    data = np.random.default_rng(3).standard_normal((n, 8)).astype(np.float32)
    x.from_numpy(data)

    @sd.kernel
    def k(x: sd.types.ndarray(), out: sd.types.ndarray()):
        for i in range(n):
            s = 0.0
            for j in sd.static(range(8)):
                if x[i, j] > 0:
                    s += x[i, j] * (j + 1)
                else:
                    s -= x[i, (j + 3) % 8]
            out[i] = s

    k(x, out)
    want = np.zeros(n, np.float32)
    for j in range(8):
        want += np.where(data[:, j] > 0, data[:, j] * (j + 1), -data[:, (j + 3) % 8])
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-5, atol=1e-5)
    assert huge == ([True] if arch == "cpu" else [])
