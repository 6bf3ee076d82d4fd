"""What wgpu-py 0.32 (wgpu-native 29) does with a binding array of storage buffers on an adapter
that offers them (Mesa 25's lavapipe), printed as one JSON line: the evidence behind docs/metal.md,
"Binding arrays", checked by test_binding_arrays.py.

    VK_ICD_FILENAMES=... python -m tests.metal.binding_array_probe     (tests/support/lavapipe25.py)

It measures, on one adapter:

* `features`: the adapter's binding-array features;
* `device_limit`: `max-binding-array-elements-per-shader-stage` of a device asked for 1,000
  through wgpu-py's `required_limits` (wgpu-py 0.32 never passes that native limit: 0);
* `spirv`: a compute module whose set 1 is a binding array of 40 f32 storage buffers, declared
  as Vulkan SPIR-V declares one (OpTypeArray of a Block struct, StorageBuffer class): spirv-val's
  verdict, then whether naga's SPIR-V front end (the route spirad's modules take into wgpu)
  accepts it;
* `wgsl`: the same kernel as WGSL (`binding_array<B, 40>`), with the three things wgpu-py 0.32
  lacks done through its cffi handles (the device limit, the layout entry's count, the bind
  group's buffer list): the values it computes, each read from buffers 7 and 39 of the array.

The SPIR-V and WGSL kernels compute out[i] = a[7][i] + a[39][i] + args.x and store it into a[0].
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

N = 40      # buffers in the array: past the 31 storage buffers of an M1's table
ELEMS = 16  # f32 per buffer
ARG = 100   # args.x

SPIRV_ASM = f"""
OpCapability Shader
OpMemoryModel Logical GLSL450
OpEntryPoint GLCompute %main "main" %gid
OpExecutionMode %main LocalSize 1 1 1
OpDecorate %gid BuiltIn GlobalInvocationId
OpDecorate %rta ArrayStride 4
OpDecorate %blk Block
OpMemberDecorate %blk 0 Offset 0
OpDecorate %uarr ArrayStride 16
OpDecorate %ublk Block
OpMemberDecorate %ublk 0 Offset 0
OpDecorate %args DescriptorSet 0
OpDecorate %args Binding 0
OpDecorate %out DescriptorSet 0
OpDecorate %out Binding 1
OpDecorate %nds DescriptorSet 1
OpDecorate %nds Binding 0
%void = OpTypeVoid
%fn = OpTypeFunction %void
%u32 = OpTypeInt 32 0
%i32 = OpTypeInt 32 1
%f32 = OpTypeFloat 32
%v3u = OpTypeVector %u32 3
%v4u = OpTypeVector %u32 4
%pin = OpTypePointer Input %v3u
%gid = OpVariable %pin Input
%rta = OpTypeRuntimeArray %f32
%blk = OpTypeStruct %rta
%cn = OpConstant %u32 {N}
%arr = OpTypeArray %blk %cn
%parr = OpTypePointer StorageBuffer %arr
%nds = OpVariable %parr StorageBuffer
%pblk = OpTypePointer StorageBuffer %blk
%out = OpVariable %pblk StorageBuffer
%c1u = OpConstant %u32 1
%uarr = OpTypeArray %v4u %c1u
%ublk = OpTypeStruct %uarr
%pu = OpTypePointer Uniform %ublk
%args = OpVariable %pu Uniform
%pf = OpTypePointer StorageBuffer %f32
%puu = OpTypePointer Uniform %u32
%c0 = OpConstant %i32 0
%c7 = OpConstant %i32 7
%clast = OpConstant %i32 {N - 1}
%main = OpFunction %void None %fn
%l = OpLabel
%g = OpLoad %v3u %gid
%x = OpCompositeExtract %u32 %g 0
%xi = OpBitcast %i32 %x
%pa = OpAccessChain %puu %args %c0 %c0 %c0
%a = OpLoad %u32 %pa
%af = OpConvertUToF %f32 %a
%p7 = OpAccessChain %pf %nds %c7 %c0 %xi
%v7 = OpLoad %f32 %p7
%pl = OpAccessChain %pf %nds %clast %c0 %xi
%vl = OpLoad %f32 %pl
%s = OpFAdd %f32 %v7 %vl
%s2 = OpFAdd %f32 %s %af
%po = OpAccessChain %pf %out %c0 %xi
OpStore %po %s2
%p0 = OpAccessChain %pf %nds %c0 %c0 %xi
OpStore %p0 %s2
OpReturn
OpFunctionEnd
"""

WGSL = f"""
struct B {{ d: array<f32> }};
struct A {{ w: vec4<u32> }};
@group(0) @binding(0) var<uniform> args: A;
@group(0) @binding(1) var<storage, read_write> o: B;
@group(1) @binding(0) var<storage, read_write> nds: binding_array<B, {N}>;
@compute @workgroup_size(1) fn main(@builtin(global_invocation_id) g: vec3<u32>) {{
    let i = g.x;
    let s = nds[7].d[i] + nds[{N - 1}].d[i] + f32(args.w.x);
    o.d[i] = s;
    nds[0].d[i] = s;
}}
"""


def _spirv_words() -> tuple[bytes, str]:
    """The SPIR-V module assembled, and spirv-val's verdict ('valid' or its message)."""
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "k.spvasm"), os.path.join(d, "k.spv")
        with open(src, "w") as f:
            f.write(SPIRV_ASM)
        subprocess.run(["spirv-as", "--target-env", "vulkan1.1", src, "-o", out], check=True)
        v = subprocess.run(["spirv-val", "--target-env", "vulkan1.1", out],
                           capture_output=True, text=True)
        with open(out, "rb") as f:
            return f.read(), "valid" if v.returncode == 0 else (v.stdout + v.stderr).strip()


