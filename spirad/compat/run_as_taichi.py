"""Run a Taichi program unchanged on spirad: `import taichi` gives spirad.

    python -m spirad.compat.run_as_taichi [--arch cpu|vulkan|...] script.py [script args...]

The script runs as `__main__` with its own directory first on sys.path (as `python script.py`
would). `--arch` overrides the arch the script passes to `ti.init` (like Taichi's `TI_ARCH`
environment variable), so a script that asks for `ti.cuda` or `ti.gpu` can run on the CPU.
"""
from __future__ import annotations

import argparse
import functools
import os
import runpy
import sys


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m spirad.compat.run_as_taichi",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", help="arch for every ti.init() of the script (overrides its arch=)")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    ns = p.parse_args(argv)
    from . import taichi_alias
    taichi_alias.install()
    if ns.arch:
        force_arch(ns.arch)
    script = os.path.abspath(ns.script)
    sys.argv = [script] + ns.args
    sys.path.insert(0, os.path.dirname(script))
    runpy.run_path(script, run_name="__main__")


def force_arch(arch: str) -> None:
    """Every later `spirad.init(...)` (`ti.init`) uses `arch`, whatever the caller passes."""
    import spirad
    init = getattr(spirad.init, "__wrapped__", spirad.init)

    @functools.wraps(init)
    def forced(_arch=None, **kwargs):
        kwargs.pop("arch", None)
        return init(arch, **kwargs)

    spirad.init = forced


if __name__ == "__main__":
    main()
