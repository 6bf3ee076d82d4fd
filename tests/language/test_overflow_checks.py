"""Taichi's debug-mode integer overflow checks (spirad/frontend/overflow.py): under
init(debug=True, check_overflow=True) `+`, `-`, `*`, `<<` on integer kernel values print
"<Op> overflow detected" with the source line when the exact result does not fit, and the
kernel goes on with the wrapped value; results that fit print nothing."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs

CASES = [  # (dtype, operator, a, b)
    (sd.i32, "+", 2**30, 2**30), (sd.u32, "+", 2**31, 2**31), (sd.i64, "+", -2**62, -2**62 - 1),
    (sd.i32, "-", -2**30, 2**30 + 1), (sd.u32, "-", 1, 2), (sd.i64, "-", 2**62, -2**62),
    (sd.i32, "*", 2**16 + 1, 2**15 + 1), (sd.u32, "*", 2**16, 2**16), (sd.i32, "*", -1, -2**31),
    (sd.i64, "*", 2**32 + 1, 2**31 + 1), (sd.u64, "*", 2**33, 2**31),
    (sd.i32, "<<", 2, 30), (sd.u32, "<<", 2, 31), (sd.i32, "<<", 1, 40),
]
NAMES = {"+": "Addition", "-": "Subtraction", "*": "Multiplication", "<<": "Shift left"}
WRAP = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
        "<<": lambda a, b: a << b if b < 64 else 0}


def _kernels(dt):
    @sd.kernel
    def add(a: dt, b: dt) -> dt:
        return a + b

    @sd.kernel
    def sub(a: dt, b: dt) -> dt:
        return a - b

    @sd.kernel
    def mul(a: dt, b: dt) -> dt:
        return a * b

    @sd.kernel
    def shl(a: dt, b: dt) -> dt:
        return a << b

    return {"+": add, "-": sub, "*": mul, "<<": shl}


@test_archs(check_overflow=True, debug_only="check_overflow reports only under debug=True")
def test_overflow_is_reported_and_fitting_results_are_not(arch, capfd):
    for dt, op, a, b in CASES:
        if arch == "metal" and dt.bits == 64:
            continue  # Metal has no 64-bit integers (refused at compile time; tested there)
        k = _kernels(dt)[op]
        capfd.readouterr()
        got = k(a, b)
        sd.sync()
        out = capfd.readouterr().out
        assert f"{NAMES[op]} overflow detected" in out, (dt, op, a, b, out)
        assert f"return a {op} b" in out
        want = np.array(WRAP[op](a, b) % (1 << dt.bits)).astype(np.uint64).astype(dt.np)
        assert got == want  # the kernel goes on with the wrapped value
        fit = {"+": (a // 4, b // 4), "-": (a // 4, b // 4), "*": (a >> 17 or 1, 3),
               "<<": (1, 3)}[op]
        capfd.readouterr()
        assert k(*fit) == WRAP[op](*fit)
        sd.sync()
        assert "overflow detected" not in capfd.readouterr().out, (dt, op, fit)


@pytest.mark.parametrize("init", [dict(debug=False, check_overflow=True), dict(debug=True)])
def test_no_checks_without_debug_or_the_switch(capfd, init):
    sd.init(arch=sd.cpu, **init)
    k = _kernels(sd.i32)["+"]
    assert k(2**30, 2**30) == -2**31
    sd.sync()
    assert "overflow" not in capfd.readouterr().out


def test_the_taichi_alias_turns_the_checks_on(capfd):
    from spirad.compat import taichi_alias
    taichi_alias.install()
    try:
        sd.init(arch=sd.cpu, debug=True)
        assert _kernels(sd.i32)["*"](2**16, 2**16) == 0
        sd.sync()
        assert "Multiplication overflow detected" in capfd.readouterr().out
    finally:
        taichi_alias.uninstall()
