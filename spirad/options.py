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

`sd.init()`'s keywords are the second table, `INIT_OPTIONS`: name, type, default and whether the
option changes generated code (`affects_code`, which builds the offline cache's key). `init()`
turns its keywords into an `InitValues` (`state.options`), read as `state.options.NAME`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from kernel_ir import dtypes as _dtypes

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
    Switch("SPIRAD_SHORT_CIRCUIT_OPERATORS", "off", True,
           "the default of `init(short_circuit_operators=)`: on, as in Taichi 1.7.4 and "
           "Quadrants, `and` / `or` in kernels are Python's (the deciding operand; the right "
           "side runs only when it decides); `0`: the bitwise `&` / `|` of all operands "
           "([coming_from_taichi.md](coming_from_taichi.md))"),
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
    Switch("SPIRAD_PRINT_FLOATS", "choice", "shortest",
           "how a kernel's `print` shows a float without a format spec: `shortest`, Python's "
           "shortest repr of its dtype (`233.3`), or `printf`, Taichi's C `%f` (`233.300003`; "
           "f64: 12 decimals). Programs run through the Taichi alias default to `printf`",
           ("shortest", "printf")),
    Switch("SPIRAD_INT_ARGS", "choice", "error",
           "an integer kernel argument outside its annotated type's range (`a: i8` given 255) "
           "is an error (`error`), or, as Taichi passes it, wrapped to the type's width "
           "(two's complement: 255 -> -1) with a warning (`wrap`; Taichi too refuses a negative "
           "value for an unsigned type and any value beyond 64 bits). Programs run through the "
           "Taichi alias default to `wrap`", ("error", "wrap")),
    Switch("SPIRAD_PROFILER_OFF", "choice", "error",
           "a kernel-profiler call (`print_kernel_profiler_info`, `clear_...`, `query_...`, "
           "`get_kernel_profiler_total_time`) without `init(kernel_profiler=True)` is an error "
           "(`error`: there is nothing to report), or, as in Taichi, a warning that reports "
           "nothing (`warn`). Programs run through the Taichi alias default to `warn`",
           ("error", "warn")),
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
    Switch("SPIRAD_CPU_POOL", "choice", "native",
           "`static`: CPU split launches in fixed chunks through Python's thread pool (the path "
           "before the native pool, `llvm_codegen/cpu_pool.py`, for comparisons)",
           ("native", "static")),
    Switch("SPIRAD_PERF_MAP", "choice", None,
           "`1`: name every CPU task function for Linux `perf` in `/tmp/perf-<pid>.map` (a "
           "sampling profile then shows which task of which kernel the time goes to); "
           "`objects`: also keep each linked object file in `/tmp/perf-<pid>-objects/`, to read a "
           "sample's offset against `objdump -d` ([performance.md](performance.md))",
           ("0", "1", "objects")),
    Switch("SPIRAD_CPU_SPMD", "off", True,
           "`0`: CPU range tasks never run in SIMD lanes ([cpu_spmd.md](cpu_spmd.md))"),
    Switch("SPIRAD_SHAPE_SPECIALISE", "off", True,
           "`0`: a kernel taking ndarrays is compiled shape-agnostic only, not also for the "
           "shapes of its first launch (constant extents: fewer bounds checks, "
           "[language.md](language.md#ndarrays))"),
    Switch("SPIRAD_INDEPENDENT_LOOPS", "flag", False,
           "`1`: serialised top-level loops whose iterations are provably independent run in "
           "parallel on the CPU (off by default: slower on Genesis so far, "
           "[parallel_loops.md](parallel_loops.md))"),
    Switch("SPIRAD_ENV_LANES", "off", True,
           "`0`: serialised loops with heavy bodies over many iterations (Genesis' narrow "
           "phase) stay inside their serial task; by default, where provably independent, each "
           "runs in SIMD lanes on the CPU ([parallel_loops.md](parallel_loops.md))"),
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
    Switch("SPIRAD_CPU_HUGE_IR", "int", None,
           "a CPU kernel whose LLVM IR exceeds this many bytes is compiled without the SLP "
           "vectoriser and with a smaller register allocation budget: less compile time, the "
           "same results (default 4000000; `0`: never)"),
    Switch("SPIRAD_CPU_LARGE_IR", "int", None,
           "a CPU kernel whose LLVM IR exceeds this many bytes is optimised at LLVM's speed "
           "level 2 instead of 3 (no non-trivial loop unswitching): less compile time, the same "
           "results (default 500000; `0`: never)"),
    Switch("SPIRAD_CPU_VECMATH", "choice", "auto",
           "CPU math: vector variants of our bodies (`auto`), our bodies inlined (`1`), libm "
           "only (`0`) ([vecmath.md](vecmath.md))", ("auto", "1", "0")),
    Switch("SPIRAD_DEBUG_CPU", "flag", False, "print each CPU task's lowering (SPMD lanes or "
           "scalar, and why)"),
    # GUI
    Switch("SPIRAD_GUI_SHOW", "off", True,
           "`0`: `sd.GUI` opens no window even where there is a display; it draws off screen "
           "and `show(file)` writes images ([gui.md](gui.md))"),
    Switch("SPIRAD_GUI_FRAMES", "int", None,
           "off screen, an `sd.ui.Window` (Taichi's `ti.ui`) stops `running` after this many "
           "`show()` calls, so a program that loops until its window is closed ends "
           "([gui.md](gui.md))"),
)}

