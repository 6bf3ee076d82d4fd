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


def test_huge_module_without_slp():
    """A huge module goes without the SLP vectoriser; the flag reaches LLVM (packed adds of
    four neighbouring floats with it, scalar adds without)."""
    assert not machine_code.slp("x" * 11, 10)
    assert machine_code.slp("x" * 10, 10) and machine_code.slp("x" * 10 ** 6, 0)
    m = ir.Module(name="slp")
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [PTR, PTR]), name="slp4")
    x, out = fn.args
    for arg in fn.args:
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    for k in range(4):
        a = b.load(b.gep(x, [ir.Constant(I64, k)], source_etype=F32), typ=F32)
        c = b.load(b.gep(x, [ir.Constant(I64, k + 4)], source_etype=F32), typ=F32)
        b.store(b.fadd(a, c), b.gep(out, [ir.Constant(I64, k)], source_etype=F32))
    b.ret_void()
    rt = CpuRuntime()
    with_slp, without = rt.compile_object(str(m))[1], rt.compile_object(str(m), slp=False)[1]
    assert "fadd <4 x float>" in with_slp and "fadd <4 x float>" not in without


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


def _unswitch_ir() -> str:
    """A loop with a branch on an argument it never changes: what -O3's non-trivial loop
    unswitching copies the loop for, and -O2 leaves as it is."""
    m = ir.Module(name="unswitch")
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, ir.IntType(1)]),
                     name="unswitch")
    x, out, n, flag = fn.args
    entry, head, body, yes, no, merge, done = (fn.append_basic_block(s) for s in (
        "entry", "head", "body", "yes", "no", "merge", "done"))
    b = ir.IRBuilder(entry)
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(ir.Constant(I64, 0), entry)
    b.cbranch(b.icmp_signed("<", i, n), body, done)
    b.position_at_end(body)
    v = b.load(b.gep(x, [i], source_etype=F32), typ=F32)
    b.cbranch(flag, yes, no)
    b.position_at_end(yes)
    a = b.fmul(v, v)
    b.branch(merge)
    b.position_at_end(no)
    c = b.call(ir.Function(m, ir.FunctionType(F32, [F32]), name="llvm.sqrt.f32"), [v])
    b.branch(merge)
    b.position_at_end(merge)
    r = b.phi(F32)
    r.add_incoming(a, yes)
    r.add_incoming(c, no)
    b.store(r, b.gep(out, [i], source_etype=F32))
    nxt = b.add(i, ir.Constant(I64, 1))
    i.add_incoming(nxt, merge)
    b.branch(head)
    b.position_at_end(done)
    b.ret_void()
    return str(m)


def test_speed_level():
    """-O2 over `large_ir` up to `huge_ir`; a huge module keeps -O3 (`huge_ir` 0: never huge)."""
    level = machine_code.speed_level
    assert level("x" * 11, 10, 100) == 2
    assert level("x" * 10, 10, 100) == 3
    assert level("x" * 101, 10, 100) == 3
    assert level("x" * 101, 10, 0) == 2
    assert level("x" * 10 ** 6, 0, 0) == 3


def test_speed_level_2_is_other_machine_code():
    """The level reaches LLVM: -O2 compiles the loop without -O3's unswitched copies."""
    rt = CpuRuntime()
    src = _unswitch_ir()
    o3, o2 = rt.compile_object(src)[1], rt.compile_object(src, speed_level=2)[1]
    assert o3 != o2
    assert o3.count("fmul") > o2.count("fmul") or len(o3) > len(o2)


def test_module_settings_are_in_the_cache_key():
    """Both sizes change machine code: an object cached under one setting is never loaded
    under another."""
    from llvm_codegen.options import CodegenOptions
    base = CodegenOptions()
    assert base.key() != CodegenOptions(large_ir=0).key()
    assert base.key() != CodegenOptions(huge_ir=0).key()
    assert base.key() == CodegenOptions(debug=True).key()


@test_archs()
def test_kernel_compiled_as_large_computes_the_same(arch, monkeypatch):
    """Every module large (SPIRAD_CPU_LARGE_IR=1): the CPU backend optimises this kernel at
    speed level 2 (the spy sees it), and the results are numpy's on every arch."""
    monkeypatch.setenv("SPIRAD_CPU_LARGE_IR", "1")
    levels = []
    real = machine_code.speed_level

    def spy(llvm_ir, large_ir, huge_ir):
        levels.append(real(llvm_ir, large_ir, huge_ir))
        return levels[-1]
    monkeypatch.setattr(machine_code, "speed_level", spy)
    n = 64
    x = sd.ndarray(sd.f32, shape=(n, 4))
    out = sd.ndarray(sd.f32, shape=n)
    flag = 1
    data = np.random.default_rng(5).standard_normal((n, 4)).astype(np.float32)
    x.from_numpy(data)

    @sd.kernel
    def k(x: sd.types.ndarray(), out: sd.types.ndarray(), flag: sd.i32):
        for i in range(n):
            s = 0.0
            for j in range(4):
                if flag > 0:
                    s += x[i, j] * x[i, j]
                else:
                    s -= x[i, j]
            out[i] = s

    k(x, out, flag)
    np.testing.assert_allclose(out.to_numpy(), (data * data).sum(axis=1), rtol=1e-5, atol=1e-5)
    assert levels == ([2] if arch == "cpu" else [])
