"""spirad: a Python kernel language with reverse-mode autodiff, compiled to SPIR-V and LLVM.

This module is the public surface only (Taichi / Quadrants names); nothing here imports a backend.
"""
from __future__ import annotations

from ._version import __version__
from .runtime import state as _state
from . import options as _options  # init()'s keywords: options.INIT_OPTIONS
from .backends import load_backend as _load_backend  # the package: a backend loads on first use
_state.LOAD_BACKEND = _load_backend
from . import _logging  # Quadrants' `qd._logging`
from .perf_dispatch import perf_dispatch
from .tracebacks import api as _api
from . import types
from . import ad
from kernel_ir.errors import (SpiradArchError, SpiradAutodiffError, SpiradDeviceError, SpiradError,
                     SpiradAssertionError,
                     SpiradGradCheckError,
                     SpiradNotSupportedError,
                     SpiradNameError, SpiradSyntaxError, SpiradTypeError, SpiradValueError,
                     SpiradAdStackOverflow, SpiradIndexError, SpiradBoundsError, SpiradArgumentError,
                     SpiradArgumentValueError, SpiradGradDtypeError, SpiradCustomGradError,
                     SpiradRuntimeError,
                     SpiradDataAccessError, SpiradOutOfBoundsError,
                     SpiradWarning)
from .data.field import field, i, ij, ijk, ijkl, j, k, l, root
from .data.field import axes, ijl, ik, ikl, il, jk, jkl, jl, kl
from .runtime.extension import extension, is_extension_supported
from kernel_ir.dtypes import f16, f32, f64, i8, i16, i32, i64, u1, u8, u16, u32, u64
from .func import func, pyfunc
from .runtime.logger import is_logging_effective, set_logging_level
from .real_func import real_func  # Taichi's non-inlined func: spirad inlines it (recursion is an error)
from .kernel import Kernel, data_oriented, kernel
from .data.struct import Struct, dataclass
from .data import argpack as _argpack  # noqa: F401 - installs sd.types.argpack
from .lang import atomic_and, atomic_max, atomic_min, atomic_mul, atomic_or, atomic_xor, one, zero
from .lang import (assume_in_range, atan, atomic_sub, block_local, cache_read_only, eig,
                   polar_decompose, stop_grad, static_assert, static_print, svd, sym_eig)
from .texture import Format, Texture
from .lang import (abs, acos, asin, atan2, atomic_add, cast, cos, exp, expm1, floor, frexp, grouped,
                   log, log1p, loop_config, max, min, ndrange, pow, random, randn, rsqrt, select,
                   sin, sqrt, static, tan, tanh)
from . import math
from .math import ceil, round, trunc, sign, log2, exp2  # noqa: A004 (Taichi names)
from .data.matrix import Matrix, Vector
from .data.ndarray import Ndarray, ndarray
from .data.field import Field, SNode
from .data.kinds import MatrixField, MatrixNdarray, ScalarField, ScalarNdarray, VectorNdarray
from .data.struct import StructField
from .data.argpack import ArgPack
from .data.fields_builder import FieldsBuilder, SNodeTree
from .data.quant import BitpackedFields
from .bitops import bit_shr
from .lang import bit_cast
from .data.tensor import Backend, Layout, MatrixTensor, Tensor, VectorTensor, tensor, wrap
from .interop.arrays import from_dlpack
from .compile.offline_cache import clear as clear_cache  # the offline compile cache (docs/cache.md)
from .types import ref, sparse_matrix_builder, template
from .gui import GUI, hex_to_rgb, rgb_to_hex
from . import tools
from .gui import ggui as ui  # Taichi's ti.ui (GGUI), drawn off screen
from .tools import sparse_grid as sparse  # `sd.sparse.grid` / `usage` (Taichi's ti.sparse)
from . import simt, graph, algorithms
from . import linalg
from .linalg import solve
from .launch_graph import Graph
from .lang import atomic_exchange, raw_div, raw_mod
from .frontend.sparse_api import activate, append, deactivate, is_active, length, no_activate, rescale_index
from .math import outer

from . import profiler
from .runtime import guard as _guard
from .runtime.launch import synchronise as _synchronise  # sync(): bound once
from .profiler import print_kernel_profiler_info  # Taichi's old top-level name
TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL = "trace", "debug", "info", "warn", "error", "critical"
cpu, vulkan, metal, cuda, amdgpu, gpu = "cpu", "vulkan", "metal", "cuda", "amdgpu", "gpu"
x64 = x86_64 = arm64 = cpu  # Taichi's / Quadrants' names of the host CPU
opengl, gles, dx11, dx12 = "opengl", "gles", "dx11", "dx12"  # Taichi archs spirad lacks: init refuses
float32, float64, int32, int64, uint32, uint64 = f32, f64, i32, i64, u32, u64
uint1 = u1  # Taichi's long name of u1
float16, int8, int16, uint8, uint16 = f16, i8, i16, u8, u16