# read by the test suite itself (documented with the others)
TEST_SWITCHES = {
    "SPIRAD_REQUIRE_ARCHS": ("cpu,vulkan,metal,cuda,amdgpu",
                             "tests: a missing arch is a failure instead of a skip"),
    "SPIRAD_REQUIRE_PYTHONS": ("1", "tests: a Python of the classifiers missing here is a failure "
                                    "instead of a skip (tests/package, the wheel)"),
    "SPIRAD_TEST_RELEASE": ("cpu,vulkan", "tests: only the arch tests of these archs run, with "
                                          "`sd.init(debug=False)` (the release build users get), "
                                          "those whose expectation is debug-only with "
                                          "`debug=True` (`test_archs(debug_only=...)`; "
                                          "scripts/test.sh's release run)"),
    "SPIRAD_UPDATE_GOLDEN": ("1", "tests: rewrite the golden SPIR-V disassembly "
                                  "(tests/spirv_codegen/golden)"),
    "SPIRAD_SPIRV_TEST_VALIDATION": ("0", "tests: SPIR-V code generator tests without the "
                                          "validation layer"),
    "SPIRAD_SPIRV_RANDOM_SEEDS": ("N", "tests: how many random SPIR-V programs to run"),
    "SPIRAD_TAICHI_ARCHS": ("cpu,vulkan", "Taichi's own test suite run on spirad "
                                          "(scripts/taichi_tests.py): the archs"),
    "SPIRAD_LAVAPIPE25": ("DIR", "tests: where scripts/install_lavapipe25.sh unpacked Mesa 25's "
                                 "lavapipe (default `~/.cache/spirad/lavapipe25`), the adapter "
                                 "with binding arrays that tests/metal/test_binding_arrays.py "
                                 "probes ([metal.md](metal.md))"),
}


@dataclass(frozen=True)
class InitOption:
    """One keyword of `sd.init()`. `type`: what a given value is converted to (`object`: kept
    as given); `default`: the value when not given, or the value of the `SPIRAD_*` switch named
    by `switch`; `affects_code`: the option changes what a kernel compiles to, so it is part of
    the offline cache's key (`InitValues.code_key`; tests/architecture/test_options.py fails when
    a module of the compile path reads an option without it); `effect`: False for Taichi's /
    Quadrants' keywords accepted with no effect here."""
    name: str
    type: type
    default: object
    affects_code: bool
    doc: str
    switch: str = ""
    effect: bool = True

    def value(self, given):
        """The given value as this option holds it (None: the default)."""
        if given is None:
            return self.default_value()
        if self.type is object:
            return given
        try:
            return self.type(given)
        except (TypeError, ValueError):
            from kernel_ir.errors import SpiradValueError
            raise SpiradValueError(f"init({self.name}={given!r}): give {self.type.__name__} "
                                   f"({self.doc})") from None

    def default_value(self):
        return get(self.switch) if self.switch else self.default


