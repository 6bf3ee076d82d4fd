"""Fixtures of the SPIR-V code generator tests.

Tests that execute on the Vulkan driver use the `vk` fixture and carry the `vulkan_driver`
marker plus `xdist_group("spirv_vulkan")`, so `pytest -n 2 --dist loadgroup` keeps them in one
worker, isolated from the rest (a driver crash takes down one worker only). The session runtime
runs with the Khronos validation layer when it is installed; any validation message fails the
test that caused it.

`harness.py` is loaded under the unique module name `spv_harness` (other test directories have
their own `harness` modules).
"""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name, path):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


_load("spv_harness", os.path.join(_HERE, "harness.py"))
_load("spv_kit", os.path.join(_HERE, "kit.py"))


def pytest_configure(config):
    config.addinivalue_line("markers", "vulkan_driver: executes SPIR-V on the Vulkan driver")


_VK = {}


def _runtime():
    if "rt" not in _VK:
        try:
            from gfx_runtime.vulkan.runtime import VulkanRuntime
            from gfx_runtime.vulkan.instance import take_validation_messages
        except Exception as e:  # runtime not written / not importable
            _VK["rt"], _VK["why"] = None, f"gfx_runtime unavailable: {e}"
            return None
        try:
            val = os.environ.get("SPIRAD_SPIRV_TEST_VALIDATION", "1") != "0"
            _VK["rt"] = VulkanRuntime(validation=val)
        except Exception as e:
            try:
                _VK["rt"] = VulkanRuntime(validation=False)
            except Exception as e2:
                _VK["rt"], _VK["why"] = None, f"no Vulkan device: {e}; {e2}"
                return None
        _VK["take"] = take_validation_messages
        take_validation_messages()
    return _VK["rt"]


@pytest.fixture
def vk():
    rt = _runtime()
    if rt is None:
        pytest.skip(_VK.get("why", "no Vulkan"))
    _VK["take"]()
    yield rt
    msgs = _VK["take"]()
    assert msgs == [], "Vulkan validation messages:\n" + "\n".join(msgs)


@pytest.fixture
def vk_int64_atomics(vk):
    """(runtime, caps) able to run 64-bit atomics, or skip.

    gfx_runtime enables shaderBufferInt64Atomics wherever the device has it, so normally this is
    the validation-checked session runtime. Fallback for a lavapipe runtime that reports no such
    feature (lavapipe implements it): a second runtime *without* the validation layer (which
    would rightly flag the missing feature) and with `has_int64_atomics=True` forced."""
    import spv_harness as H
    if getattr(vk.caps, "has_int64_atomics", False):
        return vk, H.device_caps(vk)
    if not getattr(vk.caps, "is_lavapipe", False):
        pytest.skip("device lacks shaderBufferInt64Atomics")
    if "raw" not in _VK:
        from gfx_runtime.vulkan.runtime import VulkanRuntime
        _VK["raw"] = VulkanRuntime(validation=False)
    return _VK["raw"], H.device_caps(_VK["raw"], has_int64_atomics=True)


def pytest_sessionfinish(session, exitstatus):
    for k in ("raw", "rt"):
        rt = _VK.get(k)
        if rt is not None:
            rt.close()
