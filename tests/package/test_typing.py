"""The public API as type checkers and readers see it: `spirad.__all__` lists exactly the public
surface (a name imported into a py.typed package's `__init__` is private to type checkers unless
listed), every name in it has a docstring, and mypy accepts a small program using the API
(tests/package/typed_program.py, whose `assert_type`s pin the inferred types) and rejects a
wrong one. mypy is part of the `test` extra: a missing mypy fails here. About a minute (mypy
reads spirad's source and numpy's stubs)."""
from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
import types

import spirad as sd

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# modules that are part of the surface (`sd.math.vec3`); every other submodule is internal
PUBLIC_MODULES = {"ad", "algorithms", "graph", "linalg", "math", "profiler", "simt", "sparse",
                  "tools", "types", "ui"}
# constants of built-in types carry no docstring of their own (`sd.cpu == "cpu"`); docs/api.md
# and the guide document them
CONSTANT_TYPES = (str, int, float, tuple)

WRONG_PROGRAM = '''import spirad as sd
n: int = sd.ndarray(sd.f32, (4,))
sd.sync(1)
f = sd.field(sd.f32, 8)
f.no_such_method()
'''


def _public_names() -> set:
    return {n for n in dir(sd) if not n.startswith("_")
            and not isinstance(getattr(sd, n), types.ModuleType)
            and n != "annotations"} | PUBLIC_MODULES | {"__version__"}


def test_all_lists_the_public_surface():
    listed = set(sd.__all__)
    assert len(sd.__all__) == len(listed), "a name listed twice in spirad.__all__"
    assert listed == _public_names(), (
        f"missing from spirad.__all__: {sorted(_public_names() - listed)}; "
        f"listed but not public: {sorted(listed - _public_names())}")


def test_every_public_name_has_a_docstring():
    missing = []
    for n in sd.__all__:
        obj = getattr(sd, n)
        if isinstance(obj, CONSTANT_TYPES) and not isinstance(obj, type):
            continue
        if not (inspect.getdoc(obj) or "").strip():
            missing.append(n)
    assert not missing, f"{len(missing)} public names without a docstring: {missing}"


def _mypy(cache, *files):
    return subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent",
                           "--no-incremental", "--cache-dir", str(cache), "--show-error-codes",
                           "--no-color-output", *files],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_mypy_accepts_a_program_using_the_api_and_rejects_a_wrong_one(tmp_path):
    wrong = tmp_path / "wrong_program.py"
    wrong.write_text(WRONG_PROGRAM)
    r = _mypy(tmp_path / "mypy_cache", os.path.join(HERE, "typed_program.py"), str(wrong))
    out = r.stdout + r.stderr
    assert "No module named mypy" not in out, "mypy missing: pip install -e '.[test]'"
    errors = [ln for ln in out.splitlines() if ": error:" in ln]
    assert not [e for e in errors if "typed_program.py" in e], out
    wrong_lines = {int(m.group(1)) for e in errors
                   if (m := re.search(r"wrong_program\.py:(\d+): error", e))}
    assert wrong_lines == {2, 3, 5}, out  # the Ndarray as int, an argument too many, the method


def test_typed_program_runs():
    r = subprocess.run([sys.executable, os.path.join(HERE, "typed_program.py")], cwd=ROOT,
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stdout + r.stderr