# init()'s keywords: `options.INIT_OPTIONS`, the one table (type, default, whether it changes code)
_INIT_KEYS = frozenset(_options.INIT_OPTIONS) | {"arch"}


@_api
def init(arch=None, **kwargs):
    """Start (or restart) spirad. A new `init` resets all state: fields, ndarrays and compiled
    kernels of the previous one become invalid."""
    from .runtime.guard import LOCK, install
    install()  # Ctrl-C during a launch stops it cleanly (spirad.runtime.guard)
    with LOCK:
        return _init(arch, **kwargs)


def _init(arch=None, **kwargs):
    unknown = sorted(set(kwargs) - _INIT_KEYS)
    if unknown:
        raise SpiradValueError(f"init() got unknown keyword argument(s): {', '.join(unknown)}; "
                               f"known: {', '.join(sorted(_INIT_KEYS - {'arch'}))}")
    from .backends import BACKENDS, arch_available, backend_class, load_backend, resolve_arch
    arch = arch or "cpu"
    if arch not in BACKENDS and arch != "gpu":
        raise SpiradArchError(f"unknown arch {arch!r}; use sd.cpu, sd.vulkan, sd.metal, sd.cuda, "
                              f"sd.amdgpu or sd.gpu")
    arch = resolve_arch(arch)
    if not arch_available(arch):  # check before resetting: a failed init keeps the old state
        reason = backend_class(arch).unavailable_reason()  # an unimplemented arch raises here
        raise SpiradArchError(f"arch={arch} is not available on this machine: {reason}; "
                              f"use an available arch (sd.cpu, or sd.gpu to pick any GPU)")
    values = _options.InitValues(kwargs)
    fp, ip = values.default_fp, values.default_ip
    if fp not in (f32, f64):
        raise SpiradTypeError(f"default_fp must be sd.f32 or sd.f64, got {fp!r}")
    if ip not in (i32, i64):
        raise SpiradTypeError(f"default_ip must be sd.i32 or sd.i64, got {ip!r}")
    if values.print_full_traceback:
        _options.set_default("SPIRAD_DEBUG", "1")
    else:
        _options.reset_default("SPIRAD_DEBUG")
    if values.log_level is not None:
        from .runtime.logger import set_level
        set_level(values.log_level)
    st = _state.reset(arch=arch, default_fp=fp, default_ip=ip, debug=values.debug,
                      options=values)
    from . import profiler
    profiler.enable(None)
    st.backend = load_backend(arch, st)  # fail now, not at the first launch
    if values.kernel_profiler:
        profiler.enable(st.backend)
    from .runtime.logger import logger
    logger.info("spirad %s: arch=%s (%s)", __version__, arch, st.backend.device_name())
    from .runtime.sizing_cache import refresh_debug_flag
    refresh_debug_flag()
    return None


@_api
def sync():
    """Wait for all launched work to finish (raise any deferred kernel error) and print what
    kernels printed since the last sync."""
    with _guard.launching():
        _sync()


def _sync():
    # no import statements here: each one cost about 1 us of every `launch; sync()`
    st = _state.current()
    if st.backend is not None:
        _synchronise(st)


def reset():
    """Drop all state (fields, kernels' programs, the backend), as Taichi's `ti.reset()`."""
    from .runtime.guard import LOCK
    from . import profiler
    with LOCK:
        profiler.enable(None)
        _state.reset()


# Taichi's and Quadrants' error class names, for code that catches them (`except
# ti.TaichiSyntaxError`, `pytest.raises(qd.QuadrantsAssertionError)`): spirad's classes, which
# derive from the same Python kinds as theirs (a failed kernel assert and an adstack overflow are
# RuntimeErrors and AssertionErrors; compile errors are neither). The compilation error is every
# user error (spirad's type / value errors are raised at compile time and at the launch alike).
TaichiSyntaxError, TaichiTypeError, TaichiNameError = SpiradSyntaxError, SpiradTypeError, SpiradNameError
TaichiCompilationError = SpiradError
TaichiRuntimeError = SpiradRuntimeError
TaichiIndexError, TaichiRuntimeTypeError = SpiradValueError, SpiradTypeError
TaichiAssertionError = SpiradAssertionError
QuadrantsSyntaxError, QuadrantsTypeError, QuadrantsNameError = TaichiSyntaxError, TaichiTypeError, TaichiNameError
QuadrantsCompilationError, QuadrantsRuntimeError = TaichiCompilationError, TaichiRuntimeError
QuadrantsIndexError, QuadrantsRuntimeTypeError = TaichiIndexError, TaichiRuntimeTypeError
QuadrantsAssertionError = TaichiAssertionError

