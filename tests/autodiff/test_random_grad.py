"""Random spirad programs (tests/support/random_grad_programs.py) differentiated end to end:
every needs_grad global's `.grad` after the Tape (or the hand-called `kernel.grad`s) must equal
the float64 central difference of the loss with respect to that global's initial value, computed
by running the same source under a plain-Python stand-in for `sd`. The forward values (loss and
intermediates) must match the stand-in's too (the check: tests/support/random_grad_check.py).
A failure prints the program; `generate(seed, fp, features)` rebuilds it, and
`python -m tests.support.shrink_grad --arch ARCH --seed SEED --features jumps` shrinks it to a
few lines."""
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, SPIRV_ARCHS, exactly, test_archs
from tests.support.random_grad_check import check_program

SEEDS = range(24)
INTERP_SEEDS = (0, 1, 2, 3, 4, 5)


# no size hints: the stacks of `while` loops are measured by the counting pass
@pytest.mark.parametrize("seed", SEEDS)
@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_random_program_gradients(arch, seed):
    check_program(seed)


# the same seeds in f32 on the SPIR-V backends: Metal (no f64) runs every one of them
@pytest.mark.parametrize("seed", SEEDS)
@test_archs(archs=SPIRV_ARCHS, default_ad_stack_size=1024)
def test_random_program_gradients_f32(arch, seed):
    check_program(seed, "f32")


@pytest.mark.parametrize("seed", INTERP_SEEDS)
@test_archs(archs=exactly("interp"), default_fp=sd.f64)
def test_random_program_gradients_interp(arch, seed):
    check_program(seed)


# -- break / continue (issue #35): the generator's "jumps" programs --------------------------------
# Disjoint seeds per arch, as many as fit about three minutes of CI on two cores (pytest -n 2):
# 220 seeds, about 380 s of CPU. CPU seconds per seed, check included (scripts/fuzz_grad.py
# --validation over 30 seeds per arch, which reports them; wall time on an idle core is about the
# same): cpu 0.72, vulkan 2.69, metal (f32, emulated on lavapipe) 2.18, cuda 2.77 and amdgpu 4.32
# (emulated).
# The standing fuzz run over thousands of seeds: scripts/fuzz_grad.py.
JUMPS = ("jumps",)
JUMP_SEEDS = {"cpu": range(0, 120), "vulkan": range(120, 155), "metal": range(155, 175),
              "cuda": range(175, 200), "amdgpu": range(200, 220)}


def _jump_tests(arch):
    """The jump-program test of one arch over its seeds: float64 where the arch has it, float32 on
    Metal (no 64-bit floats). Bound to a test name per arch below (pytest collects a test by the
    name it has in the module)."""
    f32 = arch == "metal"

    @pytest.mark.parametrize("seed", JUMP_SEEDS[arch])
    @test_archs(archs=exactly(arch), **({} if f32 else {"default_fp": sd.f64}))
    def test(arch, seed):
        check_program(seed, "f32" if f32 else "f64", features=JUMPS)
    return test


test_random_jump_programs_cpu = _jump_tests("cpu")
test_random_jump_programs_vulkan = _jump_tests("vulkan")
test_random_jump_programs_metal = _jump_tests("metal")
test_random_jump_programs_cuda = _jump_tests("cuda")
test_random_jump_programs_amdgpu = _jump_tests("amdgpu")


def test_shrinker_keeps_the_failure_and_little_else():
    """tests/support/shrink_grad.py on a stand-in check (no spirad): a program "fails" while it
    has a `break` under a condition on a loop counter; the shrunk one still does, in a few
    lines, and still loads under the stand-in."""
    import ast
    import re

    from tests.support.random_grad_programs import generate, reference_sd
    from tests.support.shrink_grad import shrink

    def check(prog):
        try:
            prog.load(reference_sd()).forward()
        except Exception:  # noqa: BLE001 - an invalid candidate
            return "reference"
        return "grad" if re.search(r"if j\d .*:\n\s+break", prog.source) else "ok"

    seed = next(s for s in range(100) if check(generate(s, features=JUMPS)) == "grad")
    prog = generate(seed, features=JUMPS)
    small = shrink(prog, "cpu", check=check)
    assert check(small) == "grad"
    defs = [n for n in ast.parse(small.source).body if isinstance(n, ast.FunctionDef)]
    code = [ln for ln in small.source.splitlines() if ln.startswith(" ")]
    assert len(code) < len([ln for ln in prog.source.splitlines() if ln.startswith(" ")]) / 3
    assert len(defs) <= 4, small.source  # a kernel (and the loss kernel), run, forward


# The release pipeline (`debug=False`), which users run: the passes debug mode turns off run too,
# such as passes/bounds_versioning (it versions loops in about a fifth of these programs' task
# lists), and the CPU runs range tasks in SIMD lanes (a debug build compiles them scalar), here
# however short (SPIRAD_CPU_SPMD_MIN_TRIPS=0, as scripts/fuzz_grad.py sets: these programs' loops
# have 4 trips, which the default leaves scalar). The fuzz run's seed 73690 was a wrong result
# only lanes computed (tests/llvm_codegen/test_sincos_pairs.py); scripts/fuzz_grad.py --no-debug
# runs thousands of such seeds.
RELEASE_SEEDS = {"cpu": range(220, 300), "vulkan": range(300, 308), "cpu_plain": range(24, 48)}


@pytest.mark.parametrize("seed", RELEASE_SEEDS["cpu"])
@test_archs(archs=exactly("cpu"), default_fp=sd.f64, debug=False)
def test_random_jump_programs_release_cpu(arch, seed, monkeypatch):
    monkeypatch.setenv("SPIRAD_CPU_SPMD_MIN_TRIPS", "0")
    check_program(seed, features=JUMPS)


@pytest.mark.parametrize("seed", RELEASE_SEEDS["cpu_plain"])
@test_archs(archs=exactly("cpu"), default_fp=sd.f64, debug=False)
def test_random_programs_release_cpu(arch, seed, monkeypatch):
    monkeypatch.setenv("SPIRAD_CPU_SPMD_MIN_TRIPS", "0")
    check_program(seed)


@pytest.mark.parametrize("seed", RELEASE_SEEDS["vulkan"])
@test_archs(archs=exactly("vulkan"), default_fp=sd.f64, debug=False)
def test_random_jump_programs_release_vulkan(arch, seed):
    check_program(seed, features=JUMPS)


def test_shrinker_never_makes_a_float_expression_an_integer():
    """`a = (i + 1) * 0.21` must not shrink to `a = i + 1`: that makes `a` an i32 local, whose
    later float stores truncate in spirad (Taichi's typing) and not in the float64 stand-in."""
    import ast

    from tests.support.shrink_grad import _replacements

    def options(src):
        return [ast.unparse(r) for r in _replacements(ast.parse(src, mode="eval").body)]
    assert options("(i + 1) * 0.21") == ["0.21", "0.5"]
    assert options("x0[i] * (cj0 + 1)") == ["x0[i]", "0.5"]
    assert options("i + 1") == ["i", "1", "0.5"]  # an integer expression keeps its operands
