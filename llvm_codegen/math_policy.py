"""How the CPU codegen lowers math ops (sin, exp, atan2, ...): libm or `vecmath`.

    vecmath="auto"  (default) the scalar op stays a libm / intrinsic call and the call names
                    `vecmath`'s <W x T> body as its vector variant, so wherever LLVM vectorises
                    the loop it calls our vector body instead of W scalar libm calls;
                    the ops of `SCALAR_INLINE` (f32 atan2) are inlined as in "1"
    vecmath="1"     every op vecmath implements is inlined as its scalar body
    vecmath="0"     libm / intrinsics only (no variants)

(`CodegenOptions.vecmath`, from SPIRAD_CPU_VECMATH through `spirad.options`.)

Why the default is not "inline everywhere": measured by benchmarks/bench_vecmath.py, glibc's
scalar functions have a shorter latency than our bodies, which matters in a dependent scalar
chain (a loop-carried value through sin), while in every loop LLVM vectorises our vector bodies
are 2-25x faster than the scalarised libm calls (docs/vecmath.md has the numbers).
"""
from __future__ import annotations

SCALAR_INLINE = frozenset({("f32", "atan2")})
"""(precision, op) inlined as our scalar body under "auto" rather than called in libm: f32
atan2, whose body beats glibc's in docs/vecmath.md's map and run-time loop shapes (only a static
chain that LLVM unrolls and vectorises does better with the variant). glibc's `atan2f` (the
wrapper, `__atan2f_finite`, `atanf`) runs ~350 instructions a call, ours ~200: Genesis'
`kernel_substep_post` 7-13 % faster, its buffers bit-identical in free fall
(docs/performance.md, gfree). Results stay within BOUND_ULP (2.5 ulp)."""


def mode(name: str, precision: str, flag: str = "auto") -> str:
    """'inline', 'variant' or 'libm' for op `name` on `precision` ('f32' / 'f64') under the
    switch `flag` ('auto' / '1' / '0')."""
    from . import vecmath

    if flag == "0" or name not in vecmath.FUNCTIONS:
        return "libm"
    if precision == "f64" and name in vecmath.F64_MISSING:
        return "libm"
    if flag == "1" or (precision, name) in SCALAR_INLINE:
        return "inline"
    return "variant"


def vector_bits(bits: int | None = None) -> int:
    """The widest float vector register of the target: `bits` where given
    (`CodegenOptions.vector_bits`, from SPIRAD_CPU_TARGET), else the host's: 512 (AVX-512F),
    256 (AVX), else 128 (SSE, NEON) (`cpu_target.host_isa`)."""
    if bits:
        return bits
    from .cpu_target import host_isa
    return host_isa().bits


def lanes(precision: str, bits: int | None = None) -> int:
    """Values of `precision` in one such register (f32: 16 on AVX-512, 8 on AVX2, 4 on NEON)."""
    return vector_bits(bits) // (32 if precision == "f32" else 64)
