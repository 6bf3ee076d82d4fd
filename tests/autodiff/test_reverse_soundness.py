"""The shapes every value-forwarding / recomputing optimization of reverse mode must leave right
(architecture §4, issue #35; docs/autodiff.md, "Why these optimizations keep gradients right"): locals
assigned before a `break` / `continue` and read after it, after the loop, or by a store a later
trip overwrites; loads in a loop's head (before its exit checks) used past them; `while` on a
counter and on data; jumps in nested loops; integer locals made selects; conditions and index
expressions recomputed in the reverse walk; reads of never-written data; products with a constant
zero; inlined funcs inside loops with jumps.

The kernels are written once (tests/autodiff/reverse_shapes.py) and run twice: under spirad, and
under the float64 stand-in for `sd` (plain Python loops over numpy), whose central differences
are the oracle. Each runs with the fully stored adjoint and with the checkpointed one
(`init(ad_stack_memory=1)`: every dynamic loop that stores a stacked local replayed in segments),
on every arch.
"""
import importlib.util
import os

import numpy as np
import pytest

import spirad as sd
from tests.autodiff.gradutil import Case, case_tests, run_case
from tests.support.archs import EVERY_ARCH, test_archs
from tests.support.random_grad_programs import RefArray, reference_sd

N = 7  # trips of the run-time loops (an i32 argument)
C = np.array([0.9, 1.1, 0.8, 1.2, 1.0])  # a read-only array (never written by the kernels)
PATH = os.path.join(os.path.dirname(__file__), "reverse_shapes.py")


def _load(sd_module, name):
    spec = importlib.util.spec_from_file_location(name, PATH)
    mod = importlib.util.module_from_spec(spec)
    mod.sd = sd_module
    spec.loader.exec_module(mod)
    return mod


SHAPES = _load(sd, "_reverse_shapes_spirad")
REF = _load(reference_sd(), "_reverse_shapes_ref")


def reference(name):
    """`ref(x, *extra) -> [y]`: the stand-in's run of kernel `name` (arrays as RefArrays)."""
    def ref(x, *extra):
        def wrap(v):
            if isinstance(v, np.ndarray):
                a = RefArray(np.float64, v.shape)
                a.from_numpy(v)
                return a
            return v
        y = RefArray(np.float64, x.shape)
        getattr(REF, name)(wrap(x), y, *map(wrap, extra))
        return [y.to_numpy()]
    return ref


def case(name, *extra):
    return Case(getattr(SHAPES, name), reference(name), extra=extra)


CASES = {
    "break_store": case("k_break_store", N),
    "continue_local": case("k_continue_local", N),
    "while_head": case("k_while_head", N),
    "nested_jumps": case("k_nested_jumps", N),
    "break_data": case("k_break_data", N),
    "select_index": case("k_select_index", N, ("fp", C)),
    "recomputed": case("k_recomputed", N, ("fp", C)),
    "zero_factor": case("k_zero_factor", N),
    "func_jump": case("k_func_jump", N),
    "while_true": case("k_while_true", N),
}


def test_every_shape_is_a_case():
    assert sorted(f"k_{c}" for c in CASES) == sorted(
        n for n in vars(SHAPES) if n.startswith("k_"))


test_shapes_f64, test_shapes_f32 = case_tests(CASES, f64_archs=EVERY_ARCH)


@pytest.mark.parametrize("name", sorted(CASES))
@test_archs(archs=EVERY_ARCH, default_fp=sd.f64, ad_stack_memory=1)
def test_shapes_checkpointed(arch, name, request):
    """The checkpointed adjoint (every stack measured, loops replayed in segments)."""
    run_case(CASES[name], "f64", request)
