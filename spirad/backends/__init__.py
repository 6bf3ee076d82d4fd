"""Backends, one module per arch, each defining `Backend`: a subclass of
`spirad.backends.base.BackendBase`, which lists every hook with its default. This package loads
them by name (`load_backend`), importing a backend module only when its arch is asked for.

Shared helpers: `adstack_support` (stack descriptions, heap growth, overflow errors),
`bounds_support` (debug bounds-check errors), the `gpu_sizer` package (adstack sizing on the device for the
GPU backends).
"""
from __future__ import annotations

import importlib
import importlib.util

from kernel_ir.errors import SpiradArchError

BACKENDS = {"cpu": "cpu", "vulkan": "vulkan", "metal": "metal", "cuda": "cuda", "amdgpu": "amdgpu",
            "interp": "interp"}
GPU_ORDER = ("cuda", "amdgpu", "metal", "vulkan")  # metal: only where a Metal GPU is (macOS)


def is_implemented(arch: str) -> bool:
    """Does this installation of spirad have a backend module for `arch`?"""
    mod = BACKENDS.get(arch)
    return mod is not None and importlib.util.find_spec(f"spirad.backends.{mod}") is not None


def backend_class(arch: str):
    """The `Backend` class of `arch` (imports its module)."""
    mod = BACKENDS.get(arch)
    if mod is None:
        raise SpiradArchError(f"unknown arch {arch!r}")
    if not is_implemented(arch):
        raise SpiradArchError(f"arch={arch} is not implemented in this version of spirad; "
                              f"use sd.vulkan or sd.cpu (or sd.gpu to pick any GPU backend)")
    return importlib.import_module(f"spirad.backends.{mod}").Backend


def arch_available(arch: str) -> bool:
    if not is_implemented(arch):
        return False
    return backend_class(arch).is_available()


def resolve_arch(arch: str) -> str:
    if arch == "gpu":
        for a in GPU_ORDER:
            if is_implemented(a) and backend_class(a).picked_by_gpu():
                return a
        raise SpiradArchError("arch=gpu: no GPU backend is available (tried " + ", ".join(GPU_ORDER) + ")")
    return arch


def load_backend(arch: str, state):
    cls = backend_class(arch)
    if not cls.is_available():
        raise SpiradArchError(f"arch={arch} is not available on this machine: {cls.unavailable_reason()}")
    return cls(state)


