"""The shell around the language: `sd.__version__`, `python -m spirad`, the `spirad` logger and the
kernel profiler."""
from __future__ import annotations

import logging
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, exactly, init_debug, test_archs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(args, env=None, timeout=180):
    e = {**os.environ, "PYTHONPATH": ROOT, **(env or {})}
    return subprocess.run([sys.executable, "-m", "spirad", *args], capture_output=True, text=True,
                          env=e, timeout=timeout, cwd=ROOT)


def test_version():
    import tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        meta = tomllib.load(f)
    assert re.fullmatch(r"\d+\.\d+\.\d+", sd.__version__)
    assert "version" in meta["project"]["dynamic"]  # read from spirad/_version.py, one place
    from spirad.compile import offline_cache
    assert offline_cache.VERSION == sd.__version__


def test_python_m_spirad_lists_every_arch_and_the_cache(tmp_path):
    r = _run([], env={"SPIRAD_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith(f"spirad {sd.__version__} (")
    for arch in ("cpu", "vulkan", "metal", "cuda", "amdgpu"):
        assert re.search(rf"^  {arch} +(available|not available: .+)$", out, re.M), out
    assert re.search(r"^  cpu +available$", out, re.M)
    assert re.search(r"^  vulkan +available$", out, re.M), out  # lavapipe in CI
    assert "sd.gpu picks: vulkan" in out or "sd.gpu picks: cuda" in out or \
        "sd.gpu picks: amdgpu" in out
    assert f"offline cache: {tmp_path} (0 entries, 0 B; cap 1.0 GiB)" in out


def test_python_m_spirad_reports_the_cpu_isa_and_lanes(tmp_path):
    """The CPU backend's target: its CPU, the ISA and vector width it compiles for, the SPMD
    lanes; SPIRAD_CPU_TARGET and SPIRAD_CPU_SPMD_LANES show (x86 hosts: SSE's 128 bits)."""
    from llvm_codegen import cpu_target
    host = cpu_target.host_isa()
    env = {"SPIRAD_CACHE_DIR": str(tmp_path)}
    for v in ("SPIRAD_CPU_TARGET", "SPIRAD_CPU_SPMD_LANES", "SPIRAD_CPU_SPMD"):
        env[v] = ""
    out = _run([], env=env).stdout
    f32 = host.lanes("f32")
    assert re.search(rf"^cpu target: \S+ \(host\), {re.escape(host.name)}: {host.bits}-bit vectors, "
                     rf"{f32} f32 / {f32 // 2} f64 lanes a register; SPMD lanes: {2 * f32} "
                     rf"\({f32} with a 64-bit value\)$", out, re.M), out
    if host.name in ("AVX2", "AVX-512"):
        out = _run([], env={**env, "SPIRAD_CPU_TARGET": "x86-64", "SPIRAD_CPU_SPMD_LANES": "4"})
        assert "cpu target: x86-64 (SPIRAD_CPU_TARGET=x86-64), SSE: 128-bit vectors, 4 f32 / " \
               "2 f64 lanes a register; SPMD lanes: 4 (SPIRAD_CPU_SPMD_LANES)" in out.stdout, out


def test_python_m_spirad_without_vulkan_says_why(tmp_path):
    """lavapipe hidden: Vulkan is not available, with the loader's reason and what to install."""
    r = _run([], env={"VK_ICD_FILENAMES": str(tmp_path / "no_such_icd.json"),
                      "SPIRAD_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("  vulkan "))
    assert "not available: " in line and ("mesa-vulkan-drivers" in line or "Vulkan" in line), line
    assert re.search(r"^  cpu +available$", r.stdout, re.M)
    if "SPIRAD_CUDA_EMULATE" not in os.environ or os.environ.get("SPIRAD_CUDA_EMULATE") != "1":
        pass
    assert "sd.gpu picks: vulkan" not in r.stdout


def test_cache_clear(tmp_path):
    env = {"SPIRAD_CACHE_DIR": str(tmp_path)}
    code = ("import spirad as sd\nsd.init(arch=sd.cpu)\nx = sd.field(sd.f32, shape=4)\n"
            "@sd.kernel\ndef k():\n    for i in x:\n        x[i] = i\nk()\n")
    script = tmp_path / "fill.py"
    script.write_text(code)
    subprocess.run([sys.executable, str(script)], check=True, env={**os.environ, "PYTHONPATH": ROOT,
                                                                  **env}, timeout=120)
    r = _run(["cache"], env=env)
    m = re.search(r"offline cache: .* \((\d+) entries, ", r.stdout)
    assert m and int(m.group(1)) >= 1, r.stdout
    r = _run(["cache", "clear"], env=env)
    assert r.returncode == 0 and f"cleared the offline cache {tmp_path}: {m.group(1)} entries" \
        in r.stdout, r.stdout + r.stderr
    assert "(0 entries, 0 B;" in _run(["cache"], env=env).stdout
    bad = _run(["cache", "wipe"], env=env)
    assert bad.returncode == 2 and "usage: python -m spirad" in bad.stderr


# -- logging -------------------------------------------------------------------------------------
@sd.kernel
def _logged_step(x: sd.template(), y: sd.template(), n: sd.i32):
    for i in x:
        c = x[i]
        for j in range(n):
            c = sd.sin(c)
        y[i] = c


@test_archs(archs=exactly("cpu", "vulkan"))
def test_log_lines_compile_cache_hit_and_sizing(arch, caplog):
    x = sd.field(sd.f32, shape=8, needs_grad=True)
    y = sd.field(sd.f32, shape=8, needs_grad=True)
    with caplog.at_level(logging.DEBUG, logger="spirad"):
        _logged_step(x, y, 3)
        _logged_step.grad(x, y, 3)
        _logged_step.grad(x, y, 5)   # new sizes: a sizing line
        sd.init(arch=arch, debug=init_debug())  # a new init, same options: from the cache
        x = sd.field(sd.f32, shape=8, needs_grad=True)
        y = sd.field(sd.f32, shape=8, needs_grad=True)
        _logged_step(x, y, 3)
    lines = [r.getMessage() for r in caplog.records if r.name == "spirad"]
    text = "\n".join(lines)
    assert re.search(rf"compiled kernel _logged_step \(forward, {arch}\) in [\d.]+ ms", text), text
    assert re.search(rf"compiled kernel _logged_step_grad \(adjoint, {arch}\) in [\d.]+ ms", text)
    sizing = [ln for ln in lines if ln.startswith("sized the adstacks of _logged_step_grad")]
    assert len(sizing) == 2 and "capacities [5]" in sizing[0] and "capacities [7]" in sizing[1], \
        sizing
    assert re.search(r"in [\d.]+ ms: task 0: capacities \[5\], strides \d+ B float", sizing[0])
    assert re.search(rf"loaded kernel _logged_step \(forward, {arch}\) from the offline cache in "
                     rf"[\d.]+ ms", text), text
    levels = {r.getMessage().split(" ")[0]: r.levelno for r in caplog.records if r.name == "spirad"}
    assert levels["compiled"] == logging.INFO and levels["sized"] == logging.DEBUG


def test_init_log_level_prints_to_stderr(tmp_path):
    script = tmp_path / "log.py"
    script.write_text("import spirad as sd\nsd.init(arch=sd.cpu, log_level=sd.INFO)\n"
                      "x = sd.field(sd.f32, shape=4)\n@sd.kernel\ndef k():\n    for i in x:\n"
                      "        x[i] = i\nk()\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": ROOT, "SPIRAD_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert re.search(r"^\[spirad\] compiled kernel k \(forward, cpu\) in [\d.]+ ms", r.stderr,
                     re.M), r.stderr
    assert f"[spirad] spirad {sd.__version__}: arch=cpu" in r.stderr


def test_no_log_output_by_default(tmp_path):
    script = tmp_path / "quiet.py"
    script.write_text("import spirad as sd\nsd.init(arch=sd.cpu)\nx = sd.field(sd.f32, shape=4)\n"
                      "@sd.kernel\ndef k():\n    for i in x:\n        x[i] = i\nk()\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": ROOT, "SPIRAD_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_bad_log_level():
    with pytest.raises(ValueError, match="log_level must be one of"):
        sd.init(arch=sd.cpu, log_level="loud")


# -- the kernel profiler -------------------------------------------------------------------------
@test_archs(archs=EVERY_ARCH)
def test_kernel_profiler(arch, capsys):
    sd.init(arch=arch, kernel_profiler=True)
    x = sd.field(sd.f32, shape=64, needs_grad=True)
    y = sd.field(sd.f32, shape=64, needs_grad=True)

    @sd.kernel
    def fill():
        for i in x:
            x[i] = i * 0.01

    for _ in range(3):
        fill()
    _logged_step(x, y, 4)
    _logged_step.grad(x, y, 4)
    _logged_step.grad(x, y, 4)
    stats = sd.profiler.query_kernel_profiler_info("fill")
    assert stats.counter == 3 and 0 < stats.min <= stats.avg <= stats.max
    assert abs(stats.total - 3 * stats.avg) < 1e-6
    assert sd.profiler.query_kernel_profiler_info("_logged_step_grad").counter == 2
    assert sd.profiler.query_kernel_profiler_info("never_launched").counter == 0
    total = sd.profiler.get_kernel_profiler_total_time()
    assert total > 0
    sd.profiler.print_kernel_profiler_info()
    out = capsys.readouterr().out
    source = "device timestamps" if arch == "vulkan" else "host times"  # metal: wgpu, host
    assert out.startswith(f"spirad kernel profiler: {arch} (") and source in out.splitlines()[0]
    rows = {m.group(6): m for m in re.finditer(
        r"^\[ *([\d.]+)% +([\d.]+) ms +(\d+)x \| +([\d.]+) +[\d.]+ +([\d.]+) ms\] (\w+)$", out, re.M)}
    assert set(rows) >= {"fill", "_logged_step", "_logged_step_grad"}, out
    assert rows["fill"].group(3) == "3" and rows["_logged_step_grad"].group(3) == "2"
    assert re.search(r"^total: [\d.]+ ms in \d+ launches$", out, re.M)
    totals = [float(m.group(2)) for m in rows.values()]
    assert totals == sorted(totals, reverse=True)  # by total time
    sd.print_kernel_profiler_info(mode="trace")  # Taichi's old top-level name; one line per launch
    trace = capsys.readouterr().out
    assert len(re.findall(r"^ +\d+: +[\d.]+ ms$", trace, re.M)) >= 6
    sd.profiler.clear_kernel_profiler_info()
    assert sd.profiler.query_kernel_profiler_info("fill").counter == 0
    assert x.to_numpy()[5] == np.float32(5) * np.float32(0.01)  # as without the profiler


@test_archs(archs=exactly("vulkan"))
def test_profiler_device_timestamps_many_launches(arch):
    """More launches than the timestamp pool holds between two waits: every one is counted."""
    sd.init(arch=arch, kernel_profiler=True)
    x = sd.field(sd.f32, shape=16)

    @sd.kernel
    def inc():
        for i in x:
            x[i] += 1.0

    for _ in range(700):
        inc()
    s = sd.profiler.query_kernel_profiler_info("inc")
    assert s.counter == 700 and s.min > 0
    assert x[0] == 700.0


def test_profiler_off():
    sd.init(arch=sd.cpu)
    with pytest.raises(sd.SpiradError, match=r"kernel profiler is off: call "
                                             r"sd\.init\(\.\.\., kernel_profiler=True\)"):
        sd.profiler.print_kernel_profiler_info()
