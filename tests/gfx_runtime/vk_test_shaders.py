"""SPIR-V assembly of the small compute shaders the runtime tests run.

Each shader: set 0 bindings 0..N-1 are `uint`/`float` runtime arrays, a push-constant block
holds the scalars, local size 64, thread i = GlobalInvocationId.x guarded by i < n.
`assemble(name)` runs spirv-as (target vulkan1.1) and spirv-val and returns the module bytes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

_HEADER = """
               OpCapability Shader
               OpMemoryModel Logical GLSL450
               OpEntryPoint GLCompute %main "main" %gid
               OpExecutionMode %main LocalSize 64 1 1
               OpDecorate %gid BuiltIn GlobalInvocationId
               OpDecorate %arr_u ArrayStride 4
               OpDecorate %arr_f ArrayStride 4
               OpMemberDecorate %BufU 0 Offset 0
               OpDecorate %BufU Block
               OpMemberDecorate %BufF 0 Offset 0
               OpDecorate %BufF Block
{decorations}
       %void = OpTypeVoid
         %fn = OpTypeFunction %void
       %bool = OpTypeBool
       %uint = OpTypeInt 32 0
      %float = OpTypeFloat 32
     %v3uint = OpTypeVector %uint 3
  %ptr_in_v3 = OpTypePointer Input %v3uint
   %ptr_in_u = OpTypePointer Input %uint
        %gid = OpVariable %ptr_in_v3 Input
      %arr_u = OpTypeRuntimeArray %uint
      %arr_f = OpTypeRuntimeArray %float
       %BufU = OpTypeStruct %arr_u
       %BufF = OpTypeStruct %arr_f
  %ptr_buf_u = OpTypePointer StorageBuffer %BufU
  %ptr_buf_f = OpTypePointer StorageBuffer %BufF
   %ptr_sb_u = OpTypePointer StorageBuffer %uint
   %ptr_sb_f = OpTypePointer StorageBuffer %float
   %ptr_pc_u = OpTypePointer PushConstant %uint
   %ptr_pc_f = OpTypePointer PushConstant %float
     %uint_0 = OpConstant %uint 0
     %uint_1 = OpConstant %uint 1
{types}
       %main = OpFunction %void None %fn
      %entry = OpLabel
       %gx_p = OpAccessChain %ptr_in_u %gid %uint_0
          %i = OpLoad %uint %gx_p
{body}
               OpFunctionEnd
