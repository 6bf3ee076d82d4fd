"""Habits of the test suite that a test can check (engineering 9, 18):

- the repository root is on the path through `pythonpath` in pyproject.toml: no test, conftest
  or helper edits `sys.path` (standalone scripts run with `python -m tests....` from the root);
- the arch decorator has one spelling, `test_archs`, and takes only arch sets that say what they
  mean (a bare list is refused);
- a metal refusal is an xfail naming its reason, never a pass; any other error still fails;
- the release run (SPIRAD_TEST_RELEASE) inits arch tests with `debug=False`, those marked
  `debug_only` with `debug=True`, and an explicit `debug=` wins.
"""
import os
import re

import pytest

from tests.support import archs

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = {os.path.join("gui", "make_expected.py")}  # run by hand with Taichi's own Python too


def _sources():
    for d, _, files in os.walk(TESTS):
        for f in files:
            if f.endswith(".py"):
                p = os.path.join(d, f)
                with open(p, encoding="utf-8") as fh:
                    yield os.path.relpath(p, TESTS), fh.read()


def test_no_sys_path_edits():
    bad = [p for p, src in _sources() if p not in SCRIPTS and re.search(r"sys\.path\.(insert|append)", src)]
    assert not bad, f"use pyproject.toml's pythonpath / package imports instead: {bad}"


def test_one_arch_decorator_spelling():
    me = os.path.relpath(os.path.abspath(__file__), TESTS)
    bad = [p for p, src in _sources() if p != me and
           (re.search(r"import\s+test_archs\s+as\b", src) or re.search(r"\bon_archs\b", src))]
    assert not bad, f"import the arch decorator as `test_archs`: {bad}"


def test_arch_lists_say_what_they_mean():
    with pytest.raises(TypeError, match="say what the list means"):
        archs.test_archs(("vulkan",))
    assert archs.EVERY_ARCH == ("cpu", "vulkan", "metal", "cuda", "amdgpu")
    assert archs.SPIRV_ARCHS == ("vulkan", "metal") and archs.LLVM_ARCHS == ("cpu", "cuda", "amdgpu")
    assert archs.exactly("vulkan") == ("vulkan",)  # as written: metal is not added
    both = archs.exactly("interp") | archs.EVERY_ARCH
    assert both == ("interp",) + archs.EVERY_ARCH and both.name == "exactly interp | every arch"


def test_metal_refusal_is_an_xfail_with_its_reason():
    from kernel_ir.errors import SpiradTypeError

    def refused():
        raise SpiradTypeError("kernel k uses f64, but Metal has no 64-bit floats; use sd.f32")

    with pytest.raises(pytest.xfail.Exception, match="refused on metal: f64"):
        archs.run_refusable_on_metal(refused)


def test_other_errors_on_metal_still_fail():
    from kernel_ir.errors import SpiradTypeError

    def wrong():
        raise SpiradTypeError("kernel k: a different type error")

    with pytest.raises(SpiradTypeError, match="different"):
        archs.run_refusable_on_metal(wrong)
    assert archs.run_refusable_on_metal(lambda: 7) == 7


def test_release_run_inits_without_debug_unless_debug_only(monkeypatch):
    import spirad.runtime.state as st
    seen = []

    def record(arch):
        seen.append(st.current().debug)

    plain = archs.test_archs(archs.exactly("cpu"))(record)
    marked = archs.test_archs(archs.exactly("cpu"), debug_only="a debug-only message")(record)
    given = archs.test_archs(archs.exactly("cpu"), debug=False)(record)
    monkeypatch.delenv("SPIRAD_TEST_RELEASE", raising=False)
    for t in (plain, marked, given):
        t("cpu")
    monkeypatch.setenv("SPIRAD_TEST_RELEASE", "cpu,vulkan")
    for t in (plain, marked, given):
        t("cpu")
    assert seen == [True, True, False, False, True, False]
    assert archs.is_arch_test(plain) and not archs.is_arch_test(record)
