"""What the LLVM code generator needs to know about the machine it emits for.

One IR, several machines: the CPU JIT, NVIDIA GPUs (NVPTX -> PTX), AMD GPUs (AMDGPU -> HSA code
object) and the CPU emulation of the GPU lowering. They differ in exactly these points, which the
lowering rules ask the `Target` about and nothing else:

* kernel entry (`entry`): 'cpu' is the CPU task function `(bufs, args, begin, end, worker)` that
  loops over [begin, end) (`llvm_codegen.cpu_program`). 'grid' is the GPU kernel
  `(bufs, args, begin, end, nthreads, block)`: thread `tid = group_id * block + local_id` of a
  grid of `nthreads` threads runs the iterations begin + tid, begin + tid + nthreads, ...
  (grid-stride), and `tid` is its adstack heap row (the heaps have `nthreads` rows); a serial
  task runs on thread 0 only. `thread_id` says where tid comes from: 'nvptx' / 'amdgpu'
  intrinsics, or 'param' (emulation: the grid kernel gets `tid` as a seventh argument and a CPU
  driver loops over the threads, see `device_codegen`).
* address spaces: AMDGPU puts private memory (allocas) in address space 5; every alloca is made
  there and cast to a flat pointer (`alloca_addrspace`).
* math: calls that the target cannot select are renamed (`math`): 'libm' (CPU: LLVM intrinsics
  and the C library), 'libdevice' (`__nv_sinf`, linked from libdevice.10.bc), 'ocml'
  (`__ocml_sin_f32`, linked from the ROCm device libraries).
* atomics: `atomic_scope` is the syncscope of every atomicrmw / cmpxchg ('' = system scope, the
  CPU's); `fadd_metadata` adds `!amdgpu.no.fine.grained.memory` / `!amdgpu.ignore.denormal.mode`
  so AMDGPU selects a native float atomic add instead of a CAS loop (off by default: spirad's
  AMDGPU buffers are managed, fine-grained memory, where the native instruction is not safe).

The data layout of a target is its LLVM TargetMachine's (`device_codegen.data_layout`).
`CPU` keeps the CPU output exactly as it was before targets existed (a test compares the IR).
"""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Target:
    name: str                 # 'cpu', 'sm_80', 'gfx90a', 'emu-cuda', ...
    arch: str                 # 'cpu' | 'nvptx' | 'amdgpu'  (the LLVM backend that emits it)
    triple: str = ""          # '' = the host's
    cpu: str = ""             # processor: 'sm_80', 'gfx90a'; '' = host
    entry: str = "cpu"        # 'cpu' | 'grid'
    thread_id: str = ""       # 'nvptx' | 'amdgpu' | 'param' (entry 'grid' only)
    alloca_addrspace: int = 0
    math: str = "libm"        # 'libm' | 'libdevice' | 'ocml'
    atomic_scope: str = ""    # LLVM syncscope name; '' = system
    fadd_metadata: bool = False
    kernel_cc: str = ""       # calling convention of a kernel entry ('' = C)

    @property
    def is_gpu_entry(self) -> bool:
        return self.entry == "grid"

    def ordering(self, order: str = "monotonic") -> str:
        """The ordering text of an atomic instruction (with this target's syncscope)."""
        return f'syncscope("{self.atomic_scope}") {order}' if self.atomic_scope else order


CPU = Target("cpu", "cpu")


def nvptx(sm: str) -> Target:
    return Target(sm, "nvptx", "nvptx64-nvidia-cuda", sm, "grid", "nvptx", 0, "libdevice",
                  "", False, "ptx_kernel")


def amdgpu(gfx: str) -> Target:
    return Target(gfx, "amdgpu", "amdgcn-amd-amdhsa", gfx, "grid", "amdgpu", 5, "ocml", "agent",
                  False, "amdgpu_kernel")


def emulation(of: Target) -> Target:
    """The CPU JIT running `of`'s lowering: same entry, thread-to-row mapping, grid stride, heap
    layout and atomics (system scope: the host has no agent scope); host math."""
    return replace(of, name=f"emu-{of.name}", arch="cpu", triple="", cpu="", thread_id="param",
                   alloca_addrspace=0, math="libm", atomic_scope="", kernel_cc="")


TARGETS = {t.name: t for t in (CPU, nvptx("sm_80"), nvptx("sm_90"), amdgpu("gfx90a"),
                              amdgpu("gfx1100"))}
# which device targets each GPU arch's programs are emitted and assembled for
ARCH_TARGETS = {"cuda": ("sm_80", "sm_90"), "amdgpu": ("gfx90a", "gfx1100")}

# math functions the CPU lowers as LLVM intrinsics (the rest are C library calls); GPU targets
# rename both kinds to their device library
INTRINSIC_MATH = frozenset({"sin", "cos", "exp", "log", "pow"})


def math_symbol(target: Target, base: str, dtype_name: str) -> str:
    """Device library symbol of math function `base` for f32/f64 on a GPU target."""
    if target.math == "libdevice":
        return f"__nv_{base}{'f' if dtype_name == 'f32' else ''}"
    if target.math == "ocml":
        return f"__ocml_{base}_{dtype_name}"
    raise ValueError(f"target {target.name}: no device math library")
