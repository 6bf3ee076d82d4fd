"""Compute pipelines: shader module, descriptor-set layout, pipeline layout, pipeline, cache.

Why apart: pipeline creation is the slow, once-per-kernel step (lavapipe compiles the shader
with LLVM here), so it is cached, while everything per-launch lives in `commands.py`.

Binding model (shared with the code generator): set 0 holds `num_bindings` storage buffers at
bindings 0..num_bindings-1, all visible to the compute stage; an optional push-constant range of
`push_constant_bytes` bytes at offset 0. A pipeline made with `arguments=True` declares binding 0
a dynamic storage buffer instead (its argument block, bound at an offset per dispatch:
`arguments.py`); the shader sees a storage buffer either way. Set layouts are shared by every
pipeline with the same (binding count, arguments) and pipeline layouts by every pipeline with the
same (bindings, push-constant bytes, arguments), so a descriptor set built for one kernel is reused by another kernel over the same
buffers, and consecutive kernels with compatible layouts skip rebinding.
"""

from __future__ import annotations

from ..errors import GfxDeviceError

from .instance import ffi, lib, vk
from .vkresult import check

SPIRV_MAGIC = 0x07230203


class Pipeline:
    """A compiled compute pipeline. `layout` and `set_layout` are shared, not owned."""
    __slots__ = ("handle", "module", "layout", "set_layout", "num_bindings",
                 "push_constant_bytes", "key", "entry_point", "arguments")

    def __init__(self, handle, module, layout, set_layout, num_bindings, push_constant_bytes,
                 key, entry_point, arguments=False):
        self.handle = handle
        self.module = module
        self.layout = layout
        self.set_layout = set_layout
        self.num_bindings = num_bindings
        self.push_constant_bytes = push_constant_bytes
        self.key = key
        self.entry_point = entry_point
        self.arguments = arguments  # binding 0 is an argument block given per dispatch

    def __repr__(self) -> str:
        return (f"<Pipeline {self.entry_point!r}, {self.num_bindings} bindings, "
                f"{self.push_constant_bytes} push-constant bytes>")


