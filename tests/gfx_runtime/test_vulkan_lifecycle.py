"""Vulkan runtime lifecycle: close / re-create, the validation layer, device selection."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from gfx_runtime.vulkan import is_available
from gfx_runtime.errors import GfxDeviceError, GfxUnavailable

if not is_available():
    pytest.skip("no Vulkan device (install mesa-vulkan-drivers for lavapipe)",
                allow_module_level=True)

from gfx_runtime.vulkan import DeviceCaps, VulkanRuntime  # noqa: E402
from gfx_runtime.vulkan.instance import ffi, lib, take_validation_messages, vk  # noqa: E402


def _run_add_one(rt, spirv, n=256, times=10):
    buf = rt.alloc(n * 4)
    add = rt.pipeline(spirv("add_one"), 1, 4)
    for _ in range(times):
        rt.dispatch(add, [buf], ((n + 63) // 64, 1, 1), struct.pack("<I", n))
    return buf.view(np.uint32).copy()


def test_is_available_is_cheap_and_true_here():
    assert is_available() is True
    assert is_available() is True


def test_close_and_recreate_three_times(spirv):
    take_validation_messages()
    for _ in range(3):
        rt = VulkanRuntime(validation=True)
        assert isinstance(rt.caps, DeviceCaps)
        np.testing.assert_array_equal(_run_add_one(rt, spirv), np.full(256, 10, np.uint32))
        leftover = rt.alloc(64)  # close() must destroy buffers, pipelines, pools, the device
        rt.dispatch(rt.pipeline(spirv("add_one"), 1, 4), [leftover], (1, 1, 1),
                    struct.pack("<I", 16))  # pending work at close
        rt.close()
        rt.close()  # idempotent
        leftover.free()  # a no-op once closed
    assert take_validation_messages() == []


def test_closed_runtime_refuses_work(spirv):
    rt = VulkanRuntime()
    buf = rt.alloc(64)
    add = rt.pipeline(spirv("add_one"), 1, 4)
    rt.close()
    assert rt.closed
    with pytest.raises(GfxDeviceError, match="closed"):
        rt.alloc(16)
    with pytest.raises(GfxDeviceError, match="closed"):
        rt.dispatch(add, [buf], (1, 1, 1), struct.pack("<I", 16))
    with pytest.raises(GfxDeviceError, match="closed"):
        buf.read()
    rt.flush()  # nothing pending: fine


def test_two_runtimes_side_by_side(spirv):
    a, b = VulkanRuntime(), VulkanRuntime()
    try:
        np.testing.assert_array_equal(_run_add_one(a, spirv, times=2), np.full(256, 2))
        np.testing.assert_array_equal(_run_add_one(b, spirv, times=3), np.full(256, 3))
    finally:
        a.close()
        b.close()


def test_validation_clean_run(spirv):
    take_validation_messages()
    with VulkanRuntime(validation=True) as rt:
        assert rt.validation
        x = rt.alloc(4096)
        y = rt.alloc(4096, host_visible=False)
        x.write(np.arange(1024, dtype=np.float32))
        axpy = rt.pipeline(spirv("axpy"), 2, 8)
        fill = rt.pipeline(spirv("fill"), 1, 8)
        copy_add = rt.pipeline(spirv("copy_add"), 2)
        for _ in range(100):
            rt.dispatch(axpy, [x, y], (16, 1, 1), struct.pack("<fI", 0.5, 1024))
        rt.dispatch(fill, [x], (16, 1, 1), struct.pack("<II", 3, 1024))
        rt.dispatch(copy_add, [x, x], (16, 1, 1))
        np.testing.assert_allclose(y.read().view(np.float32), 50 * np.arange(1024))
        assert (x.view(np.uint32) == 4).all()
        y.free()
    assert rt.take_validation_messages() == []


def test_validation_layer_reports_misuse():
    """Negative control: the messenger really delivers layer errors (so 'no messages' means it)."""
    take_validation_messages()
    with VulkanRuntime(validation=True) as rt:
        info = ffi.new("VkBufferCreateInfo*")
        info.sType = vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO
        info.size = 0  # invalid: VUID-VkBufferCreateInfo-size-00912
        info.usage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
        handle = ffi.new("VkBuffer*")
        if lib.vkCreateBuffer(rt._device, info, ffi.NULL, handle) == 0:
            lib.vkDestroyBuffer(rt._device, handle[0], ffi.NULL)
        messages = rt.take_validation_messages()
    assert any("VUID-VkBufferCreateInfo-size-00912" in m for m in messages), messages
    assert take_validation_messages() == []


def test_validation_from_environment(monkeypatch):
    """The runtime reads no environment; spirad's backend passes SPIRAD_VALIDATION."""
    import spirad as sd
    import spirad.runtime.state as st
    monkeypatch.setenv("SPIRAD_VALIDATION", "0")
    with VulkanRuntime() as rt:
        assert not rt.validation
    with VulkanRuntime(validation=True) as rt:
        assert rt.validation
    for flag in ("1", "0"):
        monkeypatch.setenv("SPIRAD_VALIDATION", flag)
        sd.init(arch=sd.vulkan)
        assert st.backend().rt.validation == (flag == "1")
    sd.init(arch=sd.cpu)


def test_device_selection(monkeypatch):
    with VulkanRuntime() as rt:
        name = rt.caps.name
    with VulkanRuntime(device="0") as rt:
        assert rt.caps.name
    with VulkanRuntime(device=name.split()[0].upper()) as rt:  # substring, case-insensitive
        assert rt.caps.name == name
    with pytest.raises(GfxUnavailable, match="no Vulkan device matches 'no-such-gpu'.*available"):
        VulkanRuntime(device="no-such-gpu")
    # the runtime reads no environment: spirad passes SPIRAD_VULKAN_DEVICE (spirad.options)
    monkeypatch.setenv("SPIRAD_VULKAN_DEVICE", "no-such-gpu")
    with VulkanRuntime() as rt:
        assert rt.caps.name == name
    import spirad as sd
    import spirad.runtime.state as st
    from kernel_ir.errors import SpiradArchError
    with pytest.raises(SpiradArchError, match="no-such-gpu.*SPIRAD_VULKAN_DEVICE"):
        sd.init(arch=sd.vulkan)
        st.backend()
    sd.init(arch=sd.cpu)
