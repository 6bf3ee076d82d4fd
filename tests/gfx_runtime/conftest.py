"""Fixtures of the Vulkan runtime tests: assembled shaders and a validation-checked runtime.

Every runtime a test gets from `rt` runs with the Khronos validation layer; teardown closes it
and fails the test on any validation warning or error (architecture §7).
"""

from __future__ import annotations

import pytest

import vk_test_shaders


@pytest.fixture(scope="session")
def spirv():
    """name -> SPIR-V bytes (assembled with spirv-as and checked with spirv-val once)."""
    if not vk_test_shaders.tools_available():
        pytest.skip("spirv-as / spirv-val not on PATH (apt: spirv-tools)")
    cache: dict[str, bytes] = {}

    def get(name: str) -> bytes:
        if name not in cache:
            cache[name] = vk_test_shaders.assemble(name)
        return cache[name]
    return get


@pytest.fixture
def rt():
    from gfx_runtime.vulkan import VulkanRuntime
    from gfx_runtime.vulkan.instance import take_validation_messages
    take_validation_messages()  # start clean
    runtime = VulkanRuntime(validation=True)
    yield runtime
    runtime.close()
    messages = take_validation_messages()
    assert messages == [], "Vulkan validation messages:\n" + "\n".join(messages)
