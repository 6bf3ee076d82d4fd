"""Target profiles of the SPIR-V emitter: what the consumer of a module accepts.

The same lowering serves Vulkan drivers and wgpu/naga (which translates SPIR-V to MSL for Metal).
naga accepts a narrower subset, measured with wgpu 0.32 / naga 29 on spirad's modules:

* `OpAtomicCompareExchange` makes naga panic or reject the module. The Metal profile has no CAS:
  the first error wins the status words through an atomic-add *ticket* (`STATUS_TICKET_WORD`;
  the invocation that draws ticket 0 writes the code and its words), float atomic add needs
  SPV_EXT_shader_atomic_float_add (wgpu's `shader-float32-atomic`), and an atomic add that would
  need a CAS loop (f64, i64 without 64-bit atomics) is a compile error.
* NaN / Inf as `OpConstant` fail naga's validator: the Metal profile makes them by bitcasting an
  integer constant inside the function.
* 64-bit values joined from / split into two 32-bit words by a *vector* bitcast are mistyped by
  naga; both profiles use shifts and OR on a 64-bit integer instead (`Emitter.join64/split64`).
* Metal has no f64: a kernel using it is rejected before code generation (`spirad.backends.metal`).
* wgpu on Metal gives a pipeline 31 buffer-argument-table entries per stage, of which a spirad
  pipeline may spend 28 on storage buffers (`gfx_runtime/wgpu/caps.py`; the device's count, not
  a profile constant). The Metal profile spends few: the arguments are a *uniform* buffer
  (binding 0; an array of uvec4 with std140 stride 16, read at constant indices), and both
  adstack heaps share one buffer whose row is the float row (stride_float bytes) followed by
  the int row (stride_int bytes), so a task with adstacks binds meta + one heap
  (`adstack_buffers`).

`spirv_codegen.metal_check` proves these properties on every finished module.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    compare_exchange: bool = True     # OpAtomicCompareExchange allowed (status, CAS float atomics)
    float_specials_by_bitcast: bool = False  # NaN / Inf made by OpBitcast of an int constant
    f64: bool = True                  # the target may have f64 at all
    args_uniform: bool = False        # binding 0 (arguments) is a uniform buffer, not storage
    single_heap: bool = False         # both adstack heaps in one buffer (rows of sf + si bytes)
    float_controls: bool = True       # SignedZeroInfNanPreserve may be declared (naga refuses it)
    opaque_float_operands: bool = False  # no float controls: arithmetic kept from folding specials
    # root offsets as specialization constants (SpecId = their argument word), constants to the
    # driver's compiler, instead of argument words read at run time (`buffers.py`)
    spec_root_offsets: bool = True

    @property
    def uniform_bindings(self) -> tuple:
        """Binding numbers of uniform (not storage) buffers in every module of this profile."""
        return (0,) if self.args_uniform else ()

    def adstack_buffers(self) -> int:
        """How many buffers a task with adstacks binds beyond its arrays: meta and heap(s)."""
        return 2 if self.single_heap else 3


VULKAN = Profile("vulkan")
METAL = Profile("metal", compare_exchange=False, float_specials_by_bitcast=True, f64=False,
                args_uniform=True, single_heap=True,
                float_controls=False, opaque_float_operands=True, spec_root_offsets=False)
