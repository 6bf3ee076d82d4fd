"""Run a Taichi program unchanged on spirad: `import taichi` gives spirad.

    python -m spirad.compat.run_as_taichi [--arch cpu|vulkan|...] [--init KEY=JSON ...] script.py [script args...]

The script runs as `__main__` with its own directory first on sys.path (as `python script.py`
would). `--arch` overrides the arch the script passes to `ti.init` (like Taichi's `TI_ARCH`
environment variable), so a script that asks for `ti.cuda` or `ti.gpu` can run on the CPU.
`--init KEY=JSON` adds a keyword to every `ti.init` of the script, over its own: e.g.
`--init check_bounds=false` runs a program that indexes out of range as Taichi runs it (Taichi
checks bounds only under `debug=True`; spirad stops such a launch with `SpiradOutOfBoundsError`).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import runpy
import sys


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m spirad.compat.run_as_taichi",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", help="arch for every ti.init() of the script (overrides its arch=)")
    p.add_argument("--init", action="append", default=[], metavar="KEY=JSON",
                   help="a keyword for every ti.init() of the script, over its own")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    ns = p.parse_args(argv)
    from . import taichi_alias
    taichi_alias.install()
    if ns.arch:
        force_arch(ns.arch)
    if ns.init:
        force_init_keywords(dict(_key_value(kv) for kv in ns.init))
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


def _key_value(kv: str) -> tuple:
    key, sep, value = kv.partition("=")
    if not sep or not key:
        raise SystemExit(f"--init {kv!r}: give KEY=JSON, e.g. check_bounds=false")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        raise SystemExit(f"--init {kv!r}: the value is not JSON (true, false, numbers, "
                         f"\"strings\")") from None


def force_init_keywords(extra: dict) -> None:
    """Every later `spirad.init(...)` gets the keywords `extra`, over the caller's."""
    import spirad
    init = spirad.init

    @functools.wraps(init)
    def with_extra(*args, **kwargs):
        return init(*args, **{**kwargs, **extra})

    spirad.init = with_extra


if __name__ == "__main__":
    main()
