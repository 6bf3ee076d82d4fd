"""Every `SPIRAD_*` environment variable, declared and read in this one module (engineering 16, as
Triton's `knobs.py`).

`SWITCHES` is the table: name, kind, default and what it does. docs/errors_and_environment.md
shows it (`python -m spirad.options` prints the markdown; a test checks the two agree), and
`tests/architecture/test_options.py` fails if any module of the project reads a `SPIRAD_*`
variable anywhere else.

    from spirad import options
    options.get("SPIRAD_VERIFY")          # -> bool, parsed; the default when unset

The value is read when asked for, so a variable set before the call that uses it applies (tests
set them with monkeypatch). Code generators and runtimes never read the environment: the
backends hand them what they need explicitly — `llvm_codegen_options()` for the CPU code
generator, the validation flag and device selector for the Vulkan runtime, tool paths for the
device assemblers and the SPIR-V validator (`tool_paths()`).

Variables the test suite reads for itself (SPIRAD_REQUIRE_ARCHS, ...) are listed in `TEST_SWITCHES`
for the documentation; tests read them directly.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Switch:
    name: str
    kind: str        # "flag" (on unless 0/false/no/off), "off" (0 turns it off), "path", "str", "int",
    default: object  # "choice"
    doc: str
    choices: tuple = ()
    hint: str = ""   # the values column of the table, where the kind does not say it

    def parse(self, raw):
        if raw is None or raw == "":
            return self.default
        if self.kind == "flag":
            return raw.strip().lower() not in _FALSE
        if self.kind == "off":
            return raw.strip() != "0"
        if self.kind == "int":
            try:
                return int(raw)
            except ValueError:
                from kernel_ir.errors import SpiradValueError
                raise SpiradValueError(f"{self.name}={raw!r}: give an integer") from None
        if self.kind == "choice":
            v = raw.strip().lower()
            if v not in self.choices:
                from kernel_ir.errors import SpiradValueError
                raise SpiradValueError(f"{self.name}={raw!r}: give one of "
                                       f"{', '.join(self.choices)}")
            return v
        return raw

    @property
    def values(self) -> str:
        if self.hint:
            return self.hint
        return {"flag": "1", "off": "0", "int": "N", "path": "path"}.get(
            self.kind, "\\|".join(self.choices))


SWITCHES = {s.name: s for s in (
    # compile and launch
    Switch("SPIRAD_VERIFY", "flag", False,
           "run the IR verifier after every compiler pass (also on with `init(debug=True)`)"),
    Switch("SPIRAD_CACHE_DIR", "path", None,
           "directory of the offline compile cache and of assembled GPU code (default "
           "`$XDG_CACHE_HOME/spirad` or `~/.cache/spirad`; [cache.md](cache.md))"),
    Switch("SPIRAD_OFFLINE_CACHE", "off", True,
           "`0` turns the offline compile cache off (like `init(offline_cache=False)`)"),
    Switch("SPIRAD_CACHE_MAX_SIZE", "str", None,
           "size cap of the offline cache directory: bytes, or a number with K, M or G "
           "(default 1G)", hint="bytes, 500M, 2G"),
    Switch("SPIRAD_SHORT_CIRCUIT_OPERATORS", "flag", False,
           "the default of `init(short_circuit_operators=)`: Python's short-circuit `and` / `or` "
           "in kernels (the right side runs only when it decides) instead of Taichi's bitwise "
           "default. Programs run through the `quadrants` module default to on, as Quadrants "
           "does ([coming_from_taichi.md](coming_from_taichi.md))"),
    Switch("SPIRAD_CHECK_OVERFLOW", "flag", False,
           "the default of `init(check_overflow=)`: with `debug=True`, integer `+ - * <<` in "
           "kernels print Taichi's \"Addition overflow detected\" (...) with the source line "
           "when the result wraps. Programs run through the Taichi alias default to on, as "
           "Taichi's debug mode checks ([coming_from_taichi.md](coming_from_taichi.md))"),
    Switch("SPIRAD_DEBUG_SYNC", "flag", False,
           "the default of `init(debug_sync=)`: with `debug=True`, every launch waits for its "
           "kernel and raises what it reported (bounds errors, failed asserts) at the launch, as "
           "Taichi's synchronous debug mode does, instead of at the next synchronisation. "
           "Programs run through the Taichi alias default to on"),
    Switch("SPIRAD_AD_OVERWRITTEN_READS", "choice", "error",
           "reverse mode: a kernel that reads a global it may also overwrite (the adjoint would "
           "see the new value) is a compile error (`error`), or, as Quadrants and Taichi run it, "
           "a warning naming the read (`warn`: for programs whose data never lets the write hit "
           "the read, which spirad cannot prove; Genesis' rigid solver). Programs run through "
           "the Taichi alias default to `warn` ([coming_from_taichi.md](coming_from_taichi.md))",
           ("error", "warn")),
    Switch("SPIRAD_TORCH_LEAF_WRITES", "choice", "error",
           "a launch that writes a torch leaf tensor requiring grad, with grad mode on and no "
           "Tape, is an error (`error`: torch refuses such in-place changes), or, as Taichi "
           "writes it, a warning (`warn`). Programs run through the Taichi alias default to "
           "`warn`", ("error", "warn")),
    Switch("SPIRAD_DEBUG_ADSTACK", "flag", False,
           "print, per reverse-mode launch, sizer bytecode, stack sizes, strides and heap sizes, "
           "the stacks the counting pass measured, and the loops checkpointed to stay within "
           "`ad_stack_memory` with the memory saved"),
    Switch("SPIRAD_DEBUG", "flag", False,
           "tracebacks of user errors keep spirad's own frames (by default they show the user's "
           "frames only)"),
    # Vulkan / Metal
    Switch("SPIRAD_VULKAN_DEVICE", "str", None, "the Vulkan device to use (default: the best)",
           hint="index or name substring"),
    Switch("SPIRAD_VALIDATION", "flag", False,
           "Khronos validation layer on; messages are collected (the tests fail on any)"),
    Switch("SPIRAD_VALIDATE_SPIRV", "flag", False,
           "run spirv-val on every emitted module (on with validation or `debug=True`)"),
    Switch("SPIRAD_SPIRV_TOOLS_LIB", "path", None,
           "path of the SPIRV-Tools shared library used for validation"),
    Switch("SPIRAD_METAL_EMULATE", "flag", False,
           "run `arch=metal` on any wgpu adapter with Apple-silicon limits ([metal.md](metal.md))"),
    Switch("SPIRAD_QUADRANTS_ARCH", "choice", None,
           "programs run through the `quadrants` module: the arch of every `qd.init`, whatever "
           "the program asks for (as `run_as_taichi --arch`); Genesis initialised with `gs.cpu` "
           "keeps its CPU device (torch CPU tensors) and runs its kernels on this arch "
           "([metal.md](metal.md))", ("cpu", "vulkan", "metal", "cuda", "amdgpu", "gpu")),
    # CUDA / AMDGPU
    Switch("SPIRAD_CUDA_EMULATE", "flag", False,
           "run `arch=cuda` on the CPU through its GPU lowering, device code still assembled "
           "([gpu.md](gpu.md))"),
    Switch("SPIRAD_AMDGPU_EMULATE", "flag", False,
           "run `arch=amdgpu` on the CPU through its GPU lowering, device code still assembled "
           "([gpu.md](gpu.md))"),
    Switch("SPIRAD_PTXAS", "path", None, "path of `ptxas` (else the nvidia-cuda-nvcc wheel, "
           "`$CUDA_HOME`, `PATH`)"),
    Switch("SPIRAD_LIBDEVICE", "path", None, "path of `libdevice.10.bc`"),
    Switch("SPIRAD_ROCM_BITCODE", "path", None,
           "directory of the ROCm device libraries (`ocml.bc`)"),
    Switch("SPIRAD_LLD", "path", None, "path of `ld.lld` (LLVM 22) for AMDGPU code objects"),
    Switch("SPIRAD_GPU_HOST_SIZING", "flag", False,
           "CUDA / AMDGPU: size adstacks and read data-dependent parallel bounds on the host "
           "(each a wait), the path before the GPU sizer, for comparisons ([gpu.md](gpu.md))"),
    # CPU code generation
    Switch("SPIRAD_CPU_SPMD", "off", True,
           "`0`: CPU range tasks never run in SIMD lanes ([cpu_spmd.md](cpu_spmd.md))"),
    Switch("SPIRAD_CPU_SPMD_LANES", "int", None,
           "lanes of an SPMD task (default: two registers per 32-bit value of the target: 32 "
           "with AVX-512, 16 with AVX2, 8 with NEON)"),
    Switch("SPIRAD_CPU_TARGET", "str", None,
           "the CPU the CPU backend compiles for (default: this one, every feature it has): an "
           "LLVM CPU name (`x86-64-v3`: AVX2, no AVX-512), features (`-avx512f`), or both "
           "(`znver3,-avx2`); lane widths follow it. It must run on this CPU "
           "([cpu_spmd.md](cpu_spmd.md))", hint="x86-64-v3, -avx512f"),
    Switch("SPIRAD_CPU_SPMD_MIN_TRIPS", "int", None,
           "a CPU range task with constant bounds and fewer iterations stays scalar (default: "
           "two lane groups; `0`: lanes however short)"),
    Switch("SPIRAD_CPU_VECMATH", "choice", "auto",
           "CPU math: vector variants of our bodies (`auto`), our bodies inlined (`1`), libm "
           "only (`0`) ([vecmath.md](vecmath.md))", ("auto", "1", "0")),
    Switch("SPIRAD_DEBUG_CPU", "flag", False, "print each CPU task's lowering (SPMD lanes or "
           "scalar, and why)"),
    # GUI
    Switch("SPIRAD_GUI_SHOW", "off", True,
           "`0`: `sd.GUI` opens no window even where there is a display; it draws off screen "
           "and `show(file)` writes images ([gui.md](gui.md))"),
)}

# read by the test suite itself (documented with the others)
TEST_SWITCHES = {
    "SPIRAD_REQUIRE_ARCHS": ("cpu,vulkan,metal,cuda,amdgpu",
                             "tests: a missing arch is a failure instead of a skip"),
    "SPIRAD_REQUIRE_PYTHONS": ("1", "tests: a Python of the classifiers missing here is a failure "
                                    "instead of a skip (tests/package, the wheel)"),
    "SPIRAD_UPDATE_GOLDEN": ("1", "tests: rewrite the golden SPIR-V disassembly "
                                  "(tests/spirv_codegen/golden)"),
    "SPIRAD_SPIRV_TEST_VALIDATION": ("0", "tests: SPIR-V code generator tests without the "
                                          "validation layer"),
    "SPIRAD_SPIRV_RANDOM_SEEDS": ("N", "tests: how many random SPIR-V programs to run"),
    "SPIRAD_TAICHI_ARCHS": ("cpu,vulkan", "Taichi's own test suite run on spirad "
                                          "(scripts/taichi_tests.py): the archs"),
}


# name -> this process's default, where a compatibility layer set one (`set_default`)
_PROCESS_DEFAULTS: dict = {}


def _switch(name: str) -> Switch:
    try:
        return SWITCHES[name]
    except KeyError:
        raise RuntimeError(f"internal error: {name} is not declared in spirad.options") from None


def get(name: str):
    """The value of switch `name` now: parsed; when unset or empty, this process's default
    (`set_default`) or the declared one."""
    sw = _switch(name)
    raw = os.environ.get(name)  # the one read of SPIRAD_* variables
    if (raw is None or raw == "") and name in _PROCESS_DEFAULTS:
        return _PROCESS_DEFAULTS[name]
    return sw.parse(raw)


def set_default(name: str, raw: str) -> None:
    """Make `raw` (a value as the variable would hold it) switch `name`'s default in this
    process; the environment variable, where set, still wins. The Taichi alias uses it to run
    Taichi programs with Taichi's semantics (`spirad.compat.taichi_alias`); a program that
    imports spirad itself keeps the declared defaults. Not inherited by child processes."""
    _PROCESS_DEFAULTS[name] = _switch(name).parse(raw)


def reset_default(name: str) -> None:
    """Back to the declared default (undoes `set_default`)."""
    _switch(name)
    _PROCESS_DEFAULTS.pop(name, None)


def llvm_codegen_options():
    """The CPU code generator's switches (`llvm_codegen.CodegenOptions`); with
    SPIRAD_CPU_TARGET, the vector width of that target (`cpu_target`)."""
    from llvm_codegen.options import CodegenOptions
    spec = cpu_target()
    return CodegenOptions(spmd=get("SPIRAD_CPU_SPMD"), lanes=get("SPIRAD_CPU_SPMD_LANES"),
                          vecmath=get("SPIRAD_CPU_VECMATH"), debug=get("SPIRAD_DEBUG_CPU"),
                          min_trips=get("SPIRAD_CPU_SPMD_MIN_TRIPS"),
                          vector_bits=_target_bits(spec) if spec else None)


def cpu_target():
    """SPIRAD_CPU_TARGET (None: the host), for the CPU runtime and `llvm_codegen_options`."""
    return (get("SPIRAD_CPU_TARGET") or "").strip() or None


def _target_bits(spec: str) -> int:
    """The vector width of a forced CPU target; a target this CPU cannot run is an error."""
    from llvm_codegen import cpu_target as ct
    try:
        return ct.check(spec).bits
    except ValueError as e:
        from kernel_ir.errors import SpiradValueError
        raise SpiradValueError(str(e)) from None


def tool_paths() -> dict:
    """Overrides of the external tools' locations, for `llvm_codegen.device_libs.configure`."""
    return {"ptxas": get("SPIRAD_PTXAS"), "libdevice": get("SPIRAD_LIBDEVICE"),
            "rocm_bitcode": get("SPIRAD_ROCM_BITCODE"), "lld": get("SPIRAD_LLD"),
            "cache_dir": get("SPIRAD_CACHE_DIR")}


def markdown_table() -> str:
    """The table of docs/errors_and_environment.md."""
    rows = ["| variable | values | effect |", "|---|---|---|"]
    rows += [f"| `{s.name}` | `{s.values}` | {s.doc} |" for s in SWITCHES.values()]
    rows += [f"| `{n}` | `{v}` | {d} |" for n, (v, d) in TEST_SWITCHES.items()]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