"""


def _binding(var: str, index: int) -> str:
    return (f"               OpDecorate {var} DescriptorSet 0\n"
            f"               OpDecorate {var} Binding {index}\n")


def _pc_block(members: list[str]) -> tuple[str, str]:
    decorations = "".join(f"               OpMemberDecorate %PC {k} Offset {4 * k}\n"
                          for k in range(len(members)))
    decorations += "               OpDecorate %PC Block\n"
    types = (f"         %PC = OpTypeStruct {' '.join(members)}\n"
             "     %ptr_pc = OpTypePointer PushConstant %PC\n"
             "         %pc = OpVariable %ptr_pc PushConstant\n")
    return decorations, types


def _guarded(n_member: int, work: str) -> str:
    return f"""
        %n_p = OpAccessChain %ptr_pc_u %pc %uint_{n_member}
          %n = OpLoad %uint %n_p
         %ok = OpULessThan %bool %i %n
               OpSelectionMerge %end None
               OpBranchConditional %ok %work %end
       %work = OpLabel
{work}
               OpBranch %end
        %end = OpLabel
               OpReturn"""


def _fill() -> str:
    # buf[i] = value   (bindings: buf:uint[]; push constants: {uint value, uint n})
    dec, types = _pc_block(["%uint", "%uint"])
    dec += _binding("%buf", 0)
    types += "        %buf = OpVariable %ptr_buf_u StorageBuffer\n"
    work = """        %v_p = OpAccessChain %ptr_pc_u %pc %uint_0
          %v = OpLoad %uint %v_p
        %dst = OpAccessChain %ptr_sb_u %buf %uint_0 %i
               OpStore %dst %v"""
    return _HEADER.format(decorations=dec, types=types, body=_guarded(1, work))


def _axpy() -> str:
    # y[i] = a * x[i] + y[i]   (bindings: x:float[], y:float[]; push constants: {float a, uint n})
    dec, types = _pc_block(["%float", "%uint"])
    dec += _binding("%x", 0) + _binding("%y", 1)
    types += ("          %x = OpVariable %ptr_buf_f StorageBuffer\n"
              "          %y = OpVariable %ptr_buf_f StorageBuffer\n")
    work = """        %a_p = OpAccessChain %ptr_pc_f %pc %uint_0
          %a = OpLoad %float %a_p
       %xi_p = OpAccessChain %ptr_sb_f %x %uint_0 %i
         %xi = OpLoad %float %xi_p
       %yi_p = OpAccessChain %ptr_sb_f %y %uint_0 %i
         %yi = OpLoad %float %yi_p
         %ax = OpFMul %float %a %xi
        %res = OpFAdd %float %ax %yi
               OpStore %yi_p %res"""
    return _HEADER.format(decorations=dec, types=types, body=_guarded(1, work))


def _add_one() -> str:
    # buf[i] += 1   (bindings: buf:uint[]; push constants: {uint n})
    dec, types = _pc_block(["%uint"])
    dec += _binding("%buf", 0)
    types += "        %buf = OpVariable %ptr_buf_u StorageBuffer\n"
    work = """        %p = OpAccessChain %ptr_sb_u %buf %uint_0 %i
          %v = OpLoad %uint %p
         %v1 = OpIAdd %uint %v %uint_1
               OpStore %p %v1"""
    return _HEADER.format(decorations=dec, types=types, body=_guarded(0, work))


def _copy_add() -> str:
    # dst[i] = src[i] + 1, no push constants: n = arrayLength(dst)
    dec = _binding("%src", 0) + _binding("%dst", 1)
    types = ("        %src = OpVariable %ptr_buf_u StorageBuffer\n"
             "        %dst = OpVariable %ptr_buf_u StorageBuffer\n")
    body = """          %n = OpArrayLength %uint %dst 0
         %ok = OpULessThan %bool %i %n
               OpSelectionMerge %end None
               OpBranchConditional %ok %work %end
       %work = OpLabel
        %s_p = OpAccessChain %ptr_sb_u %src %uint_0 %i
          %s = OpLoad %uint %s_p
         %s1 = OpIAdd %uint %s %uint_1
        %d_p = OpAccessChain %ptr_sb_u %dst %uint_0 %i
               OpStore %d_p %s1
               OpBranch %end
        %end = OpLabel
               OpReturn"""
    return _HEADER.format(decorations=dec, types=types, body=body)


def _atomic_add_i64() -> str:
    # atomicAdd(buf[0], uint64(i) + 2**32) for every i < n   (bindings: buf:uint64[];
    # push constants: {uint n}). Needs shaderInt64 and shaderBufferInt64Atomics; the addend
    # crosses 32 bits so a 32-bit atomic would give a different sum.
    return """
               OpCapability Shader
               OpCapability Int64
               OpCapability Int64Atomics
               OpMemoryModel Logical GLSL450
               OpEntryPoint GLCompute %main "main" %gid
               OpExecutionMode %main LocalSize 64 1 1
               OpDecorate %gid BuiltIn GlobalInvocationId
               OpDecorate %arr_l ArrayStride 8
               OpMemberDecorate %BufL 0 Offset 0
               OpDecorate %BufL Block
               OpDecorate %buf DescriptorSet 0
               OpDecorate %buf Binding 0
               OpMemberDecorate %PC 0 Offset 0
               OpDecorate %PC Block
       %void = OpTypeVoid
         %fn = OpTypeFunction %void
       %bool = OpTypeBool
       %uint = OpTypeInt 32 0
      %ulong = OpTypeInt 64 0
     %v3uint = OpTypeVector %uint 3
  %ptr_in_v3 = OpTypePointer Input %v3uint
   %ptr_in_u = OpTypePointer Input %uint
        %gid = OpVariable %ptr_in_v3 Input
      %arr_l = OpTypeRuntimeArray %ulong
       %BufL = OpTypeStruct %arr_l
  %ptr_buf_l = OpTypePointer StorageBuffer %BufL
   %ptr_sb_l = OpTypePointer StorageBuffer %ulong
        %buf = OpVariable %ptr_buf_l StorageBuffer
         %PC = OpTypeStruct %uint
     %ptr_pc = OpTypePointer PushConstant %PC
   %ptr_pc_u = OpTypePointer PushConstant %uint
         %pc = OpVariable %ptr_pc PushConstant
     %uint_0 = OpConstant %uint 0
     %device = OpConstant %uint 1
    %relaxed = OpConstant %uint 0
   %ulong_hi = OpConstant %ulong 4294967296
       %main = OpFunction %void None %fn
      %entry = OpLabel
       %gx_p = OpAccessChain %ptr_in_u %gid %uint_0
          %i = OpLoad %uint %gx_p
        %n_p = OpAccessChain %ptr_pc_u %pc %uint_0
          %n = OpLoad %uint %n_p
         %ok = OpULessThan %bool %i %n
               OpSelectionMerge %end None
               OpBranchConditional %ok %work %end
       %work = OpLabel
         %il = OpUConvert %ulong %i
        %val = OpIAdd %ulong %il %ulong_hi
          %p = OpAccessChain %ptr_sb_l %buf %uint_0 %uint_0
        %old = OpAtomicIAdd %ulong %p %device %relaxed %val
               OpBranch %end
        %end = OpLabel
               OpReturn
               OpFunctionEnd
"""


SOURCES = {"fill": _fill, "axpy": _axpy, "add_one": _add_one, "copy_add": _copy_add,
           "atomic_add_i64": _atomic_add_i64}
LOCAL_SIZE = 64


def tools_available() -> bool:
    return shutil.which("spirv-as") is not None and shutil.which("spirv-val") is not None


def assemble(name: str) -> bytes:
    """Assemble SOURCES[name] for Vulkan 1.1 and validate it; returns SPIR-V bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, f"{name}.spvasm")
        out = os.path.join(tmp, f"{name}.spv")
        with open(src, "w") as f:
            f.write(SOURCES[name]())
        subprocess.run(["spirv-as", "--target-env", "vulkan1.1", src, "-o", out],
                       check=True, capture_output=True, text=True)
        subprocess.run(["spirv-val", "--target-env", "vulkan1.1", out],
                       check=True, capture_output=True, text=True)
        with open(out, "rb") as f:
            return f.read()
