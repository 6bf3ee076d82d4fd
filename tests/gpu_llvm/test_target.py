"""The target description (`llvm_codegen.target`): what each target changes in the emitted LLVM
IR, and that the CPU's IR is what it was; the device-code cache."""
import dataclasses
import re

import pytest

import spirad as sd
from llvm_codegen import device_codegen, device_libs
from llvm_codegen.codegen import compile_tasks
from llvm_codegen.options import CodegenOptions
from llvm_codegen.target import CPU, TARGETS, emulation, math_symbol

ND = sd.types.ndarray()


@sd.kernel
def k_probe(x: ND, y: ND, total: ND, n: sd.i32):
    for i in x:
        v = x[i]
        for k in range(n):
            v = sd.sin(v) + sd.tan(v) * 0.5
        total[0] += v
        y[i] = v


@pytest.fixture(scope="module")
def probe():
    """(TaskList, KernelABI) of the probe's forward and adjoint programs, from the CPU backend."""
    from spirad.backends import cpu
    seen = []
    orig = cpu.CpuBackend.compile

    def compile(self, tl, abi):
        seen.append((tl, abi))
        return orig(self, tl, abi)
    cpu.CpuBackend.compile = compile
    try:
        # without the default checks: no versioned copies, so the programs are the ones a GPU
        # backend gets (the CPU alone versions range task bodies: passes/bounds_versioning)
        sd.init(arch="cpu", default_fp=sd.f32, check_bounds=False)
        x = sd.ndarray(sd.f32, (16,), needs_grad=True)
        y = sd.ndarray(sd.f32, (16,), needs_grad=True)
        t = sd.ndarray(sd.f32, (1,), needs_grad=True)
        k_probe(x, y, t, 3)
        t.grad.fill(1.0)
        k_probe.grad(x, y, t, 3)
    finally:
        cpu.CpuBackend.compile = orig
    return seen


def _ir(probe, target, which=-1, bounds=False, options=CodegenOptions()):
    tl, abi = probe[which]
    return compile_tasks(tl, abi, bounds_check=bounds, target=target, options=options)


def _flat(prog) -> str:
    """The IR text without llvmlite's name quotes."""
    return prog.llvm_ir.replace('"', "")


def test_cpu_output_is_the_default(probe):
    # the scalar lowering names the CPU's math (the SIMD-lane path uses vecmath bodies instead)
    scalar = CodegenOptions(spmd=False)
    for tl, abi in probe:
        a = compile_tasks(tl, abi, options=scalar).llvm_ir
        assert a == compile_tasks(tl, abi, target=CPU, options=scalar).llvm_ir
        assert "syncscope" not in a and "addrspace" not in a and "kernel" not in a
    ir = _flat(_ir(probe, CPU, 0, options=scalar))
    assert "@llvm.sin.f32" in ir and "@tanf(" in ir


def test_nvptx_kernel_entry_and_libdevice_names(probe):
    ir = _flat(_ir(probe, TARGETS["sm_80"]))
    assert "target triple = nvptx64-nvidia-cuda" in ir
    assert re.search(r"define ptx_kernel void @spirad_\w+\(ptr %bufs", ir)
    assert "@__nv_sinf" in ir and "@__nv_tanf" in ir and "llvm.sin" not in ir
    assert "llvm.nvvm.read.ptx.sreg.tid.x" in ir and "grid.i" in ir
    assert "addrspace(5)" not in ir


def test_amdgpu_private_memory_math_and_atomic_scope(probe):
    ir = _flat(_ir(probe, TARGETS["gfx90a"], bounds=True))
    assert "define amdgpu_kernel void" in ir
    assert "__ocml_sin_f32" in ir and "__ocml_tan_f32" in ir
    allocas = re.findall(r"= alloca [^\n]*", ir)
    assert allocas and all("addrspace(5)" in a for a in allocas)
    assert "syncscope(agent) monotonic" in ir  # the atomics and the status cmpxchg
    assert "amdgpu.no.fine.grained.memory" not in ir  # managed memory: no native float atomic


def test_emulation_keeps_the_gpu_entry_with_host_math(probe):
    t = emulation(TARGETS["gfx1100"])
    assert t.entry == "grid" and t.thread_id == "param" and t.alloca_addrspace == 0
    ir = _flat(_ir(probe, t))
    assert "@llvm.sin.f32" in ir and "syncscope" not in ir
    tl, abi = probe[-1]
    sym = compile_tasks(tl, abi, target=t).tasks[0].symbol
    assert f"define internal void @{sym}.thread(" in ir
    assert f"define void @{sym}(" in ir


def test_math_symbols():
    assert math_symbol(TARGETS["sm_90"], "atan2", "f32") == "__nv_atan2f"
    assert math_symbol(TARGETS["sm_90"], "pow", "f64") == "__nv_pow"
    assert math_symbol(TARGETS["gfx1100"], "tanh", "f64") == "__ocml_tanh_f64"
    with pytest.raises(ValueError):
        math_symbol(CPU, "sin", "f32")


