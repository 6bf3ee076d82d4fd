"""A program run in a fresh Python process that imports `quadrants` (spirad's shim,
spirad/compat/quadrants_shim, ahead of the repository on PYTHONPATH): importing the shim changes
process defaults, so a test that checks what a Quadrants program sees runs it apart."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
SHIM = os.path.join(ROOT, "spirad", "compat", "quadrants_shim")


def shim_env(drop=(), **set_vars) -> dict:
    """This process's environment with the shim and the repository on PYTHONPATH, the variables
    of `drop` removed (so the child sees the defaults) and `set_vars` set."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SHIM, ROOT]))
    for name in drop:
        env.pop(name, None)
    env.update(set_vars)
    return env


def run_program(tmp_path, source: str, drop=(), name: str = "qd_program.py", timeout: int = 300,
                **set_vars) -> subprocess.CompletedProcess:
    """Runs `source` as a script (written to tmp_path/name) in the shim's environment (see
    shim_env), from the repository root; asserts it exits 0 (its stderr the message)."""
    script = tmp_path / name
    script.write_text(source)
    r = subprocess.run([sys.executable, str(script)], env=shim_env(drop, **set_vars),
                       capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return r
