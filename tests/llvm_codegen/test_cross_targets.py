"""The CPU backend's code for machines this one is not: 64-bit ARM (NEON, 4 f32 lanes a
register: Apple silicon, ARM Linux). LLVM emits object code for them here (`cpu_runtime
.compile_for`, never run), from the IR the code generator makes for a 128-bit target
(`CodegenOptions.vector_bits`: 8 SPMD lanes per 32-bit value, 4-wide vecmath variants), so an
Apple-silicon user never meets a code generator that was never asked to emit their ISA: the
vector math (scalar loops vectorised with the vecmath variants, the bodies inlined, SPMD lanes),
random kernels, and whole spirad programs — their one-thread variants, privatised scatters and
masked adjoint tasks with per-lane stacks — compiled by the CPU backend as it would there.
"""
from __future__ import annotations

import dataclasses
import re
import struct

import numpy as np
import pytest

from kernel_ir.abi import kernel_abi
from llvm_codegen.codegen import compile_tasks
from llvm_codegen.cpu_runtime import CpuRuntime, compile_for
from llvm_codegen.cpu_target import isa_of
from llvm_codegen.options import CodegenOptions
from llvm_codegen.vecmath import lanes_support
from tests.llvm_codegen.test_llvm_vecmath_lowering import CASES, _kernel

# (triple, cpu): ARM Linux, Apple silicon
AARCH64 = [("aarch64-unknown-linux-gnu", "generic"), ("arm64-apple-macosx13.0.0", "apple-m1")]
NEON_BITS = 128
NEON = CodegenOptions(vector_bits=NEON_BITS, min_trips=0)


@pytest.fixture(autouse=True)
def _no_forced_cpu(monkeypatch):
    """These emit for aarch64 at its own widths, whatever target the run forces."""
    for v in ("SPIRAD_CPU_TARGET", "SPIRAD_CPU_SPMD_LANES"):
        monkeypatch.delenv(v, raising=False)


def _check_object(obj: bytes, triple: str):
    """An aarch64 object file: ELF with e_machine EM_AARCH64, or Mach-O of CPU_TYPE_ARM64."""
    if "apple" in triple:
        magic, cputype = struct.unpack_from("<II", obj)
        assert (magic, cputype) == (0xFEEDFACF, 0x0100000C), (hex(magic), hex(cputype))
    else:
        assert obj[:4] == b"\x7fELF" and obj[4] == 2  # 64-bit
        assert struct.unpack_from("<H", obj, 18)[0] == 183  # EM_AARCH64


def _emit(llvm_ir: str, vectorised: bool = False):
    """Object code for each aarch64 triple; the (assembly, optimized IR) of each."""
    out = []
    for triple, cpu in AARCH64:
        obj, asm, opt = compile_for(llvm_ir, triple, cpu, "", vectorised)
        _check_object(obj, triple)
        out.append((asm, opt))
    return out


def _neon_vectors(asm: str) -> bool:
    """NEON 4 x f32 / 2 x f64 (or integer) vector instructions: `v0.4s` or Apple's `fadd.4s`."""
    return re.search(r"\bv\d+\.(4s|2d|16b|8h)\b|\.(4s|2d)\s", asm) is not None


@pytest.mark.parametrize("triple,cpu", AARCH64)
def test_probed_isa_is_neon(triple, cpu):
    assert isa_of(triple, cpu, "").bits == NEON_BITS
    assert isa_of(triple, cpu, "").name == "NEON"
    assert isa_of(triple, cpu, "").lanes("f32") == 4


@pytest.mark.parametrize("spmd", [False, True], ids=["loops", "spmd"])
@pytest.mark.parametrize("flag", ["auto", "1"])
@pytest.mark.parametrize("op,dt,name", CASES, ids=[c[2] + "-" + str(c[1]) for c in CASES])
def test_vector_math_emits_for_aarch64(flag, spmd, op, dt, name):
    """The vecmath lowering at NEON's width: `auto` names 4-wide (f32) / 2-wide (f64) variants,
    which aarch64's loop vectoriser calls; SPMD lanes (8 / 4) and inlined bodies emit too."""
    tl = _kernel(op, dt)
    opts = dataclasses.replace(NEON, vecmath=flag, spmd=spmd)
    prog = compile_tasks(tl, kernel_abi(tl), options=opts)
    assert prog.tasks[0].lanes == ((2 if dt.name == "f32" else 1) * 4 if spmd else 1)
    w = NEON_BITS // dt.bits
    for asm, opt in _emit(prog.llvm_ir, prog.vectorised):
        if spmd or flag == "auto":  # lanes, or the loop vectorised with the variant
            assert _neon_vectors(asm)
        if flag == "auto" and not spmd:
            assert f"_ZGV_LLVM_N{w}" in prog.llvm_ir
            assert re.search(rf'call <{w} x \w+> @"?spirad\.vm\.{name}\.v{w}{dt.name}"?\(', opt), \
                "aarch64's vectorised loop does not call the 4-wide vecmath variant"


def test_lane_helpers_emit_for_aarch64():
    """The vecmath bodies' libm fallback module (`vecmath.lanes_support`)."""
    _emit(lanes_support.module_ir())


@pytest.mark.parametrize("seed", [0, 3, 7, 11, 19, 42])
def test_random_kernels_emit_for_aarch64(seed):
    """Random IR (every op, atomics, loops, ifs, 64-bit types) at NEON's lane widths."""
    from tests.support.random_kernels import generate
    tl = generate(seed).tl
    prog = compile_tasks(tl, kernel_abi(tl), options=NEON)
    _emit(prog.llvm_ir, prog.vectorised)


def test_spirad_programs_emit_for_aarch64(monkeypatch):
    """Whole programs through the CPU backend with NEON's widths (run here: the vector IR is
    portable), every module it compiles emitted for aarch64 as well: DiffTaichi-shaped P2G /
    G2P with their adjoints (one-thread variants, privatised scatters, demoted atomics) and a
    masked adjoint task with per-lane stacks (varying trip counts)."""
    import spirad as sd
    from spirad import options
    from tests.autodiff.test_spmd_grad_masks import _grad_of, _steps, _nd_i32, k_trips
    from tests.passes.test_demote_atomics import N, _mpm_like, _reference

    base = options.llvm_codegen_options
    monkeypatch.setattr(options, "llvm_codegen_options",
                        lambda: dataclasses.replace(base(), vector_bits=NEON_BITS))
    modules = []
    compile_object = CpuRuntime.compile_object

    def spy(self, llvm_ir, vectorised=False, *pipeline):
        modules.append((llvm_ir, vectorised))
        return compile_object(self, llvm_ir, vectorised, *pipeline)

    monkeypatch.setattr(CpuRuntime, "compile_object", spy)
    monkeypatch.setenv("SPIRAD_DEBUG_CPU", "1")
    sd.init(arch=sd.cpu, offline_cache=False, cpu_max_num_threads=2)
    x0 = np.random.default_rng(3).uniform(0.05, 0.9, N)
    loss = _mpm_like()(x0)[0]
    assert loss == pytest.approx(_reference(x0), rel=1e-5)
    xs = np.linspace(-0.9, 0.9, 100)
    _grad_of(k_trips, sd.f32, xs, _nd_i32(_steps(1, 6)[:100]))
    assert len(modules) >= 5
    lanes8 = 0
    for llvm_ir, vectorised in modules:
        lanes8 += "<8 x float>" in llvm_ir  # 32-bit lanes: two NEON registers a value
        assert "<16 x float>" not in llvm_ir and "<32 x float>" not in llvm_ir
        _emit(llvm_ir, vectorised)
    assert lanes8
