#!/usr/bin/env python3
"""Run Taichi's own tests on spirad through the `import taichi` alias (dev harness; not part of
CI, which has no Taichi checkout).

    python scripts/taichi_tests.py PATH [--ref v1.7.4] [--archs cpu,vulkan] [--all | --files F,..]
                                   [--table] [-k EXPR] [pytest args]

PATH is a Taichi checkout (a directory with tests/python) or a Taichi git directory (then the
test files are read at --ref with `git show`). By default the autodiff files
`tests/python/test_ad_*.py` and `test_loops.py` run; `--all` runs the whole `tests/python/`
except the files that test Taichi's internals (INTERNAL below: its AOT module format, C++
bindings, CLI, CUDA runtime, GGUI, offline cache, ...); `--files` names files (globs, comma
separated). The selected files are copied, unchanged (with the helper files beside them:
templates, images), into a temporary directory next to our stand-ins for
Taichi's `tests/test_utils.py` and `tests/python/conftest.py` (scripts/taichi_compat/) and a
conftest that installs the alias (spirad.compat.taichi_alias); pytest runs there. Cases listed
in scripts/taichi_compat/excluded.txt (they test Taichi internals, or a device limit on one arch;
docs/coming_from_taichi.md says why) are deselected and counted apart. Prints the pass / fail / skip counts;
with `--table` (implied by `--all`) also one row per file, from pytest's JUnit XML report.
Taichi's tests import `psutil` (test_memory): the `taichi-suite` extra (scripts/install.sh).
"""
from __future__ import annotations

import argparse
import fnmatch
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
COMPAT = os.path.join(HERE, "taichi_compat")
PATTERNS = ("test_ad_*.py", "test_loops.py")
# Files of Taichi's tests/python/ that test Taichi's own internals, left out of `--all`.
INTERNAL = tuple(f"test_{n}.py" for n in (
    "aot", "binding", "cli", "cuda_internals", "ggui", "offline_cache", "callable_template_mapper",
    "ast_resolver", "internal_func", "threading", "type_system", "test", "runtime"))


def _selected(name: str, patterns) -> bool:
    """A test file the run wants (helper files are chosen apart, by _is_helper)."""
    return (fnmatch.fnmatch(name, "test_*.py") and name not in INTERNAL
            and any(fnmatch.fnmatch(name, p) for p in patterns))


def _is_helper(rel: str) -> bool:
    """A non-test file the tests read (templates they import, expected images, data); Taichi's
    conftest.py and __init__.py are replaced by ours."""
    base = os.path.basename(rel)
    return not base.startswith("test_") and base not in ("conftest.py", "__init__.py")


def _test_files(path: str, ref: str, patterns) -> dict:
    """relative path under tests/python -> bytes of the selected test files and their helpers."""
    tests = os.path.join(path, "tests", "python")
    if os.path.isdir(tests):
        rels = [os.path.relpath(os.path.join(d, f), tests)
                for d, _, fs in os.walk(tests) for f in fs]
        read = lambda rel: open(os.path.join(tests, rel), "rb").read()  # noqa: E731
    else:
        names = subprocess.run(["git", "--git-dir", path, "ls-tree", "-r", "--name-only", ref,
                                "tests/python/"], check=True, capture_output=True, text=True).stdout
        rels = [n[len("tests/python/"):] for n in names.split()]
        read = lambda rel: subprocess.run(  # noqa: E731
            ["git", "--git-dir", path, "show", f"{ref}:tests/python/{rel}"],
            check=True, capture_output=True).stdout
    tests_wanted = [r for r in sorted(rels) if "/" not in r and _selected(r, patterns)]
    if not tests_wanted:
        return {}
    return {r: read(r) for r in sorted(rels) if r in tests_wanted or _is_helper(r)}