def _device(adapter, binding_array_elements: int):
    """A device with both binding-array features and `binding_array_elements` as its
    max-binding-array-elements-per-shader-stage: wgpu-py 0.32 leaves that native limit at 0
    (its `request_device` marks it 'not used'), so it is set in the native-limits struct that
    wgpu-py builds."""
    from wgpu.backends.wgpu_native import _api
    made = _api.new_struct_p

    def with_limit(ctype, **kw):
        if ctype == "WGPUNativeLimits *" and binding_array_elements:
            kw["maxBindingArrayElementsPerShaderStage"] = binding_array_elements
        return made(ctype, **kw)
    _api.new_struct_p = with_limit
    try:
        return adapter.request_device_sync(
            required_features=["buffer-binding-array", "storage-resource-binding-array"],
            required_limits={"max-binding-array-elements-per-shader-stage": 1000})
    finally:
        _api.new_struct_p = made


def _array_layout(device):
    """Bind group layout 1: binding 0, an array of N read-write storage buffers (the count goes
    in wgpu-native's layout-entry extras; wgpu-py 0.32 sets none)."""
    from wgpu.backends.wgpu_native import _api
    from wgpu.backends.wgpu_native._ffi import ffi, lib
    ext = ffi.new("WGPUBindGroupLayoutEntryExtras *")
    ext.chain.sType = lib.WGPUSType_BindGroupLayoutEntryExtras
    ext.count = N
    e = ffi.new("WGPUBindGroupLayoutEntry[1]")
    e[0].nextInChain = ffi.cast("WGPUChainedStruct *", ext)
    e[0].binding, e[0].visibility = 0, lib.WGPUShaderStage_Compute
    e[0].buffer.type = lib.WGPUBufferBindingType_Storage
    desc = ffi.new("WGPUBindGroupLayoutDescriptor *")
    desc.entryCount, desc.entries = 1, e
    keep = (ext, e, desc)  # alive until the call returns
    h = lib.wgpuDeviceCreateBindGroupLayout(device._internal, desc)
    del keep
    return _api.GPUBindGroupLayout("binding array", h, device)


