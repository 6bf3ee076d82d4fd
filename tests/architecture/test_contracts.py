"""The declared contracts are honoured (engineering 14):

- every SPIR-V runtime derives from `gfx_runtime.protocol.GfxRuntime` and implements each call
  that has no default, with the protocol's parameters; its buffers derive from `GfxBuffer`;
- the backends derive from `spirad.backends.base.BackendBase`, the SPIR-V ones (vulkan, metal)
  from `SpirvBackend`, and every program class from `backends.program.Program`;
- no backend probes a runtime or a program with getattr / hasattr.
"""
import ast
import inspect

import pytest

from tests.architecture.import_graph import ROOT


def _runtimes():
    import gfx_runtime.protocol as P
    from gfx_runtime.vulkan.buffer import Buffer as VkBuffer
    from gfx_runtime.vulkan.runtime import VulkanRuntime
    out = [(VulkanRuntime, VkBuffer)]
    try:
        from gfx_runtime.wgpu.buffer import Buffer as WgBuffer
        from gfx_runtime.wgpu.runtime import WgpuRuntime
        out.append((WgpuRuntime, WgBuffer))
    except ImportError:  # an installation without wgpu
        pass
    return P, out


def test_runtimes_implement_the_protocol():
    P, pairs = _runtimes()
    for rt, buf in pairs:
        assert issubclass(rt, P.GfxRuntime) and issubclass(buf, P.GfxBuffer)
        for name in P.REQUIRED:
            assert getattr(rt, name) is not getattr(P.GfxRuntime, name), (rt.__name__, name)
            want = list(inspect.signature(getattr(P.GfxRuntime, name)).parameters)
            got = list(inspect.signature(getattr(rt, name)).parameters)
            assert got == want, (rt.__name__, name, got, want)
        for name in P.BUFFER_REQUIRED:
            assert getattr(buf, name) is not getattr(P.GfxBuffer, name), (buf.__name__, name)


@pytest.mark.parametrize("arch", ["cpu", "vulkan", "metal", "cuda", "amdgpu", "interp"])
def test_backends_derive_from_the_declared_bases(arch):
    import importlib
    from spirad.backends import BACKENDS
    from spirad.backends.base import BackendBase
    from spirad.backends.spirv_backend import SpirvBackend
    cls = importlib.import_module(f"spirad.backends.{BACKENDS[arch]}").Backend
    assert issubclass(cls, BackendBase)
    assert issubclass(cls, SpirvBackend) == (arch in ("vulkan", "metal"))


def test_program_classes_derive_from_program():
    from spirad.backends.cpu import CpuProgram
    from spirad.backends.program import Program
    from spirad.backends.spirv_backend import SpirvProgram
    assert issubclass(CpuProgram, Program) and issubclass(SpirvProgram, Program)


def test_no_probing_of_runtimes_or_programs():
    bad = []
    for p in sorted((ROOT / "spirad" / "backends").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in ("getattr", "hasattr") and node.args:
                target = ast.unparse(node.args[0])
                if target in ("self.rt", "rt", "program", "p", "self.program"):
                    bad.append(f"{p.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not bad, "declare the hook in the contract instead of probing:\n" + "\n".join(bad)
