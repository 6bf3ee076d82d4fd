"""`import taichi` resolving to spirad: the module alias behind `run_as_taichi` and the Taichi test
harness (scripts/taichi_tests.py).

The alias is spirad itself (`sys.modules["taichi"] is spirad`), so a Taichi program sees exactly
what `import spirad as ti` gives; `taichi.math`, `taichi.ad`, `taichi.types` are spirad's modules.
Taichi paths that programs import although they are internal (`taichi.lang.impl.current_cfg`,
`taichi.lang.exception.TaichiRuntimeError`, ...) come from `taichi_lang`. Any other `taichi.*`
submodule is an ImportError naming the alias.

Installing the alias also gives this process Taichi's defaults where spirad refuses, for safety,
a program Taichi runs (`TAICHI_DEFAULTS`): such a kernel runs as in Taichi, with a
`SpiradWarning` naming the risk. A program that imports spirad itself keeps the refusals, and an
environment variable set by the user wins either way (docs/coming_from_taichi.md).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys

# Taichi module path -> the module that stands for it (a spirad module, or one of taichi_lang's)
_MODULES = {
    "taichi.math": "spirad.math",
    "taichi.ad": "spirad.ad",
    "taichi.types": "spirad.types",
    "taichi.lang": "spirad.lang",
    "taichi.linalg": "spirad.linalg",
    "taichi.ui": "spirad.gui.ggui",
    "taichi.lang.simt": "spirad.simt",  # `from taichi.lang.simt import subgroup`
}
_LANG_SUBMODULES = ("impl", "misc", "enums", "exception", "util", "matrix", "field", "snode",
                    "ops")

# spirad.options switch -> its value under the alias: what Taichi accepts, run with a warning
TAICHI_DEFAULTS = {
    # a kernel that reads a differentiated global it may overwrite (Taichi differentiates it
    # with the overwritten value, silently)
    "SPIRAD_AD_OVERWRITTEN_READS": "warn",
    # a launch writing a torch leaf tensor that requires grad, outside a Tape (Taichi writes it)
    "SPIRAD_TORCH_LEAF_WRITES": "warn",
    # Taichi's debug=True prints integer overflows (frontend/overflow.py)
    "SPIRAD_CHECK_OVERFLOW": "1",
    # Taichi's debug=True is synchronous: a kernel's bounds error raises at its launch
    "SPIRAD_DEBUG_SYNC": "1",
    # Taichi prints a float without a spec as C's %f (233.300003), spirad as its shortest repr
    "SPIRAD_PRINT_FLOATS": "printf",
    # an integer argument outside its annotated type (`a: i8` given 255): Taichi wraps it
    "SPIRAD_INT_ARGS": "wrap",
    # a kernel-profiler call with the profiler off (Taichi warns and reports nothing)
    "SPIRAD_PROFILER_OFF": "warn",
}


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers `taichi.*` imports that are not in sys.modules yet with a clear error (the
    default would search spirad's directory and load a second copy of a spirad module)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "taichi" or fullname.startswith("taichi."):
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec):
        raise ModuleNotFoundError(f"No module named {spec.name!r}: `taichi` is an alias of "
                                  f"spirad here (spirad.compat.taichi_alias), which has no such "
                                  f"module", name=spec.name)

    def exec_module(self, module):  # never reached: create_module raises
        raise RuntimeError("unreachable")


def install() -> None:
    """Make `import taichi` (and the Taichi submodules listed above) give spirad. Idempotent."""
    import spirad
    from spirad import options
    from . import taichi_lang
    for name, value in TAICHI_DEFAULTS.items():
        options.set_default(name, value)
    sys.modules["taichi"] = spirad
    for name, target in _MODULES.items():
        sys.modules[name] = importlib.import_module(target)
    lang = sys.modules["taichi.lang"]
    for sub in _LANG_SUBMODULES:
        mod = getattr(taichi_lang, sub)
        sys.modules[f"taichi.lang.{sub}"] = mod
        setattr(lang, sub, mod)  # `ti.lang.impl.current_cfg()` through the attribute path too
    sys.modules["taichi._lib"] = taichi_lang.lib
    sys.modules["taichi._lib.core"] = taichi_lang.lib_core
    sys.modules["taichi._lib.utils"] = taichi_lang.lib_utils
    spirad._lib = taichi_lang.lib   # `ti._lib.core.with_vulkan()` through the attribute path
    spirad.experimental = taichi_lang.experimental  # `ti.experimental.real_func` (deprecated)
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())


def uninstall() -> None:
    """Undo `install` (the modules and the defaults)."""
    from spirad import options
    for name in TAICHI_DEFAULTS:
        options.reset_default(name)
    import spirad
    spirad.__dict__.pop("_lib", None)
    spirad.__dict__.pop("experimental", None)
    for name in [n for n in sys.modules if n == "taichi" or n.startswith("taichi.")]:
        del sys.modules[name]
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _AliasFinder)]
