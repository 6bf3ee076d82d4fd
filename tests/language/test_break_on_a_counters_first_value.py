"""A loop whose `break` tests a counter, after its step, against the counter's first value:
`c = 0; while c < 3: c += 1; if c == 0: break` never breaks and runs three trips.

Mesa's NIR loop unroller (lavapipe 22.3.6, the CI's Vulkan driver, and the Mesa drivers that
share NIR) unrolled such loops to one trip, as if the test were true on the first (fuzz seed
90835, a `while` on data whose last stores were lost). The SPIR-V backend marks loops that hold
a `break` DontUnroll (`spirv_codegen.lower._no_unroll`). Metal emulated here goes through naga,
whose IR drops loop controls, to the same lavapipe: a known wrong result of the emulation (a
Mac compiles naga's MSL with Apple's compiler), an xfail there while lavapipe is the host."""
from __future__ import annotations

import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, test_archs

# (first value, step, bound of the while, value the break tests) -> trips, final counter
WHILE_CASES = [(0, 1, 3, 0), (5, 1, 8, 5), (5, -1, 2, 5), (0, 2, 6, 0), (1, 1, 5, 3)]


def _trips(first, step, bound, at):
    c, trips = first, 0
    while c != bound:
        c += step
        if c == at:
            break
        trips += 1
    return trips, c


def _lavapipe_under_naga(arch, got, want):
    if arch == "metal" and got != want:
        pytest.xfail("metal emulated: naga drops DontUnroll and lavapipe 22.3.6 unrolls the loop "
                     "to one trip (Mesa NIR loop unroller)")


@pytest.mark.parametrize("case", WHILE_CASES, ids=[str(c) for c in WHILE_CASES])
@test_archs(EVERY_ARCH, debug=False)
def test_while_break_on_the_counters_first_value(arch, case):
    first, step, bound, at = case
    out = sd.field(sd.i32, shape=2)

    @sd.kernel
    def k():
        trips = 0
        c = first
        while c != bound:
            c += step
            if c == at:
                break
            trips += 1
        out[0] = trips
        out[1] = c

    k()
    got, want = tuple(int(v) for v in out.to_numpy()), _trips(first, step, bound, at)
    _lavapipe_under_naga(arch, got, want)
    assert got == want


@pytest.mark.parametrize("off", [1, 2])
@test_archs(EVERY_ARCH, debug=False)
def test_range_break_on_the_next_index(arch, off):
    """`for j in range(5): if j + 1 == 0: break`: never true, five trips."""
    out = sd.field(sd.i32, shape=2)

    @sd.kernel
    def k():
        for _ in range(1):
            trips = 0
            for j in range(5):
                if j + off == 0:
                    break
                trips += 1
            out[0] = trips

    k()
    got, want = (int(out[0]), 0), (5, 0)
    _lavapipe_under_naga(arch, got, want)
    assert got == want
