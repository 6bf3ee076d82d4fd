"""Which CPU the CPU code is compiled for: the host (default), or a forced one, and what its
vector ISA and width are.

    spec = None                       # the host: its CPU name and every feature it has
    spec = "x86-64-v3"                # a processor name: AVX2 + FMA, no AVX-512 (LLVM's levels
                                      # x86-64, -v2, -v3, -v4, or any CPU name LLVM knows)
    spec = "-avx512f"                 # the host CPU with features turned off (or on: +feature)
    spec = "znver3,-avx2"             # both
    resolve(spec)     -> (cpu name, feature string) for `create_target_machine`
    isa(spec)         -> Isa("AVX2", 256): the widest float vector register of that target
    isa_of(triple, cpu, features)     # the same for any target LLVM can emit (aarch64: NEON)
    cross_machine(triple, cpu, features, opt)   # a TargetMachine for another architecture

`spirad.options` reads SPIRAD_CPU_TARGET (the spec) and hands it here; the code generator only
sees the width (`CodegenOptions.vector_bits`), the runtime the (cpu, features) pair. The JIT runs
the code on this machine, so a forced target must be one the host can run: `check` refuses a
target with wider vectors (AVX-512 code on an AVX2 host would stop on an illegal instruction).
The point of forcing one is to run, on a machine that has AVX-512, the code every AVX2 user gets
(CI: scripts/test.sh runs the CPU suites again with SPIRAD_CPU_TARGET=x86-64-v3).

The host's ISA is read from its feature list; a forced target's (or another architecture's) is
probed: a <16 x float> and an <8 x i32> add compiled to assembly, whose registers say it (zmm:
AVX-512, ymm integer add: AVX2, ymm: AVX, xmm: SSE; aarch64 `v0.4s`: NEON, 128 bits). ~10 ms,
once per target and process.
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import llvmlite.binding as llvm

_lock = threading.Lock()
_all_targets = []


@dataclass(frozen=True)
class Isa:
    name: str   # "AVX-512", "AVX2", "AVX", "SSE", "NEON", ...
    bits: int   # its widest float vector register

    def lanes(self, precision: str = "f32") -> int:
        """Values of `precision` ('f32' / 'f64') in one register."""
        return self.bits // (32 if precision == "f32" else 64)


def _native():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def parse(spec: str | None) -> tuple[str | None, dict]:
    """(CPU name or None, {feature: on}) of a SPIRAD_CPU_TARGET value."""
    name, feats = None, {}
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        if item[0] in "+-":
            if len(item) == 1:
                raise ValueError(f"SPIRAD_CPU_TARGET={spec!r}: a feature needs a name")
            feats[item[1:]] = item[0] == "+"
        elif name is None:
            name = item
        else:
            raise ValueError(f"SPIRAD_CPU_TARGET={spec!r}: two CPU names ({name}, {item}); give "
                             "one CPU name and features as +name / -name")
    return name, feats


@functools.lru_cache(maxsize=None)
def resolve(spec: str | None) -> tuple[str, str]:
    """(cpu, features) of `spec` for `create_target_machine`. The host's name and features when
    unset; a CPU name alone takes LLVM's features of that CPU; features alone change the host's."""
    _native()
    name, feats = parse(spec)
    if name is not None:
        return name, ",".join(f"{'+' if on else '-'}{f}" for f, on in feats.items())
    host = llvm.get_host_cpu_features()
    for f in feats:
        host.pop(f, None)
    # the changes last: LLVM applies the list in order, and `-avx` also turns off what needs it
    # (fma, avx2, vaes, ...) only where nothing later turns those on again
    extra = ",".join(f"{'+' if on else '-'}{f}" for f, on in feats.items())
    return llvm.get_host_cpu_name(), ",".join(x for x in (host.flatten(), extra) if x)


@functools.lru_cache(maxsize=None)
def host_isa() -> Isa:
    """The host's ISA, from its feature list (no compile)."""
    _native()
    feats = llvm.get_host_cpu_features()
    triple = llvm.get_process_triple()
    if triple.startswith(("aarch64", "arm64")):
        return Isa("NEON", 128)
    if not triple.startswith(("x86_64", "i386", "i686")):
        return Isa(triple.split("-")[0], 128)
    if feats.get("avx512f"):
        return Isa("AVX-512", 512)
    if feats.get("avx2"):
        return Isa("AVX2", 256)
    return Isa("AVX", 256) if feats.get("avx") else Isa("SSE", 128)