def test_oclc_constants_per_gfx():
    a = device_codegen._oclc_constants(TARGETS["gfx90a"])
    assert "@__oclc_ISA_version = addrspace(4) constant i32 9010" in a
    assert "@__oclc_wavefrontsize64 = addrspace(4) constant i8 1" in a
    b = device_codegen._oclc_constants(TARGETS["gfx1100"])
    assert "constant i32 11000" in b and "@__oclc_wavefrontsize64 = addrspace(4) constant i8 0" in b


def _tools_or_skip(arch):
    try:
        if arch == "nvptx":
            device_libs.find_ptxas(), device_libs.find_libdevice()
        else:
            device_libs.find_rocm_bitcode(), device_libs.find_lld()
    except device_libs.ToolMissing as e:
        from tests.support.archs import arch_or_skip
        arch_or_skip("cuda" if arch == "nvptx" else "amdgpu")
        pytest.skip(str(e))


@pytest.mark.parametrize("name", ["sm_80", "gfx90a"])
def test_cache_makes_a_repeated_build_free(probe, tmp_path, monkeypatch, name):
    target = TARGETS[name]
    _tools_or_skip(target.arch)
    prog = _ir(probe, target)
    syms = [t.symbol for t in prog.tasks]
    monkeypatch.setattr(device_codegen, "_cache", device_libs.DeviceCache(str(tmp_path)))
    first = device_codegen.build(prog.llvm_ir, target, syms)

    def no_tools(*a, **k):
        raise AssertionError("a cached build ran an assembler")
    monkeypatch.setattr(device_codegen, "_run", no_tools)
    monkeypatch.setattr(device_codegen, "optimized_module", no_tools)
    assert device_codegen.build(prog.llvm_ir, target, syms) == first  # in-process hit
    monkeypatch.setattr(device_codegen, "_cache", device_libs.DeviceCache(str(tmp_path)))
    assert device_codegen.build(prog.llvm_ir, target, syms) == first  # on-disk hit (new process)


def test_native_float_atomics_link_on_gfx90a(probe):
    _tools_or_skip("amdgpu")
    t = dataclasses.replace(TARGETS["gfx90a"], fadd_metadata=True)
    prog = _ir(probe, t, 0)
    assert "!amdgpu.no.fine.grained.memory" in prog.llvm_ir
    mod = device_codegen.optimized_module(prog.llvm_ir, t, [x.symbol for x in prog.tasks])
    asm = device_codegen.target_machine(t).emit_assembly(mod)
    assert "global_atomic_add_f32" in asm or "buffer_atomic_add_f32" in asm
    assert "global_atomic_cmpswap" not in asm


@sd.kernel
def k_versioned_atomics(x: ND, total: ND, n: sd.i32):
    for i in range(16):
        for j in range(n):  # checked accesses in a run-time loop: versioned (a guarded copy)
            total[i] += x[i, j] * 2.0
            total[(i + 1) % 16] += x[i, j]


def test_versioned_loops_keep_native_float_atomics_on_gfx90a(monkeypatch):
    """A GPU program with the default bounds checks has its loops versioned (a copy without
    checks under a guard, passes/bounds_versioning): LLVM must not merge the copies' float
    atomics into one that drops `!amdgpu.no.fine.grained.memory`, which turns gfx90a's native
    float add into a compare-and-swap loop (what happened to versioned range task bodies, now
    versioned on the CPU only). The task list is the AMDGPU backend's own (emulated)."""
    _tools_or_skip("amdgpu")
    from spirad.backends import llvm_gpu
    monkeypatch.setenv("SPIRAD_AMDGPU_EMULATE", "1")
    seen = []
    orig = llvm_gpu.LlvmGpuBackend.compile

    def compile(self, tl, abi):
        seen.append((tl, abi, self.oob_check))
        return orig(self, tl, abi)
    monkeypatch.setattr(llvm_gpu.LlvmGpuBackend, "compile", compile)
    sd.init(arch="amdgpu", offline_cache=False)
    x = sd.ndarray(sd.f32, (16, 8))
    t = sd.ndarray(sd.f32, (16,))
    x.fill(1.0)
    k_versioned_atomics(x, t, 8)
    assert (t.to_numpy() == 24.0).all()
    tl, abi, oob = seen[0]
    assert oob
    t90a = dataclasses.replace(TARGETS["gfx90a"], fadd_metadata=True)
    prog = compile_tasks(tl, abi, target=t90a, oob_check=oob)
    assert prog.llvm_ir.count("atomicrmw fadd") == 4  # two atomics in each of the two copies
    mod = device_codegen.optimized_module(prog.llvm_ir, t90a, [x.symbol for x in prog.tasks])
    asm = device_codegen.target_machine(t90a).emit_assembly(mod)
    assert asm.count("global_atomic_add_f32") + asm.count("buffer_atomic_add_f32") >= 2
    assert "global_atomic_cmpswap" not in asm