def per_file_table(junit_xml: str) -> str:
    """One row per test file (passed / failed / skipped, errors counted as failed) and a total
    row, as a Markdown table, from pytest's JUnit XML report."""
    rows: dict = {}
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        # classname: tests.python.test_x[.TestClass]; a collection error: name only
        parts = (case.get("classname") or case.get("name", "")).split(".")
        name = (parts[parts.index("python") + 1] if "python" in parts[:-1] else parts[-1]) + ".py"
        counts = rows.setdefault(name, [0, 0, 0])
        kinds = {child.tag for child in case}
        if kinds & {"failure", "error"}:
            counts[1] += 1
        elif "skipped" in kinds:
            counts[2] += 1
        else:
            counts[0] += 1
    total = [sum(c[k] for c in rows.values()) for k in range(3)]
    lines = ["| file | passed | failed | skipped |", "|---|---|---|---|"]
    lines += [f"| {n} | {p} | {f} | {s} |" for n, (p, f, s) in sorted(rows.items())]
    lines.append(f"| **total** ({len(rows)} files) | {total[0]} | {total[1]} | {total[2]} |")
    return "\n".join(lines)


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
    p.add_argument("--all", action="store_true",
                   help="every test file of tests/python/ except the INTERNAL ones")
    p.add_argument("--files", help="comma-separated test file names or globs (test_offset.py,...)")
    p.add_argument("--table", action="store_true", help="print a per-file pass/fail/skip table")
    p.add_argument("-k", dest="k", help="pytest -k expression")
    p.add_argument("-n", dest="n", default="0", help="pytest-xdist workers (default 0)")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    p.add_argument("--no-exclude", action="store_true", help="run the excluded cases too")
    ns, pytest_args = p.parse_known_args(argv)
    ns.pytest_args = [a for a in pytest_args if a != "--"]

    patterns = (("test_*.py",) if ns.all else
                tuple(ns.files.split(",")) if ns.files else PATTERNS)
    files = _test_files(ns.taichi, ns.ref, patterns)
    if not files:
        sys.exit(f"no test files matching {patterns} under {ns.taichi}")
    n_tests = sum(1 for r in files if os.path.basename(r).startswith("test_"))
    work = tempfile.mkdtemp(prefix="spirad-taichi-tests-")
    os.makedirs(os.path.join(work, "tests", "python"))
    open(os.path.join(work, "tests", "__init__.py"), "w").close()
    # a package, as in Taichi's tree: some files import their helpers relatively
    open(os.path.join(work, "tests", "python", "__init__.py"), "w").close()
    shutil.copy(os.path.join(COMPAT, "test_utils.py"), os.path.join(work, "tests"))
    shutil.copy(os.path.join(COMPAT, "conftest.py"), os.path.join(work, "tests", "python"))
    shutil.copy(os.path.join(COMPAT, "root_conftest.py"), os.path.join(work, "conftest.py"))
    for rel, data in files.items():
        dest = os.path.join(work, "tests", "python", rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
            f.write(data)
    junit = os.path.join(work, "report.xml")

    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rN",
           "--rootdir", work, "-n", ns.n, "--continue-on-collection-errors",
           os.path.join("tests", "python")]
    if ns.k:
        cmd += ["-k", ns.k]
    if not ns.no_exclude:
        for i in excluded_ids():  # "[": every arch of exactly this test (a prefix match);
            tail = "" if i.endswith("]") else "["  # an id with [arch=...]: that arch only
            cmd += ["--deselect", os.path.join("tests", "python", i) + tail]
    if ns.all or ns.table:
        cmd += ["--junitxml", junit]
    cmd += ns.pytest_args
    env = dict(os.environ, SPIRAD_TAICHI_ARCHS=ns.archs,
               PYTHONPATH=os.pathsep.join([REPO, work, os.environ.get("PYTHONPATH", "")]))
    env.setdefault("SPIRAD_CACHE_DIR", os.path.join(work, "cache"))
    print(f"running {n_tests} Taichi test files in {work} on {ns.archs}", flush=True)
    rc = subprocess.run(cmd, cwd=work, env=env).returncode
    if (ns.all or ns.table) and os.path.exists(junit):
        print(per_file_table(junit))
    if not ns.keep:
        shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
