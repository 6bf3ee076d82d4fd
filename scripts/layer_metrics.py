"""The architecture numbers of issue #40 for one commit: modules per package of `spirad/`, upward
imports inside it, module and package import cycles, lines of `spirad/` and its share of the
source, and repeated-code pairs in the source and in the tests.

    python scripts/layer_metrics.py REV [REV ...]        (in the repository root)

Each commit is read from git (`git archive`), never from the working tree, so the numbers of an
old commit and of the branch head come out of the same code. What it counts:

- modules per package: `.py` files of each first-level sub-package of `spirad/` (all depths),
  `(root)` the files directly in `spirad/`;
- upward imports: imports inside `spirad/` (every import statement, function-level ones too;
  `tests/architecture/import_graph.py`) from a module to one of a higher layer of
  `LAYERS_INSIDE_SPIRAD` (this checkout's `tests/architecture/test_layering.py`). A module of an
  old commit is placed by the name it has now: git's rename detection from REV to HEAD (40%
  similarity), else the one module of HEAD with its file name; a module with neither is listed
  as unplaced;
- cycles: strongly connected components of the module graph of the project's packages, and
  of spirad's package graph (each root module and first-level sub-package one node);
- lines: all lines of the `.py` files of `spirad/`, and of every `.py` file but the tests
  (the packages, benchmarks, examples, scripts: the source, as the issue counted it);
- repeated-code pairs: the count line of `duplicates` (the tool library's, see its README) over
  the source packages and over `tests/`, each copied out of git into a folder of its own.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.architecture import import_graph as ig  # noqa: E402
from tests.architecture.test_layering import LAYERS_INSIDE_SPIRAD, spirad_layer, spirad_package  # noqa: E402


def _git(*args) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def _extract(rev: str, dest: pathlib.Path, paths) -> None:
    have = [p for p in paths if _git("ls-tree", "--name-only", rev, p).strip()]
    tar = subprocess.run(["git", "archive", rev, *have], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar, check=True)


def _module(path: str) -> str:
    parts = list(pathlib.PurePosixPath(path).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _names_now(rev: str, mods) -> dict:
    """Old module name -> its name at HEAD (renames, else the one HEAD module of that file name)."""
    renamed = {}
    for line in _git("diff", "-M40%", "--name-status", rev, "HEAD", "--", "spirad", "passes").splitlines():
        f = line.split("\t")
        if f[0].startswith("R") and f[1].endswith(".py"):
            renamed[_module(f[1])] = _module(f[2])
    head = [_module(p) for p in _git("ls-files", "spirad", "passes").split() if p.endswith(".py")]
    out = {}
    for m in mods:
        if m in renamed:
            out[m] = renamed[m]
        elif m in head:
            out[m] = m
        else:
            same = [h for h in head if h.rsplit(".", 1)[-1] == m.rsplit(".", 1)[-1]]
            out[m] = same[0] if len(same) == 1 else None
    return out


def _duplicates(folder: pathlib.Path) -> str:
    r = subprocess.run(["duplicates", "--repo", str(folder), "--most", "1", "--seconds", "300"],
                       capture_output=True, text=True)
    return r.stdout.strip().splitlines()[0] if r.stdout.strip() else r.stderr.strip()


def _lines(folder: pathlib.Path) -> int:
    return sum(len(p.read_text(encoding="utf-8", errors="replace").splitlines())
               for p in folder.rglob("*.py"))


def measure(rev: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tree = pathlib.Path(tmp) / "tree"
        tree.mkdir()
        _extract(rev, tree, list(ig.PACKAGES) + ["benchmarks", "examples", "scripts"])
        ig.ROOT = tree  # the graph of that commit
        g = ig.graph()
        spirad_files = sorted((tree / "spirad").rglob("*.py"))
        per_pkg = {}
        for p in spirad_files:
            rel = p.relative_to(tree / "spirad").parts
            key = "(root)" if len(rel) == 1 else rel[0]
            per_pkg[key] = per_pkg.get(key, 0) + 1
        now = _names_now(rev, [m for m in g if ig.package_of(m) == "spirad"])
        unplaced = sorted(m for m, n in now.items()
                          if n is None or (n.startswith("spirad") and spirad_layer(n) is None))
        up = []
        for m, deps in g.items():
            if ig.package_of(m) != "spirad":
                continue
            for d in deps:
                a, b = now.get(m), now.get(d)
                if not (a and b and a.startswith("spirad") and b.startswith("spirad")):
                    continue  # outside spirad/ now (the passes) or unplaced
                la, lb = spirad_layer(a), spirad_layer(b)
                if la is not None and lb is not None and lb > la:
                    up.append(f"{m} ({LAYERS_INSIDE_SPIRAD[la][0]}) -> {d} ({LAYERS_INSIDE_SPIRAD[lb][0]})")
        pg = {}
        for m, deps in g.items():
            if ig.package_of(m) == "spirad":
                pm = spirad_package(m)
                pg.setdefault(pm, set()).update(spirad_package(d) for d in deps
                                                if ig.package_of(d) == "spirad" and spirad_package(d) != pm)
        src_lines = _lines(tree)
        sp_lines = _lines(tree / "spirad")
        packages = pathlib.Path(tmp) / "packages_only"  # the duplicates of the packages alone
        packages.mkdir()
        _extract(rev, packages, ig.PACKAGES)
        tests = pathlib.Path(tmp) / "tests_only"
        tests.mkdir()
        _extract(rev, tests, ["tests"])
        return {"rev": _git("rev-parse", "--short", rev).strip(), "modules per package": per_pkg,
                "upward imports": up, "unplaced": unplaced,
                "module cycles": ig.cycles(g), "spirad package cycles": ig.cycles(pg),
                "spirad lines": sp_lines, "source lines": src_lines,
                "duplicates source": _duplicates(packages), "duplicates tests": _duplicates(tests)}


def report(m: dict) -> str:
    pk = m["modules per package"]
    out = [f"## {m['rev']}",
           f"modules per package of spirad/ ({sum(pk.values())} in {len(pk) - 1} sub-packages + root): "
           + ", ".join(f"{k} {v}" for k, v in sorted(pk.items(), key=lambda kv: (kv[0] != '(root)', kv[0]))),
           f"upward imports inside spirad/: {len(m['upward imports'])}"]
    out += [f"  {u}" for u in m["upward imports"]]
    if m["unplaced"]:
        out.append(f"  (modules with no layer now, not counted: {', '.join(m['unplaced'])})")
    out += [f"module import cycles: {len(m['module cycles'])} " + str([len(c) for c in m["module cycles"]]),
            f"spirad package import cycles: {len(m['spirad package cycles'])} "
            + str([len(c) for c in m["spirad package cycles"]]),
            f"lines: spirad/ {m['spirad lines']:,} of {m['source lines']:,} in the source (all but tests/) "
            f"({100 * m['spirad lines'] / m['source lines']:.0f}%)",
            f"repeated-code pairs, source packages: {m['duplicates source']}",
            f"repeated-code pairs, tests: {m['duplicates tests']}"]
    return "\n".join(out)


if __name__ == "__main__":
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__)
        sys.exit(0)
    for rev in sys.argv[1:] or ["HEAD"]:
        print(report(measure(rev)))
        sys.stdout.flush()
