"""The compile pipeline, in order: frontend -> passes -> offload -> codegen (per backend).

    parse (frontend.compile_kernel) -> inline_calls -> simplify -> dce -> offload
        -> simplify_tasks -> dce_tasks -> backend.compile

With `verify=True` (tests, `init(debug=True)`) the verifier runs after every stage. Backends are
modules of `spirad.backends`, loaded by name on first use.
"""
from __future__ import annotations

import importlib
import importlib.util
import os

from kernel_ir.errors import SpiradArchError
from kernel_ir import verifier
from kernel_ir.nodes import KernelIR, TaskList
from .passes.dce import dce_kernel, dce_tasks
from .passes.inline import inline_calls
from .passes.offload import offload
from .passes.simplify import simplify_kernel, simplify_tasks

KERNEL_STAGES = (("inline", inline_calls), ("simplify", simplify_kernel), ("dce", dce_kernel))
TASK_STAGES = (("simplify_tasks", simplify_tasks), ("dce_tasks", dce_tasks))

BACKENDS = {"cpu": "cpu", "vulkan": "vulkan", "metal": "metal", "cuda": "cuda", "amdgpu": "amdgpu",
            "interp": "interp"}
GPU_ORDER = ("cuda", "vulkan", "metal", "amdgpu")


def lower(k: KernelIR, verify: bool = False) -> TaskList:
    if verify:
        verifier.verify_kernel(k)
    for name, stage in KERNEL_STAGES:
        k = stage(k)
        if verify:
            verifier.verify_kernel(k, inlined=True)
    tl = offload(k)
    if verify:
        verifier.verify_tasks(tl)
    for name, stage in TASK_STAGES:
        tl = stage(tl)
        if verify:
            verifier.verify_tasks(tl)
    return tl


def is_implemented(arch: str) -> bool:
    """Does this installation of spirad have a backend module for `arch`?"""
    mod = BACKENDS.get(arch)
    return mod is not None and importlib.util.find_spec(f"spirad.backends.{mod}") is not None


def backend_module(arch: str):
    mod = BACKENDS.get(arch)
    if mod is None:
        raise SpiradArchError(f"unknown arch {arch!r}")
    if not is_implemented(arch):
        raise SpiradArchError(f"arch={arch} is not implemented in this version of spirad; "
                              f"use sd.vulkan or sd.cpu (or sd.gpu to pick any GPU backend)")
    return importlib.import_module(f"spirad.backends.{mod}")


def arch_available(arch: str) -> bool:
    if not is_implemented(arch):
        return False
    return backend_module(arch).is_available()


def resolve_arch(arch: str) -> str:
    if arch == "gpu":
        for a in GPU_ORDER:
            if arch_available(a):
                return a
        raise SpiradArchError("arch=gpu: no GPU backend is available (tried " + ", ".join(GPU_ORDER) + ")")
    return arch


def load_backend(arch: str, state):
    mod = backend_module(arch)
    if not mod.is_available():
        raise SpiradArchError(f"arch={arch} is not available on this machine: {mod.unavailable_reason()}")
    return mod.create(state)


def debug_enabled(state) -> bool:
    return state.debug or os.environ.get("SPIRAD_VERIFY") == "1"
