"""Random spirad programs (tests/support/random_grad_programs.py) differentiated end to end:
every needs_grad global's `.grad` after the Tape (or the hand-called `kernel.grad`s) must equal
the float64 central difference of the loss with respect to that global's initial value, computed
by running the same source under a plain-Python stand-in for `sd`. The forward values (loss and
intermediates) must match the stand-in's too. A failure prints the program; `generate(seed)`
rebuilds it."""
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
