"""The GPU sizer's own tests do not run on metal yet: `sizer_eval` binds 13 storage buffers (its
8 data slots packed is open work), more than Metal's 8, so the Metal backend sizes adstacks on the
host (`spirad/backends/metal.py`); tests/autodiff covers adstack sizing there."""
import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "[arch=metal" in item.nodeid:
            item.add_marker(pytest.mark.skip(
                reason="GPU sizer kernels exceed Metal's 8 storage buffers; metal sizes on the host"))