@functools.lru_cache(maxsize=None)
def cold_call_convention(triple: str = "") -> str:
    """The calling convention of the CPU code's cold error recorders (`lower_memory.status_helper`),
    '' for C: `preserve_allcc` on the targets whose LLVM backend has it (x86-64, AArch64); `triple`
    is the module's ('' for the host's, as `Target.triple`).

    Why: each default bounds check's failure path calls a recorder. Under the C convention that
    call clobbers every caller-saved register, so a loop holding a check carries, beside its hot
    path, a call across which the loop's live values must sit in the few callee-saved registers
    or on the stack; LLVM's register allocator then kept some of them spilled for the whole loop
    and reloaded them every iteration (`func_solve_init`'s Hessian rows: three stack reloads a
    row). A recorder that preserves the caller's registers leaves them where they are; it saves
    what it uses itself, on the error path only. Semantics are unchanged: the recorder writes
    the status words exactly as before."""
    triple = triple or llvm.get_process_triple()
    return "preserve_allcc" if triple.startswith(("x86_64", "aarch64", "arm64")) else ""


def isa(spec: str | None = None) -> Isa:
    """The ISA of the CPU code compiled for `spec` (None: the host)."""
    if not spec:
        return host_isa()
    return isa_of(llvm.get_process_triple(), *resolve(spec))


_PROBE = """
define <16 x float> @spirad_probe_f(<16 x float> %a, <16 x float> %b) {
  %c = fadd <16 x float> %a, %b
  ret <16 x float> %c
}
define <8 x i32> @spirad_probe_i(<8 x i32> %a, <8 x i32> %b) {
  %c = add <8 x i32> %a, %b
  ret <8 x i32> %c
}
"""


@functools.lru_cache(maxsize=None)
def isa_of(triple: str, cpu: str, features: str) -> Isa:
    """The ISA LLVM selects for (triple, cpu, features), probed from the assembly of two adds."""
    tm = cross_machine(triple, cpu, features, opt=2)
    mod = llvm.parse_assembly(_PROBE)
    mod.triple = triple
    mod.data_layout = str(tm.target_data)
    asm = tm.emit_assembly(mod)
    if triple.startswith(("aarch64", "arm64")):
        return Isa("NEON", 128)  # fixed-width vectors: NEON registers, SVE or not
    if not triple.startswith(("x86_64", "i386", "i686")):
        return Isa(triple.split("-")[0], 128)
    if "zmm" in asm:
        return Isa("AVX-512", 512)
    if "ymm" in asm:
        return Isa("AVX2", 256) if "vpaddd\t%ymm" in asm else Isa("AVX", 256)
    return Isa("SSE", 128)


def cross_machine(triple: str, cpu: str = "", features: str = "", opt: int = 3):
    """A TargetMachine for `triple` (any architecture this LLVM was built with: object code for
    another machine is emitted, never run)."""
    with _lock:
        if not _all_targets:
            _native()
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _all_targets.append(True)
    return llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=opt, codemodel="default")


def check(spec: str | None) -> Isa:
    """`spec`'s ISA; ValueError where its code would not run on this host (wider vectors)."""
    want = isa(spec)
    if spec:
        host = host_isa()
        if want.bits > host.bits or (want.name, host.name) in (("AVX2", "AVX"),):
            raise ValueError(f"SPIRAD_CPU_TARGET={spec!r} selects {want.name} ({want.bits}-bit "
                             f"vectors), which this CPU ({host.name}, {host.bits}-bit) cannot "
                             "run: force a target this machine can run (x86-64-v3: AVX2, "
                             "x86-64-v2 / x86-64: SSE)")
    return want


def describe(spec: str | None = None) -> str:
    """`znver3 (host), AVX2: 256-bit vectors, 8 f32 / 4 f64 lanes a register`."""
    cpu, _ = resolve(spec)
    i = isa(spec)
    who = f"{cpu} (SPIRAD_CPU_TARGET={spec})" if spec else f"{cpu} (host)"
    return f"{who}, {i.name}: {i.bits}-bit vectors, {i.lanes('f32')} f32 / {i.lanes('f64')} f64 " \
           "lanes a register"
