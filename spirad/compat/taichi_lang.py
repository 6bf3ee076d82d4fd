"""The `taichi.lang.*` paths that Taichi programs and Taichi's tests import although they are
Taichi internals: each is a small namespace over spirad's own objects, installed by
`taichi_alias` as `taichi.lang.impl`, `taichi.lang.misc`, ... Only what such code reads is here.
"""
from __future__ import annotations

import enum
import types
from dataclasses import dataclass

import spirad as _sd


@dataclass(frozen=True)
class _Config:
    """What `ti.lang.impl.current_cfg()` shows of the current `init()`."""
    arch: str
    default_fp: object
    default_ip: object
    debug: bool
    ad_stack_size: int
    random_seed: int
    fast_math: bool = False  # spirad keeps IEEE math whatever init(fast_math=) says


def _current_cfg() -> _Config:
    from spirad.runtime import state
    st = state.current()
    o = st.options
    return _Config(st.arch, st.default_fp, st.default_ip, st.debug, int(o.ad_stack_size or 0),
                   o.random_seed)


def _module(name: str, doc: str, **attrs) -> types.ModuleType:
    m = types.ModuleType(f"taichi.lang.{name}", doc)
    m.__dict__.update(attrs)
    return m


def _get_runtime():
    """`impl.get_runtime()`: spirad's program object (default_fp / default_ip,
    materialize(), get_num_compiled_functions(), prog.config())."""
    from spirad.runtime.program_hooks import get_runtime
    return get_runtime()


impl = _module("impl", "current_cfg(), get_runtime(), the field / ndarray entry points and "
               "ti_float / ti_int (a cast to the default float / int, in kernels too)",
               current_cfg=_current_cfg, get_runtime=_get_runtime, field=_sd.field,
               ndarray=_sd.ndarray, root=_sd.root, ti_float=float, ti_int=int)


def _experimental_real_func(fn):
    """`ti.experimental.real_func`: Taichi 1.7's deprecated spelling of `ti.real_func`."""
    import warnings
    warnings.warn("ti.experimental.real_func is deprecated because it is no longer experimental. "
                  "Use ti.real_func instead.", DeprecationWarning, stacklevel=2)
    return _sd.real_func(fn)


# `ti.experimental` (an attribute of the alias, as `ti._lib`): what Taichi 1.7 still keeps there
experimental = types.ModuleType("taichi.experimental", "real_func (deprecated: ti.real_func)")
experimental.real_func = _experimental_real_func


def _loop_unique(val, covers=None):
    """Taichi's `loop_unique(val, covers=None)`: a promise that `val` differs between the
    iterations of the parallel loop (a hint for Taichi's atomics demotion); the value itself."""
    return val


_loop_unique._kernel_inline = True  # inlined by kernels like a user's function (taichi_ops)
misc = _module("misc", "arch lists, loop_unique",
               get_host_arch_list=lambda: [_sd.cpu], cpu=_sd.cpu, gpu=_sd.gpu,
               vulkan=_sd.vulkan, metal=_sd.metal, cuda=_sd.cuda, loop_unique=_loop_unique)


class SNodeGradType(enum.Enum):
    """Taichi's kinds of gradient slot (`x.grad` is ADJOINT, `x.dual` is DUAL)."""
    PRIMAL = 0
    ADJOINT = 1
    DUAL = 2
    ADJOINT_CHECKBIT = 3


class AutodiffMode(enum.Enum):
    """Taichi's kernel autodiff modes."""
    NONE = 0
    VALIDATION = 1
    FORWARD = 2
    REVERSE = 3
    CHECK_AUTODIFF_VALID = 4


enums = _module("enums", "SNodeGradType, AutodiffMode", SNodeGradType=SNodeGradType,
                AutodiffMode=AutodiffMode)
exception = _module("exception", "Taichi's error classes (spirad's, under Taichi's names)",
                    **{n: getattr(_sd, n) for n in (
                        "TaichiCompilationError", "TaichiSyntaxError", "TaichiNameError",
                        "TaichiIndexError", "TaichiTypeError", "TaichiRuntimeError",
                        "TaichiAssertionError", "TaichiRuntimeTypeError")})


def _has_pytorch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


util = _module("util", "has_pytorch(), has_paddle() (always False: spirad has no Paddle "
               "interop), has_clangpp() (always False: spirad has no SourceBuilder, Taichi's "
               "external C++ functions compiled by clang++), to_numpy_type(dtype)",
               has_pytorch=_has_pytorch, has_paddle=lambda: False, has_clangpp=lambda: False,
               to_numpy_type=lambda dt: dt.np.type)
def _generate_swizzle_patterns(key_group: str, required_length=4) -> list:
    """Taichi's `ti.lang.matrix._generate_swizzle_patterns`: every swizzle of 1 to
    `required_length` letters of `key_group` ("xyzw" -> x, y, ..., xx, xy, ..., wwww), the
    names a vector answers to (spirad.data.matrix._swizzle reads them)."""
    import itertools
    return ["".join(p) for k in range(1, required_length + 1)
            for p in itertools.product(key_group, repeat=k)]


matrix = _module("matrix", "Matrix / Vector, MatrixField, _generate_swizzle_patterns",
                 Matrix=_sd.Matrix, Vector=_sd.Vector, MatrixField=_sd.MatrixField,
                 _generate_swizzle_patterns=_generate_swizzle_patterns)
field = _module("field", "Field", Field=__import__("spirad.data.field", fromlist=["Field"]).Field)
snode = _module("snode", "SNode", SNode=__import__("spirad.data.field", fromlist=["SNode"]).SNode)

# `from taichi._lib import core as _ti_core`: Taichi's examples probe `_ti_core.GGUI_AVAILABLE` to
# choose a window (False: spirad's `ti.ui` draws off screen only, so they choose `ti.GUI`, which
# opens a window where there is a display), and `ti._lib.core.with_vulkan()` / `with_cuda()` /
# `with_metal()` to choose an arch (whether spirad can run that arch here)
lib_core = types.ModuleType("taichi._lib.core", "GGUI_AVAILABLE (False: spirad's ti.ui draws off "
                            "screen only), with_vulkan(), with_cuda(), with_metal()")
lib_core.GGUI_AVAILABLE = False
# Taichi's limit on a field's axes (its tests make fields of 2 to 12 axes); spirad's fields and
# ndarrays of 12 axes run on cpu and vulkan (tests/compat/test_taichi_matrices.py)
lib_core.get_max_num_indices = lambda: 12
# `from taichi._lib.utils import get_os_name` (Taichi's tests choose the fast-GUI byte order by it)
lib_utils = types.ModuleType("taichi._lib.utils", "get_os_name()")
lib_utils.get_os_name = __import__("spirad.gui.fast_image", fromlist=["os_name"]).os_name


def _with(arch):
    def probe() -> bool:
        from spirad.backends import arch_available
        return arch_available(arch)
    probe.__doc__ = f"Whether spirad runs arch {arch!r} in this process."
    return probe


lib_core.with_vulkan, lib_core.with_cuda, lib_core.with_metal = (_with("vulkan"), _with("cuda"),
                                                                  _with("metal"))
lib = types.ModuleType("taichi._lib", "core, utils")
lib.core = lib_core
lib.utils = lib_utils


from . import taichi_ops as ops  # noqa: E402 - `taichi.lang.ops`
