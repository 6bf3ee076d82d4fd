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


def arch_status(arch: str, for_gpu: bool = False) -> tuple[bool, str]:
    """(available, why not): whether `arch` can run here — for `sd.gpu` (`for_gpu`), whether it
    may pick it (a device, not an emulation) — and otherwise the reason, naming what is missing."""
    if not is_implemented(arch):
        return False, "not implemented in this version of spirad"
    try:
        cls = backend_class(arch)
        if cls.picked_by_gpu() if for_gpu else cls.is_available():
            return True, ""
        if for_gpu and cls.is_available():
            return False, (f"only emulated here; sd.gpu picks devices, ask for arch={arch} by name "
                           f"to run the emulation")
        return False, cls.unavailable_reason() or "not available"
    except Exception as e:  # noqa: BLE001 - a broken install is a reason too, not a crash
        return False, f"{type(e).__name__}: {e}"


def resolve_arch(arch: str) -> str:
    if arch == "gpu":
        reasons = []
        for a in GPU_ORDER:
            ok, why = arch_status(a, for_gpu=True)
            if ok:
                return a
            reasons.append(f"{a}: {why}")
        raise SpiradArchError("arch=gpu: no GPU backend is available on this machine (tried "
                              + ", ".join(GPU_ORDER) + "):\n  " + "\n  ".join(reasons)
                              + "\nuse arch=sd.cpu, or install what one of them needs "
                                "(`python -m spirad` lists every arch)")
    return arch


def load_backend(arch: str, state):
    cls = backend_class(arch)
    if not cls.is_available():
        raise SpiradArchError(f"arch={arch} is not available on this machine: {cls.unavailable_reason()}")
    return cls(state)


