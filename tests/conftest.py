"""Project-wide test setup: Vulkan validation on, and any validation message fails the test."""
from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
os.environ.setdefault("SPIRAD_VALIDATION", "1")


def _session_cache_dir():
    """The offline compile cache (on by default) writes to a fresh directory per test session."""
    import atexit
    import shutil
    import tempfile
    d = os.environ["SPIRAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="spirad-test-cache-")
    atexit.register(shutil.rmtree, d, True)


_session_cache_dir()


@pytest.fixture(autouse=True)
def _fail_on_validation_messages():
    yield
    import spirad.state as st
    be = st.current().backend  # None when this test created no backend
    msgs = be.take_validation_messages() if be is not None else []
    if msgs:
        pytest.fail("Vulkan validation messages:\n" + "\n".join(msgs))