# Taichi's options accepted without effect (scheduling and compiler knobs of Taichi's own compiler,
# runtime and debugging: IR dumps, a gdb hook, block dims, struct-for demotion, mesh localisation,
# quant store fusion, offline-cache cleaning, Vulkan API version; docs/coming_from_taichi.md,
# "ti.init"); `default_up` stays refused, as Taichi refuses it
_TAICHI_WITHOUT_EFFECT = (
    "flatten_if", "enable_fallback", "advanced_optimization", "fast_math", "print_ir", "verbose",
    "dynamic_index", "packed", "cfg_optimization", "make_thread_local", "make_block_local",
    "check_out_of_bound", "device_memory_GB", "device_memory_fraction",
    "device_memory_GB_per_thread", "cuda_stack_limit", "print_kernel_llvm_ir", "excepthook",
    "real_matrix_scalarize", "opt_level", "gdb_trigger", "print_preprocessed_ir",
    "print_ir_dbg_info", "print_accessor_ir", "print_kernel_asm", "print_kernel_amdgcn",
    "print_kernel_llvm_ir_optimized", "print_struct_llvm_ir", "verbose_kernel_launches",
    "timeline", "use_llvm", "lower_access", "simplify_before_lower_access",
    "simplify_after_lower_access", "gpu_max_reg", "saturating_grid_dim", "max_block_dim",
    "default_cpu_block_dim", "default_gpu_block_dim", "cpu_block_dim_adaptive",
    "make_cpu_multithreading_loop", "detect_read_only", "half2_vectorization",
    "cache_loop_invariant_global_vars", "move_loop_invariant_outside_if",
    "demote_dense_struct_fors", "allow_nv_shader_extension", "vk_api_version",
    "quant_opt_atomic_demotion", "quant_opt_store_fusion", "offline_cache_cleaning_policy",
    "offline_cache_cleaning_factor", "demote_no_access_mesh_fors", "experimental_auto_mesh_local",
    "auto_mesh_local_default_occupacy", "make_mesh_block_local", "mesh_localize_all_attr_mappings",
    "mesh_localize_from_end_mapping", "mesh_localize_to_end_mapping",
    "optimize_mesh_reordered_mapping")
# Quadrants' keywords with no effect here (docs/coming_from_taichi.md, "Quadrants"): spirad has
# no fallback arch, checks bounds under debug=True, scalarizes every matrix, keeps IEEE math,
# sizes adstacks per launch and compiles on the calling thread
_QUADRANTS_WITHOUT_EFFECT = ("force_scalarize_matrix", "ad_stack_sparse_threshold_bytes",
                             "num_compile_threads")

