"""A fresh virtual environment with only the package installed runs the README's first example:
on the CPU with `pip install spirad` alone, on lavapipe with `spirad[vulkan]`.

The package is built once from this checkout as a wheel (`pip wheel --no-build-isolation`: the
build uses the setuptools already installed, as scripts/install.sh's pip does) and installed
into an empty venv (`python -m venv --without-pip`, driven by this interpreter's pip), so what
the test sees is what `pip install .` gives a user: the wheel's files, its metadata and its
declared dependencies, nothing from this checkout or this environment. About a minute, most of
it pip resolving numpy / llvmlite / vulkan (from its cache when warm)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.support.archs import required_archs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def readme_example() -> str:
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    return re.search(r"^```python\n(.*?)^```", text, re.M | re.S).group(1)


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))}\n{r.stdout}\n{r.stderr}"
    return r


def _clean_env(tmp):
    """No PYTHONPATH (the checkout must not be importable) and a cache of the venv's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SPIRAD_"))}
    env["SPIRAD_CACHE_DIR"] = str(tmp / "cache")
    return env


def _check_printed(out: str):
    """The example prints x[:4] = sin(0.01 i)."""
    import numpy as np
    vals = [float(v) for v in out.strip().strip("[]").split()]
    np.testing.assert_allclose(vals, np.sin(0.01 * np.arange(4)), atol=1e-6)


def test_readme_example_in_a_fresh_venv(tmp_path):
    example = readme_example()
    assert "sd.init(arch=sd.cpu)" in example and "pip install spirad" in open(
        os.path.join(ROOT, "README.md")).read()
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "-w", str(tmp_path / "dist"), ROOT], env={**os.environ, "PIP_NO_INPUT": "1"})
    wheel = next((tmp_path / "dist").glob("spirad-*.whl"))
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    py = str(venv / "bin" / "python")
    env = _clean_env(tmp_path)
    pip = [sys.executable, "-m", "pip", "--python", py, "install", "-q", "--disable-pip-version-check"]
    _run(pip + [str(wheel)], env=env)
    (tmp_path / "example.py").write_text(example)
    work = tmp_path / "elsewhere"  # not the checkout: `import spirad` must find the venv's
    work.mkdir()
    r = _run([py, str(tmp_path / "example.py")], cwd=work, env=env)
    _check_printed(r.stdout)
    where = _run([py, "-c", "import spirad, importlib.metadata as m; print(spirad.__file__); "
                  "print(sorted(d.metadata['Name'] for d in m.distributions()))"],
                 cwd=work, env=env).stdout
    assert str(venv) in where.splitlines()[0]
    assert "torch" not in where and "vulkan" not in where  # only what `pip install spirad` brings
    info = _run([py, "-m", "spirad"], cwd=work, env=env).stdout
    assert re.search(r"^  cpu +available$", info, re.M)
    assert "pip install 'spirad[vulkan]'" in info  # what to install for vulkan

    # with the vulkan extra, the same example on lavapipe
    _run(pip + [f"{wheel}[vulkan]"], env=env)
    info = _run([py, "-m", "spirad"], cwd=work, env=env).stdout
    if not re.search(r"^  vulkan +available$", info, re.M):
        if "vulkan" in required_archs():
            pytest.fail(f"vulkan required but not available in the fresh venv:\n{info}")
        pytest.skip("no Vulkan driver on this machine")
    (tmp_path / "example_vk.py").write_text(example.replace("sd.init(arch=sd.cpu)",
                                                            "sd.init(arch=sd.vulkan)"))
    r = _run([py, str(tmp_path / "example_vk.py")], cwd=work, env=env)
    _check_printed(r.stdout)
