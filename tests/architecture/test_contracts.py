"""The declared contracts are honoured (engineering 14):

- every SPIR-V runtime derives from `gfx_runtime.protocol.GfxRuntime` and implements each call
  that has no default, with the protocol's parameters; its buffers derive from `GfxBuffer`, its
  caps from `GfxCaps` (one caps type: the code generator reads its fields directly);
- the backends derive from `spirad.backends.base.BackendBase`, the SPIR-V ones (vulkan, metal)
  from `SpirvBackend`, and every program class from `backends.program.Program`;
- every backend of `BACKENDS` compiles to a `Program`; `plan_adstack` returns an
  `AdstackTaskPlan`;
- no backend probes a runtime or a program with getattr / hasattr, and the SPIR-V code
  generator does not probe its caps.
"""
import ast
import inspect

import pytest

from spirad.backends import BACKENDS
from tests.architecture.import_graph import ROOT
from tests.support.archs import EVERY_ARCH, exactly, test_archs


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


def test_caps_types_derive_from_gfx_caps():
    import gfx_runtime.protocol as P
    from gfx_runtime.vulkan.device import DeviceCaps
    from gfx_runtime.wgpu.caps import WgpuCaps
    assert issubclass(DeviceCaps, P.GfxCaps) and issubclass(WgpuCaps, P.GfxCaps)


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


@pytest.mark.parametrize("arch", list(BACKENDS))
def test_backends_derive_from_the_declared_bases(arch):
    import importlib
    from spirad.backends.base import BackendBase
    from spirad.backends.spirv_backend import SpirvBackend
    cls = importlib.import_module(f"spirad.backends.{BACKENDS[arch]}").Backend
    assert issubclass(cls, BackendBase)
    assert issubclass(cls, SpirvBackend) == (arch in ("vulkan", "metal"))


def test_program_classes_derive_from_program():
    from spirad.backends.cpu import CpuProgram
    from spirad.backends.interp import InterpProgram
    from spirad.backends.llvm_gpu import GpuProgram
    from spirad.backends.program import Program
    from spirad.backends.spirv_backend import SpirvProgram
    for cls in (CpuProgram, GpuProgram, InterpProgram, SpirvProgram):
        assert issubclass(cls, Program), cls.__name__


@test_archs(EVERY_ARCH | exactly("interp"))
def test_every_backend_compiles_a_program(arch):
    """Each backend of `BACKENDS` hands the launch path a `Program` (what `status_error` and
    the offline cache read), for a kernel with a range read from a field too."""
    import spirad as sd
    from spirad.backends import BACKENDS
    from spirad.backends.program import Program
    from spirad.runtime import state
    assert set(BACKENDS) == set(EVERY_ARCH) | {"interp"}  # a new backend: add it above
    be = state.backend()
    made = []
    compile_ = be.compile
    be.compile = lambda tl, abi: made.append(compile_(tl, abi)) or made[-1]
    n = sd.field(sd.i32, shape=())
    x = sd.field(sd.f32, shape=8)

    @sd.kernel
    def fill():
        for i in range(n[None]):
            x[i] = i * 2.0

    n[None] = 5
    fill()
    assert list(x.to_numpy()) == [0, 2, 4, 6, 8, 0, 0, 0]
    assert made and all(isinstance(p, Program) for p in made), [type(p) for p in made]
    if arch == "cpu":  # its compiled form is a declared record, not a positional tuple
        from spirad.backends.cpu import CpuBlob
        assert all(type(p.blob) is CpuBlob for p in made), [type(p.blob) for p in made]
    assert made[-1].task_names and made[-1].name


@test_archs(EVERY_ARCH)
def test_plan_adstack_returns_the_record(arch):
    """A reverse-mode task with a stack: each backend's plan of its sized stacks is an
    `AdstackTaskPlan` with the sizer's layout."""
    import numpy as np

    import spirad as sd
    from spirad.backends.program import AdstackTaskPlan
    n = sd.field(sd.i32, shape=())
    x = sd.field(sd.f32, shape=4, needs_grad=True)
    y = sd.field(sd.f32, shape=4, needs_grad=True)

    @sd.kernel
    def k():
        for i in x:
            v = x[i]
            for _ in range(n[None]):
                v = sd.sin(v)
            y[i] = v

    n[None] = 3
    x.from_numpy(np.ones(4, np.float32))
    k()
    y.grad.fill(1)
    k.grad()
    v1 = np.sin(1.0)
    np.testing.assert_allclose(x.grad.to_numpy(), np.cos(1.0) * np.cos(v1) * np.cos(np.sin(v1)),
                               rtol=1e-5)
    ad = k._plans[1].adstack
    plans = [(s, t) for s, t in zip(ad.sized, ad.tasks) if s is not None]
    assert plans and all(type(t) is AdstackTaskPlan and t.layout is s.layout for s, t in plans)


def test_no_probing_of_runtimes_or_programs():
    bad = []
    for p in sorted((ROOT / "spirad" / "backends").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in ("getattr", "hasattr") and node.args:
                target = ast.unparse(node.args[0])
                if target in ("self.rt", "rt", "program", "p", "self.program"):
                    bad.append(f"{p.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    for p in sorted((ROOT / "spirv_codegen").glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in ("getattr", "hasattr") and node.args and \
                    "caps" in ast.unparse(node.args[0]):
                bad.append(f"{p.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not bad, "declare the hook in the contract instead of probing:\n" + "\n".join(bad)