INIT_OPTIONS = {o.name: o for o in (
    # (default_fp / default_ip: init() checks them)
    InitOption("default_fp", object, _dtypes.f32, True, "the type of float literals and `float`"),
    InitOption("default_ip", object, _dtypes.i32, True, "the type of int literals and `int`"),
    InitOption("debug", bool, False, True, "bounds checks with the source line, asserts, "
                                           "verification of the IR (docs/errors_and_environment.md)"),
    InitOption("ad_stack_size", object, None, True,
               "force every autodiff stack to this many entries (0: automatic sizing)"),
    InitOption("default_ad_stack_size", object, None, True,
               "entries of the stacks whose loop bounds the compiler cannot express"),
    InitOption("ad_stack_experimental_enabled", bool, True, True,
               "autodiff stacks for loops with carried values (Taichi's keyword)"),
    InitOption("adstack_cache", bool, True, True, "the adstack sizing cache (docs/autodiff.md)"),
    InitOption("random_seed", int, 0, True, "the seed of `sd.random()`: in kernels (the seed is "
                                            "compiled in) and from Python"),
    InitOption("static_unroll_limit", int, 50_000, True,
               "iterations `sd.static` loops may unroll per kernel"),
    InitOption("max_while_iterations", int, 0, True, "every `while` stops after this many "
                                                     "iterations with an error (0: no cap; "
                                                     "docs/autodiff.md)"),
    InitOption("short_circuit_operators", bool, None, True,
               "Python's `and` / `or` in kernels (Taichi's default); False: bitwise & / |",
               switch="SPIRAD_SHORT_CIRCUIT_OPERATORS"),
    InitOption("check_bounds", bool, True, True,
               "False: no default bounds checks (docs/errors_and_environment.md)"),
    InitOption("check_overflow", bool, False, True,
               "with debug=True, integer + - * << print Taichi's overflow messages "
               "(frontend/overflow.py)", switch="SPIRAD_CHECK_OVERFLOW"),
    InitOption("debug_sync", bool, False, False,
               "with debug=True, a kernel's bounds errors and asserts are raised at its launch "
               "(runtime/launch.py)", switch="SPIRAD_DEBUG_SYNC"),
    InitOption("deterministic", bool, False, True, "bit-identical reductions and float atomics "
                                                   "(docs/interop.md, \"Deterministic runs\")"),
    InitOption("ad_stack_memory", object, None, False,
               "adstack heap budget in bytes: past it, loops are checkpointed (docs/autodiff.md)"),
    InitOption("offline_cache", bool, True, False, "False: no offline compile cache"),
    InitOption("offline_cache_file_path", object, None, False,
               "the offline cache's directory (docs/cache.md)"),
    InitOption("offline_cache_max_size_of_files", object, None, False,
               "the offline cache's size cap: bytes, or a number with K, M or G"),
    InitOption("log_level", object, None, False, "the `spirad` logger's level (sd.INFO, ...)"),
    InitOption("kernel_profiler", bool, False, False, "time each launch (`sd.profiler`)"),
    InitOption("cpu_max_num_threads", object, None, False,
               "worker threads of the CPU backend (part of its own cache features)"),
    InitOption("managed_memory", bool, False, False,
               "CUDA / AMDGPU: fields and ndarrays in managed memory (docs/gpu.md)"),
    InitOption("print_full_traceback", bool, False, False,
               "Quadrants: tracebacks keep spirad's own frames (as SPIRAD_DEBUG=1, which wins "
               "where set), until the next init() without it"),
    *(InitOption(n, object, None, False, "Taichi's, accepted without effect", effect=False)
      for n in _TAICHI_WITHOUT_EFFECT),
    *(InitOption(n, object, None, False, "Quadrants', accepted without effect", effect=False)
      for n in _QUADRANTS_WITHOUT_EFFECT),
)}


class InitValues:
    """The options of one `init()`: an attribute per `INIT_OPTIONS` entry (the given value as
    the option holds it, else its default), read by name, never by string; `given`: the names
    passed."""
    __slots__ = ("given",) + tuple(INIT_OPTIONS)

    def __init__(self, given=None):
        given = dict(given or {})
        unknown = set(given) - set(INIT_OPTIONS)
        if unknown:  # init() refuses them first, with the user's error
            raise RuntimeError(f"internal error: undeclared init options {sorted(unknown)}")
        self.given = frozenset(given)
        for name, opt in INIT_OPTIONS.items():
            setattr(self, name, opt.value(given[name]) if name in given else opt.default_value())

    def code_key(self) -> tuple:
        """The values of the options that change generated code: part of every offline-cache
        key (`compile.offline_cache`)."""
        return tuple((o.name, repr(getattr(self, o.name))) for o in INIT_OPTIONS.values()
                     if o.affects_code)


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
                          vector_bits=_target_bits(spec) if spec else None,
                          **_module_sizes())


def _module_sizes() -> dict:
    """SPIRAD_CPU_HUGE_IR and SPIRAD_CPU_LARGE_IR where set (else `CodegenOptions`' defaults)."""
    sizes = {"huge_ir": get("SPIRAD_CPU_HUGE_IR"), "large_ir": get("SPIRAD_CPU_LARGE_IR")}
    return {k: n for k, n in sizes.items() if n is not None}


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
