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
from tests.support.archs import test_archs
from tests.support.random_grad_check import check_program

SEEDS = range(24)
INTERP_SEEDS = (0, 1, 2, 3, 4, 5)


# no size hints: the stacks of `while` loops are measured by the counting pass
@pytest.mark.parametrize("seed", SEEDS)
@test_archs(archs=("cpu", "vulkan"), default_fp=sd.f64)
def test_random_program_gradients(arch, seed):
    check_program(seed)


# the same seeds in f32 on the SPIR-V backends: Metal (no f64) runs every one of them
@pytest.mark.parametrize("seed", SEEDS)
@test_archs(archs=("vulkan",), default_ad_stack_size=1024)
def test_random_program_gradients_f32(arch, seed):
    check_program(seed, "f32")


@pytest.mark.parametrize("seed", INTERP_SEEDS)
@test_archs(archs=("interp",), default_fp=sd.f64)
def test_random_program_gradients_interp(arch, seed):
    check_program(seed)


# -- break / continue (issue #35): the generator's "jumps" programs --------------------------------
# Disjoint seeds per arch, as many as fit about three minutes of CI (pytest -n 2 on two cores).
# Measured per seed (check included, validation layer on, a loaded two-core machine): cpu
# CPU_S s, vulkan VK_S s, metal (f32, emulated) MT_S s, cuda / amdgpu (emulated) LL_S s.
# The standing fuzz run over thousands of seeds is scripts/fuzz_grad.py.
JUMPS = ("jumps",)
JUMP_SEEDS = {"cpu": range(0, 100), "vulkan": range(100, 140), "metal": range(140, 160),
              "cuda": range(160, 190), "amdgpu": range(190, 220)}


@pytest.mark.parametrize("seed", JUMP_SEEDS["cpu"])
@test_archs(archs=("cpu",), default_fp=sd.f64)
def test_random_jump_programs_cpu(arch, seed):
    check_program(seed, features=JUMPS)


@pytest.mark.parametrize("seed", JUMP_SEEDS["vulkan"])
@test_archs(archs=("vulkan",), exclude=("metal",), default_fp=sd.f64)
def test_random_jump_programs_vulkan(arch, seed):
    check_program(seed, features=JUMPS)


@pytest.mark.parametrize("seed", JUMP_SEEDS["metal"])
@test_archs(archs=("metal",))
def test_random_jump_programs_metal(arch, seed):
    check_program(seed, "f32", features=JUMPS)


@pytest.mark.parametrize("seed", JUMP_SEEDS["cuda"])
@test_archs(archs=("cuda",), default_fp=sd.f64)
def test_random_jump_programs_cuda(arch, seed):
    check_program(seed, features=JUMPS)


@pytest.mark.parametrize("seed", JUMP_SEEDS["amdgpu"])
@test_archs(archs=("amdgpu",), default_fp=sd.f64)
def test_random_jump_programs_amdgpu(arch, seed):
    check_program(seed, features=JUMPS)
