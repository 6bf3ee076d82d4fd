"""The switches of the CPU code generator, passed explicitly to `compile_tasks` (the code
generator never reads the environment; `spirad.options.llvm_codegen_options()` builds this from
the SPIRAD_CPU_* variables).

    spmd     range tasks may run in SIMD lanes where they qualify (`spmd.analyze`)
    lanes    the lane count of an SPMD task; None: `codegen.default_lanes`
    vecmath  'auto' | '1' | '0': how math ops lower (`math_policy.mode`)
    debug    print each task's lowering (lanes or scalar, and why) to stderr
    min_trips  a range task with constant bounds and fewer iterations stays scalar; None: two
             lane groups (lanes would add compile time and save nothing), 0: no such rule
    vector_bits  the widest float vector register of the CPU the code is compiled for (lanes
             and vector math variants follow it); None: the host's (`math_policy.vector_bits`;
             SPIRAD_CPU_TARGET forces another, `cpu_target`)
    huge_ir  a module whose LLVM IR text exceeds this many bytes gets a smaller register
             allocation budget (`machine_code`); 0: never
    large_ir  a module whose LLVM IR text exceeds this many bytes (and not `huge_ir`) is
             optimised at LLVM's speed level 2 instead of 3 (`machine_code`); 0: never
"""
from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class CodegenOptions:
    spmd: bool = True
    lanes: int | None = None
    vecmath: str = "auto"
    debug: bool = False
    min_trips: int | None = 0
    vector_bits: int | None = None
    huge_ir: int = 4_000_000
    large_ir: int = 500_000

    def key(self) -> tuple:
        """What changes the generated code (the offline-cache key; `debug` only prints).
        `huge_ir` and `large_ir` change the machine code, not what it computes: keyed too, so
        that a cached object is the one these settings compile."""
        return tuple(getattr(self, f.name) for f in fields(self) if f.name != "debug")
