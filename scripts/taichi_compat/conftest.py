"""Stand-in for Taichi's `tests/python/conftest.py` (spirad's harness, scripts/taichi_tests.py):
`ti.init` before each `test_utils.test` case, `ti.reset` after; a missing `ti.extension` skips."""
import pytest

import taichi as ti


@pytest.fixture(autouse=True)
def wanted_arch(req_arch, req_options):
    if req_arch is None:
        yield
        return
    options = dict(req_options)
    required = options.pop("_require", [])
    ti.init(arch=req_arch, **options)
    missing = [e for e in required if not ti.is_extension_supported(req_arch, e)]
    if missing:
        pytest.skip(f"arch {req_arch} lacks {missing}")
    yield
    ti.reset()


def pytest_generate_tests(metafunc):
    if not getattr(metafunc.function, "__ti_test__", False):
        metafunc.parametrize("req_arch,req_options", [(None, None)], ids=["none"])