# The public surface, spelled out for `from spirad import *` and for type checkers (a name
# imported into a py.typed package's __init__ is private to it unless listed here);
# tests/package/test_typing.py checks that every public name is listed and documented.
__all__ = [
    "Graph",
    "__version__", "abs", "acos", "ad", "algorithms", "amdgpu", "arm64", "asin", "assume_in_range",
    "atan", "atan2", "atomic_add", "atomic_and", "atomic_exchange", "atomic_max", "atomic_min",
    "atomic_or", "atomic_sub", "atomic_xor", "axes", "Backend", "block_local", "cast", "ceil",
    "clear_cache", "cos", "cpu", "CRITICAL", "cuda", "data_oriented", "dataclass", "DEBUG", "dx11",
    "dx12", "eig", "ERROR", "exp", "exp2", "expm1", "extension", "f32", "f64", "field", "Field",
    "float32", "float64", "floor", "Format", "frexp", "from_dlpack", "func", "gles", "gpu", "graph", "grouped", "GUI",
    "hex_to_rgb", "i", "i32", "i64", "ij", "ijk", "ijkl", "ijl", "ik", "ikl", "il", "INFO", "init",
    "int32", "int64", "is_extension_supported", "j", "jk", "jkl", "jl", "k", "kernel", "Kernel",
    "kl", "l", "Layout", "log", "log1p", "log2", "loop_config", "math", "Matrix", "MatrixTensor",
    "max", "metal", "min", "ndarray", "Ndarray", "ndrange", "opengl", "outer", "perf_dispatch",
    "polar_decompose", "pow", "print_kernel_profiler_info", "profiler", "QuadrantsAssertionError",
    "QuadrantsCompilationError", "QuadrantsIndexError", "QuadrantsNameError",
    "QuadrantsRuntimeError", "QuadrantsRuntimeTypeError", "QuadrantsSyntaxError",
    "QuadrantsTypeError", "randn", "random", "raw_div", "raw_mod", "real_func", "reset", "rgb_to_hex", "root",
    "round", "rsqrt", "select", "sign", "simt", "sin", "SpiradAdStackOverflow", "SpiradArchError",
    "SpiradAssertionError", "SpiradAutodiffError", "SpiradDataAccessError", "SpiradDeviceError",
    "SpiradArgumentError", "SpiradArgumentValueError", "SpiradGradDtypeError", "SpiradCustomGradError", "SpiradBoundsError", "SpiradError", "SpiradGradCheckError", "SpiradIndexError", "SpiradNameError",
    "SpiradNotSupportedError", "SpiradOutOfBoundsError", "SpiradRuntimeError", "SpiradSyntaxError",
    "SpiradTypeError", "SpiradValueError", "SpiradWarning", "sqrt", "static", "static_assert",
    "static_print", "stop_grad", "Struct", "svd", "sym_eig", "sync", "TaichiAssertionError",
    "TaichiCompilationError", "TaichiIndexError", "TaichiNameError", "TaichiRuntimeError",
    "TaichiRuntimeTypeError", "TaichiSyntaxError", "TaichiTypeError", "tan", "tanh", "template", "ref",
    "Tensor", "tensor", "Texture", "tools", "sparse", "TRACE", "trunc", "types", "u1", "u32", "u64", "uint32", "uint64",
    "ui",
    "Vector", "VectorTensor", "vulkan", "WARN", "wrap", "x64", "x86_64",
    # 8- / 16-bit types; FieldsBuilder; zero / one, atomic_mul
    "f16", "float16", "i8", "i16", "int8", "int16", "u8", "u16", "uint8", "uint16",
    "FieldsBuilder", "SNodeTree", "one", "zero", "atomic_mul",
    # sparse matrices and solvers (docs/coming_from_taichi.md, linalg); the dense in-kernel solve
    "linalg", "solve",
    # sparse SNodes (bitmasked / pointer / dynamic; spirad.data.sparse_layout)
    "activate", "append", "deactivate", "is_active", "length", "no_activate", "rescale_index",
    # quantized types' bit-packed fields (sd.types.quant; spirad.data.quant)
    "BitpackedFields", "cache_read_only", "bit_shr", "bit_cast",
    # Taichi's classes (isinstance tests): the SNode, fields / ndarrays by element kind, packs
    "SNode", "ScalarField", "MatrixField", "StructField", "ScalarNdarray", "VectorNdarray",
    "MatrixNdarray", "ArgPack",
    # Taichi's: u1 under its long name, the sparse-matrix-builder annotation, @pyfunc, logging
    "uint1", "sparse_matrix_builder", "pyfunc", "set_logging_level", "is_logging_effective",
]
