"""The distributions users install: `python -m build` makes the sdist and, from it, the wheel;
`twine check` passes both; a fresh virtual environment with only the wheel installed runs the
README's first example: on the CPU with `pip install spirad` alone, on lavapipe with
`spirad[vulkan]`, and on the CPU under every Python version the classifiers name.

The build runs without isolation (`--no-isolation`: the setuptools already installed, as
scripts/install.sh's pip uses), once per test session; the wheel is built from the sdist, so a
file missing from the sdist fails here too. Each venv is empty (`python -m venv --without-pip`,
driven by this interpreter's pip), so what the test sees is what `pip install spirad` gives a
user: the wheel's files, its metadata and its declared dependencies, nothing from this checkout
or this environment. About a minute for this Python, most of it pip resolving numpy / llvmlite /
vulkan (from its cache when warm), and half a minute per other Python. The other Pythons are
found under pyenv or on PATH (`python3.X`); with SPIRAD_REQUIRE_PYTHONS=1 (CI) a missing one
fails, elsewhere it is skipped with the reason."""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

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


def classified_pythons() -> list:
    """The Python versions pyproject.toml's classifiers say are tested ('3.11', ...)."""
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        return re.findall(r'"Programming Language :: Python :: (3\.\d+)"', f.read())


def find_python(version: str):
    """An interpreter of `version` on this machine (pyenv's, then PATH's: pyenv's shims on PATH
    run only the selected version), or None."""
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", "python")))
    if found:
        return found[-1]
    exe = shutil.which(f"python{version}")
    return exe if exe and "shims" not in exe else None


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """(wheel, sdist) built from this checkout by `python -m build`, checked by twine."""
    out = tmp_path_factory.mktemp("dist")
    src = tmp_path_factory.mktemp("src") / "spirad"  # a copy: builds write into their source
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "__pycache__", "*.egg-info", "build", "dist", ".*cache*", ".hypothesis", "site"))
    _run([sys.executable, "-m", "build", "--no-isolation", "-o", str(out), str(src)],
         env={**os.environ, "PIP_NO_INPUT": "1"})
    wheel = next(out.glob("spirad-*.whl"))
    sdist = next(out.glob("spirad-*.tar.gz"))
    _run([sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)])
    return wheel, sdist


def test_distributions_hold_the_package(dist):
    wheel, sdist = dist
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    for pkg in ("spirad", "kernel_ir", "passes", "sizer", "spirv_codegen", "gfx_runtime", "llvm_codegen",
                "shaders"):
        assert pkg in tops, f"{pkg} missing from {wheel.name}"
    assert "tests" not in tops and "benchmarks" not in tops
    assert "spirad/py.typed" in names  # PEP 561: type checkers read the inline annotations
    assert "spirad/interop/jax.py" in names and "spirad/interop/torch_library.py" in names
    members = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    assert {"README.md", "LICENSE", "pyproject.toml", "spirad/__init__.py"} <= members
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert f"Classifier: Programming Language :: Python :: {running}" in meta, \
        f"the suite runs on Python {running}: name it in pyproject.toml's classifiers"


def _venv(tmp_path, wheel, python=sys.executable, extra=""):
    """An empty venv of `python` with the wheel (and `extra`) installed: (its python, env)."""
    venv = tmp_path / "venv"
    _run([python, "-m", "venv", "--without-pip", str(venv)])
    py = str(venv / "bin" / "python")
    env = _clean_env(tmp_path)
    _run([sys.executable, "-m", "pip", "--python", py, "install", "-q",
          "--disable-pip-version-check", f"{wheel}{extra}"], env=env)
    return py, env


@pytest.mark.parametrize("version", [v for v in classified_pythons()
                                     if v != f"{sys.version_info.major}.{sys.version_info.minor}"])
def test_readme_example_from_the_wheel_on_each_classified_python(version, dist, tmp_path):
    python = find_python(version)
    if python is None:
        if os.environ.get("SPIRAD_REQUIRE_PYTHONS") == "1":
            pytest.fail(f"Python {version} is in the classifiers but not on this machine")
        pytest.skip(f"no Python {version} here (PATH, pyenv)")
    py, env = _venv(tmp_path, dist[0], python)
    (tmp_path / "example.py").write_text(readme_example())
    work = tmp_path / "elsewhere"
    work.mkdir()
    r = _run([py, str(tmp_path / "example.py")], cwd=work, env=env)
    _check_printed(r.stdout)
    v = _run([py, "-c", "import sys, spirad; print(sys.version_info[:2], spirad.__file__)"],
             cwd=work, env=env).stdout
    assert f"(3, {version.split('.')[1]})" in v and str(tmp_path / "venv") in v


def test_readme_example_in_a_fresh_venv(dist, tmp_path):
    example = readme_example()
    assert "sd.init(arch=sd.cpu)" in example and "pip install spirad" in open(
        os.path.join(ROOT, "README.md")).read()
    wheel = dist[0]
    py, env = _venv(tmp_path, wheel)
    venv = tmp_path / "venv"
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
    _run([sys.executable, "-m", "pip", "--python", py, "install", "-q",
          "--disable-pip-version-check", f"{wheel}[vulkan]"], env=env)
    info = _run([py, "-m", "spirad"], cwd=work, env=env).stdout
    if not re.search(r"^  vulkan +available$", info, re.M):
        if "vulkan" in required_archs():
            pytest.fail(f"vulkan required but not available in the fresh venv:\n{info}")
        pytest.skip("no Vulkan driver on this machine")
    (tmp_path / "example_vk.py").write_text(example.replace("sd.init(arch=sd.cpu)",
                                                            "sd.init(arch=sd.vulkan)"))
    r = _run([py, str(tmp_path / "example_vk.py")], cwd=work, env=env)
    _check_printed(r.stdout)