def _array_group(device, layout, buffers):
    """Bind group 1: the whole buffers, as wgpu-native's bind-group-entry extras list them."""
    from wgpu.backends.wgpu_native import _api
    from wgpu.backends.wgpu_native._ffi import ffi, lib
    handles = ffi.new("WGPUBuffer[]", [b._internal for b in buffers])
    ext = ffi.new("WGPUBindGroupEntryExtras *")
    ext.chain.sType = lib.WGPUSType_BindGroupEntryExtras
    ext.buffers, ext.bufferCount = handles, len(buffers)
    e = ffi.new("WGPUBindGroupEntry[1]")
    e[0].nextInChain = ffi.cast("WGPUChainedStruct *", ext)
    e[0].binding, e[0].size = 0, 0  # size 0: each buffer whole
    desc = ffi.new("WGPUBindGroupDescriptor *")
    desc.layout, desc.entryCount, desc.entries = layout._internal, 1, e
    keep = (handles, ext, e, desc)
    h = lib.wgpuDeviceCreateBindGroup(device._internal, desc)
    del keep
    return _api.GPUBindGroup("binding array", h, device)


def _run(device, module):
    """Dispatch `module` over N buffers holding k in buffer k: (out, buffer 0) as lists."""
    import wgpu
    use = wgpu.BufferUsage
    bufs = [device.create_buffer(size=4 * ELEMS, usage=use.STORAGE | use.COPY_DST | use.COPY_SRC)
            for _ in range(N)]
    for k, b in enumerate(bufs):
        device.queue.write_buffer(b, 0, np.full(ELEMS, k, np.float32).tobytes())
    out = device.create_buffer(size=4 * ELEMS, usage=use.STORAGE | use.COPY_SRC)
    args = device.create_buffer(size=256, usage=use.UNIFORM | use.COPY_DST)
    device.queue.write_buffer(args, 0, np.array([ARG, 0, 0, 0], np.uint32).tobytes())
    bgl0 = device.create_bind_group_layout(entries=[
        {"binding": 0, "visibility": wgpu.ShaderStage.COMPUTE,
         "buffer": {"type": "uniform", "has_dynamic_offset": True}},
        {"binding": 1, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": "storage"}}])
    bgl1 = _array_layout(device)
    pipe = device.create_compute_pipeline(
        layout=device.create_pipeline_layout(bind_group_layouts=[bgl0, bgl1]),
        compute={"module": module, "entry_point": "main"})
    bg0 = device.create_bind_group(layout=bgl0, entries=[
        {"binding": 0, "resource": {"buffer": args, "offset": 0, "size": 16}},
        {"binding": 1, "resource": {"buffer": out, "offset": 0, "size": 4 * ELEMS}}])
    enc = device.create_command_encoder()
    cp = enc.begin_compute_pass()
    cp.set_pipeline(pipe)
    cp.set_bind_group(0, bg0, [0])
    cp.set_bind_group(1, _array_group(device, bgl1, bufs))
    cp.dispatch_workgroups(ELEMS)
    cp.end()
    device.queue.submit([enc.finish()])
    read = lambda b: np.frombuffer(device.queue.read_buffer(b), np.float32).tolist()  # noqa: E731
    return read(out), read(bufs[0])


def main() -> None:
    import wgpu
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    res = {"adapter": str(adapter.info.get("description", "")),
           "features": sorted(f for f in adapter.features if "binding-array" in f)}
    plain = _device(adapter, 0)
    res["device_limit"] = int(plain.limits["max-binding-array-elements-per-shader-stage"])
    words, res["spirv_val"] = _spirv_words()
    try:
        plain.create_shader_module(code=words)
        res["spirv"] = "accepted"
    except Exception as e:  # wgpu's validation error: naga's message
        res["spirv"] = str(e)
    device = _device(adapter, 1000)
    res["wgsl_device_limit"] = int(device.limits["max-binding-array-elements-per-shader-stage"])
    res["wgsl"] = _run(device, device.create_shader_module(code=WGSL))
    print(json.dumps(res))


if __name__ == "__main__":
    sys.exit(main())
