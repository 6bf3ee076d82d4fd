"""Kernels generated as source text (a program whose shape depends on a parameter: n ndarrays,
n fields): spirad compiles a kernel from its source file, so each is written to a module of its
own in a temporary folder and imported from there."""
from __future__ import annotations

import importlib.util
import itertools
import tempfile
from pathlib import Path

_DIR = Path(tempfile.mkdtemp(prefix="spirad_generated_"))
_count = itertools.count()


def load_kernel(name: str, source: str):
    """The object `name` (a kernel) of a module made of `source`."""
    path = _DIR / f"{name}_{next(_count)}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)