class PipelineFactory:
    """Creates pipelines and owns the shared layouts; `destroy()` releases everything."""

    def __init__(self, device, caps):
        self.device = device
        self.caps = caps
        self.set_layouts: dict[tuple[int, bool], object] = {}
        self.layouts: dict[tuple[int, int, bool], object] = {}
        self.pipelines: dict[object, Pipeline] = {}

    def check_limits(self, num_bindings: int, push_constant_bytes: int) -> None:
        caps = self.caps
        if num_bindings < 0:
            raise ValueError(f"num_bindings must be >= 0, got {num_bindings}")
        if num_bindings > caps.max_per_stage_storage_buffers:
            raise GfxDeviceError(
                f"kernel needs {num_bindings} storage buffers but the Vulkan device "
                f"{caps.name!r} allows at most {caps.max_per_stage_storage_buffers} per shader "
                "stage (maxPerStageDescriptorStorageBuffers); use fewer ndarray arguments")
        if push_constant_bytes < 0 or push_constant_bytes % 4:
            raise ValueError(f"push_constant_bytes must be a non-negative multiple of 4, "
                             f"got {push_constant_bytes}")
        if push_constant_bytes > caps.max_push_constants_size:
            raise GfxDeviceError(
                f"kernel needs {push_constant_bytes} bytes of push constants but the Vulkan "
                f"device {caps.name!r} allows at most {caps.max_push_constants_size} "
                "(maxPushConstantsSize)")

    def set_layout(self, num_bindings: int, arguments: bool = False):
        layout = self.set_layouts.get((num_bindings, arguments))
        if layout is None:
            bindings = ffi.new("VkDescriptorSetLayoutBinding[]", max(num_bindings, 1))
            for i in range(num_bindings):
                bindings[i].binding = i
                bindings[i].descriptorType = (vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC
                                              if arguments and i == 0 else
                                              vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER)
                bindings[i].descriptorCount = 1
                bindings[i].stageFlags = vk.VK_SHADER_STAGE_COMPUTE_BIT
            info = ffi.new("VkDescriptorSetLayoutCreateInfo*")
            info.sType = vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO
            info.bindingCount = num_bindings
            info.pBindings = bindings
            out = ffi.new("VkDescriptorSetLayout*")
            check(lib.vkCreateDescriptorSetLayout(self.device, info, ffi.NULL, out),
                  "vkCreateDescriptorSetLayout")
            layout = self.set_layouts[(num_bindings, arguments)] = out[0]
        return layout

    def pipeline_layout(self, num_bindings: int, push_constant_bytes: int,
                        arguments: bool = False):
        key = (num_bindings, push_constant_bytes, arguments)
        layout = self.layouts.get(key)
        if layout is None:
            set_layouts = ffi.new("VkDescriptorSetLayout[1]",
                                  [self.set_layout(num_bindings, arguments)])
            pc_range = ffi.new("VkPushConstantRange*")
            pc_range.stageFlags = vk.VK_SHADER_STAGE_COMPUTE_BIT
            pc_range.offset = 0
            pc_range.size = push_constant_bytes
            info = ffi.new("VkPipelineLayoutCreateInfo*")
            info.sType = vk.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO
            info.setLayoutCount = 1
            info.pSetLayouts = set_layouts
            if push_constant_bytes:
                info.pushConstantRangeCount = 1
                info.pPushConstantRanges = pc_range
            out = ffi.new("VkPipelineLayout*")
            check(lib.vkCreatePipelineLayout(self.device, info, ffi.NULL, out),
                  "vkCreatePipelineLayout")
            layout = self.layouts[key] = out[0]
        return layout

    def get(self, spirv: bytes, num_bindings: int, push_constant_bytes: int, key,
            entry_point: str, arguments: bool = False, specialization=()) -> Pipeline:
        """The cached pipeline for `key`, else a new one (`key` must identify the SPIR-V,
        `arguments` and `specialization`: (SpecId, u32 value) pairs)."""
        pipeline = self.pipelines.get(key)
        if pipeline is not None:
            return pipeline
        self.check_limits(num_bindings, push_constant_bytes)
        if arguments and not num_bindings:
            raise ValueError("a pipeline with an argument block needs binding 0 for it")
        code = bytes(spirv)
        if len(code) % 4 or len(code) < 20 or int.from_bytes(code[:4], "little") != SPIRV_MAGIC:
            raise ValueError("not a little-endian SPIR-V module (bad length or magic number)")
        layout = self.pipeline_layout(num_bindings, push_constant_bytes, arguments)

        words = ffi.new("uint32_t[]", len(code) // 4)
        ffi.memmove(words, code, len(code))
        module_info = ffi.new("VkShaderModuleCreateInfo*")
        module_info.sType = vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO
        module_info.codeSize = len(code)
        module_info.pCode = words
        module = ffi.new("VkShaderModule*")
        check(lib.vkCreateShaderModule(self.device, module_info, ffi.NULL, module),
              "vkCreateShaderModule")

        name = ffi.new("char[]", entry_point.encode())
        info = ffi.new("VkComputePipelineCreateInfo*")
        info.sType = vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO
        info.stage.sType = vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO
        info.stage.stage = vk.VK_SHADER_STAGE_COMPUTE_BIT
        info.stage.module = module[0]
        info.stage.pName = name
        if specialization:  # 32-bit scalar constants, packed in SpecId order of the pairs
            n = len(specialization)
            entries = ffi.new("VkSpecializationMapEntry[]", n)
            data = ffi.new("uint32_t[]", [v & 0xFFFFFFFF for _, v in specialization])
            for i, (sid, _) in enumerate(specialization):
                entries[i].constantID = sid
                entries[i].offset = 4 * i
                entries[i].size = 4
            spec = ffi.new("VkSpecializationInfo*")
            spec.mapEntryCount = n
            spec.pMapEntries = entries
            spec.dataSize = 4 * n
            spec.pData = data
            info.stage.pSpecializationInfo = spec
        info.layout = layout
        handle = ffi.new("VkPipeline*")
        result = lib.vkCreateComputePipelines(self.device, ffi.NULL, 1, info, ffi.NULL, handle)
        if result != 0:
            lib.vkDestroyShaderModule(self.device, module[0], ffi.NULL)
            check(result, "vkCreateComputePipelines")
        pipeline = Pipeline(handle[0], module[0], layout, self.set_layout(num_bindings, arguments),
                            num_bindings, push_constant_bytes, key, entry_point, arguments)
        self.pipelines[key] = pipeline
        return pipeline

    def destroy(self) -> None:
        for p in self.pipelines.values():
            lib.vkDestroyPipeline(self.device, p.handle, ffi.NULL)
            lib.vkDestroyShaderModule(self.device, p.module, ffi.NULL)
        for layout in self.layouts.values():
            lib.vkDestroyPipelineLayout(self.device, layout, ffi.NULL)
        for layout in self.set_layouts.values():
            lib.vkDestroyDescriptorSetLayout(self.device, layout, ffi.NULL)
        self.pipelines.clear()
        self.layouts.clear()
        self.set_layouts.clear()
