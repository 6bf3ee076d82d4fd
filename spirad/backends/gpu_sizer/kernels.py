"""The sizer kernels of `shaders/sizer_kernel.py`, loaded once and compiled once per backend.

They are ordinary spirad kernels, compiled by the backend's own code generator on first use.
A sizer launch skips the signature check of `Kernel.__call__`: the runner always passes the same
argument kinds, so the program compiled for the first call serves every later one (per template
variant: `sizer_minmax` is specialised on the leaf dtype code): the generic program, not one
specialised on the first call's ndarray shapes (passes/shape_specialise), as the scratch
ndarrays grow.
"""
from __future__ import annotations


def load_kernel_module():
    """`shaders/sizer_kernel.py` (importable as `shaders.sizer_kernel` from a checkout; else
    loaded by path next to the `spirad` package)."""
    try:
        from shaders import sizer_kernel
        return sizer_kernel
    except ImportError:
        import importlib.util
        import os
        import sys
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))))
        spec = importlib.util.spec_from_file_location(
            "shaders.sizer_kernel", os.path.join(root, "shaders", "sizer_kernel.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        return mod


class SizerKernels:
    """Compiled sizer kernels of one backend, by (kernel name, template variant)."""

    def __init__(self):
        self._module = None
        self._compiled: dict = {}

    def run(self, name: str, args: tuple, variant=None) -> None:
        """Launch kernel `name` of the sizer module with `args` (recorded, not waited for)."""
        from ...runtime.launch import run_internal
        from ...runtime.shape_policy import shape_agnostic
        c = self._compiled.get((name, variant))
        if c is None:
            if self._module is None:
                self._module = load_kernel_module()
            with shape_agnostic():  # its scratch ndarrays grow: never one shape set
                c = self._compiled[(name, variant)] = getattr(self._module, name).compile(args)
        run_internal(c, args)
