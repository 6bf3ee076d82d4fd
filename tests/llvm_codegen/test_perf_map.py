"""Linux perf names for JIT task functions (`llvm_codegen.perf_map`, `SPIRAD_PERF_MAP`)."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

from llvm_codegen import perf_map
from llvm_codegen.cpu_runtime import CpuRuntime
from tests.support.task_ir import chain_task_ir

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="perf maps: Linux")


def _map_lines(pid):
    with open(f"/tmp/perf-{pid}.map") as f:
        return [line.split() for line in f]


def test_a_linked_task_function_is_named_with_its_address_and_size():
    rt = CpuRuntime(perf_map="objects")
    ir = chain_task_ir("perf_map_probe", "float", "0x3FF0000000000000", "0x3FF0000000000000")
    obj, _ = rt.compile_object(ir)
    size = perf_map.elf_symbol_sizes(obj)["perf_map_probe"]
    assert 16 < size < 4096
    fn = rt.load_object(obj, ["perf_map_probe"]).function("perf_map_probe")
    addr = ctypes.cast(fn, ctypes.c_void_p).value
    assert [f"{addr:x}", f"{size:x}", "perf_map_probe"] in _map_lines(os.getpid())
    with open(f"/tmp/perf-{os.getpid()}-objects/perf_map_probe.o", "rb") as f:
        assert f.read() == obj


def test_no_map_unless_asked():
    rt = CpuRuntime()
    ir = chain_task_ir("perf_map_silent", "float", "0x3FF0000000000000", "0x3FF0000000000000")
    rt.load(ir, ["perf_map_silent"])
    path = f"/tmp/perf-{os.getpid()}.map"
    assert not os.path.exists(path) or all(
        line[2] != "perf_map_silent" for line in _map_lines(os.getpid()))


def test_a_kernel_is_named_through_the_environment(tmp_path):
    """The switch reaches the CPU backend: a kernel's task function shows up by name."""
    code = textwrap.dedent("""
        import os, spirad as sd
        sd.init(arch="cpu", offline_cache=False)
        x = sd.field(sd.f32, 64)
        @sd.kernel
        def perf_probe():
            for i in x:
                x[i] = i * 0.5
        perf_probe()
        print(os.getpid())
    """)
    script = tmp_path / "probe.py"
    script.write_text(code)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, SPIRAD_PERF_MAP="1",
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    pid = int(r.stdout.split()[-1])
    try:
        names = [line[2] for line in _map_lines(pid)]
    finally:
        os.remove(f"/tmp/perf-{pid}.map")
    assert any("perf_probe" in n for n in names), names
    assert not os.path.exists(f"/tmp/perf-{pid}-objects")


def test_elf_sizes_of_something_else_is_empty():
    assert perf_map.elf_symbol_sizes(b"\xcf\xfa\xed\xfe" + bytes(60)) == {}
