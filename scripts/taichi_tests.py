#!/usr/bin/env python3
"""Run Taichi's own autodiff tests on spirad through the `import taichi` alias (dev harness;
not part of CI, which has no Taichi checkout).

    python scripts/taichi_tests.py PATH [--ref v1.7.4] [--archs cpu,vulkan] [--files GLOBS]
                                   [-k EXPR] [pytest args]

PATH is a Taichi checkout (a directory with tests/python) or a Taichi git directory (then the
test files are read at --ref with `git show`). The files `tests/python/test_ad_*.py` and
`test_loops.py` (or the files `--files` names: comma-separated globs, e.g.
`test_types.py,test_f16.py`) are copied, unchanged, into a temporary directory next to our stand-ins for
Taichi's `tests/test_utils.py` and `tests/python/conftest.py` (scripts/taichi_compat/) and a
conftest that installs the alias (spirad.compat.taichi_alias); pytest runs there. Cases listed
in scripts/taichi_compat/excluded.txt (they test Taichi internals, or a device limit on one arch;
docs/coming_from_taichi.md says why) are deselected and counted apart. Prints the pass / fail / skip counts.
"""
from __future__ import annotations

import argparse
import fnmatch
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
COMPAT = os.path.join(HERE, "taichi_compat")
PATTERNS = ("test_ad_*.py", "test_loops.py")


def _test_files(path: str, ref: str, patterns=PATTERNS) -> dict:
    """name -> source of the selected test files."""
    tests = os.path.join(path, "tests", "python")
    if os.path.isdir(tests):
        return {f: open(os.path.join(tests, f)).read() for f in sorted(os.listdir(tests))
                if any(fnmatch.fnmatch(f, p) for p in patterns)}
    names = subprocess.run(["git", "--git-dir", path, "ls-tree", "--name-only", ref,
                            "tests/python/"], check=True, capture_output=True, text=True).stdout
    out = {}
    for full in names.split():
        f = os.path.basename(full)
        if any(fnmatch.fnmatch(f, p) for p in patterns):
            out[f] = subprocess.run(["git", "--git-dir", path, "show", f"{ref}:{full}"],
                                    check=True, capture_output=True, text=True).stdout
    return out


def excluded_ids() -> list:
    """Test ids excluded as tests of Taichi internals: `file::test` (every arch) or
    `file::test[arch=vulkan]` (that arch only: a device limit)."""
    ids = []
    for line in open(os.path.join(COMPAT, "excluded.txt")):
        line = line.split("#", 1)[0].strip()
        if line:
            ids.append(line)
    return ids


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("taichi", help="Taichi checkout or git directory")
    p.add_argument("--ref", default="v1.7.4", help="tag or commit when PATH is a git directory")
    p.add_argument("--archs", default="cpu,vulkan")
    p.add_argument("--files", default=",".join(PATTERNS),
                   help="comma-separated globs of tests/python files (default: the autodiff files)")
    p.add_argument("-k", dest="k", help="pytest -k expression")
    p.add_argument("-n", dest="n", default="0", help="pytest-xdist workers (default 0)")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    p.add_argument("--no-exclude", action="store_true", help="run the excluded cases too")
    ns, pytest_args = p.parse_known_args(argv)
    ns.pytest_args = [a for a in pytest_args if a != "--"]

    patterns = tuple(g.strip() for g in ns.files.split(",") if g.strip())
    files = _test_files(ns.taichi, ns.ref, patterns)
    if not files:
        sys.exit(f"no test files matching {patterns} under {ns.taichi}")
    work = tempfile.mkdtemp(prefix="spirad-taichi-tests-")
    os.makedirs(os.path.join(work, "tests", "python"))
    open(os.path.join(work, "tests", "__init__.py"), "w").close()
    shutil.copy(os.path.join(COMPAT, "test_utils.py"), os.path.join(work, "tests"))
    shutil.copy(os.path.join(COMPAT, "conftest.py"), os.path.join(work, "tests", "python"))
    shutil.copy(os.path.join(COMPAT, "root_conftest.py"), os.path.join(work, "conftest.py"))
    for name, src in files.items():
        with open(os.path.join(work, "tests", "python", name), "w") as f:
            f.write(src)

    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rN",
           "--rootdir", work, "-n", ns.n, os.path.join("tests", "python")]
    if ns.k:
        cmd += ["-k", ns.k]
    if not ns.no_exclude:
        for i in excluded_ids():  # "[": every arch of exactly this test (a prefix match);
            tail = "" if i.endswith("]") else "["  # an id with [arch=...]: that arch only
            cmd += ["--deselect", os.path.join("tests", "python", i) + tail]
    cmd += ns.pytest_args
    env = dict(os.environ, SPIRAD_TAICHI_ARCHS=ns.archs,
               PYTHONPATH=os.pathsep.join([REPO, work, os.environ.get("PYTHONPATH", "")]))
    env.setdefault("SPIRAD_CACHE_DIR", os.path.join(work, "cache"))
    print(f"running {len(files)} Taichi test files in {work} on {ns.archs}", flush=True)
    rc = subprocess.run(cmd, cwd=work, env=env).returncode
    if not ns.keep:
        shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
