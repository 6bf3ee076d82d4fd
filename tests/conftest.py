"""Project-wide test setup: Vulkan validation on, and any validation message fails the test."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("SPIRAD_VALIDATION", "1")
# the tests' ranges are short: CPU tasks take SIMD lanes however short their constant range, so
# the lane lowering stays covered (by default fewer than two lane groups stay scalar:
# tests/passes/test_demote_atomics.py::test_short_constant_ranges_stay_scalar)
os.environ.setdefault("SPIRAD_CPU_SPMD_MIN_TRIPS", "0")


def _session_cache_dir():
    """The offline compile cache (on by default) writes to a fresh directory per test session."""
    import atexit
    import shutil
    import tempfile
    d = os.environ["SPIRAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="spirad-test-cache-")
    atexit.register(shutil.rmtree, d, True)


_session_cache_dir()


def pytest_report_header(config):
    from tests.support.archs import release_archs
    if release_archs():
        return (f"SPIRAD_TEST_RELEASE: the arch tests of {', '.join(sorted(release_archs()))} "
                f"only, with sd.init(debug=False), those marked debug_only with debug=True "
                f"(tests/support/archs.py)")


def pytest_collection_modifyitems(config, items):
    """The release run (SPIRAD_TEST_RELEASE=ARCHS) keeps the arch tests of those archs only: the
    others do not init through `test_archs`, and ran in the usual run."""
    from tests.support.archs import is_arch_test, release_archs
    archs = release_archs()
    if not archs:
        return
    keep, drop = [], []
    for item in items:
        cs = getattr(item, "callspec", None)
        arch = cs.params.get("arch") if cs is not None else None
        ours = is_arch_test(getattr(item, "function", None)) and arch in archs
        (keep if ours else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _spirad_environment():
    return {k: v for k, v in os.environ.items() if k.startswith("SPIRAD_")}


@pytest.fixture(autouse=True)
def _no_leaked_options():
    """A test that changes a SPIRAD_* variable without restoring it (a script loaded in-process
    that sets one at import, say) would change every later test in its worker, depending on the
    order xdist deals them: fail the leaking test, and restore the variables."""
    before = _spirad_environment()
    yield
    after = _spirad_environment()
    if after != before:
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        for k in changed:
            if k in before:
                os.environ[k] = before[k]
            else:
                del os.environ[k]
        pytest.fail(f"the test left SPIRAD_* variables changed (restored now): {', '.join(changed)}")


@pytest.fixture(autouse=True)
def _fail_on_validation_messages():
    yield
    import spirad.runtime.state as st
    be = st.current().backend  # None when this test created no backend
    msgs = be.take_validation_messages() if be is not None else []
    if msgs:
        pytest.fail("Vulkan validation messages:\n" + "\n".join(msgs))


def pytest_terminal_summary(terminalreporter):
    """Every metal case refused by the backend (`tests.support.archs.METAL_REFUSALS`), grouped
    by reason: refused cases are xfails, never passes, and this list says which they are."""
    from tests.support.archs import REFUSED_PREFIX
    by_reason: dict = {}
    for rep in terminalreporter.stats.get("xfailed", []):
        why = getattr(rep, "wasxfail", "")
        if why.startswith(REFUSED_PREFIX):
            by_reason.setdefault(why[len(REFUSED_PREFIX):], []).append(rep.nodeid)
    if not by_reason:
        return
    n = sum(map(len, by_reason.values()))
    terminalreporter.section(f"metal refusals: {n} cases (xfail, not passed)")
    for reason, ids in sorted(by_reason.items()):
        terminalreporter.write_line(f"{reason}: {len(ids)}")
        for i in sorted(ids):
            terminalreporter.write_line(f"    {i}")
