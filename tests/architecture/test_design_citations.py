"""The design a maintainer needs is in the repository (engineering 21): comments and docs cite
`docs/architecture.md` (`architecture §N`, with the quoted paragraph title where one is given) and
`docs/engineering.md` (`engineering N`), never documents outside the repository (the design notes
the project started from), and every citation names a section or habit that exists."""
from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP_DIRS = {".git", "build", "site", "__pycache__", ".pytest_cache", "spirad.egg-info"}
SUFFIXES = (".py", ".md", ".sh", ".toml", ".txt", ".yml", ".cfg")
OUTSIDE = re.compile(r"DESIGN §|DESIGN\.md|STYLE\.md|STYLE \d|shared/seeds")
SECTION = re.compile(r"architecture §(\d+)(?: \"([^\"]+)\")?")
HABIT = re.compile(r"engineering (\d+)\b")


def _sources():
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        for f in filenames:
            if f.endswith(SUFFIXES):
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    yield os.path.relpath(path, ROOT), fh.read()


def _read(name):
    with open(os.path.join(ROOT, "docs", name), encoding="utf-8") as fh:
        return fh.read()


def test_no_citation_of_documents_outside_the_repository():
    here = os.path.relpath(__file__, ROOT)
    bad = [f"{path}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
           for path, text in _sources() if path != here
           for m in OUTSIDE.finditer(text)]
    assert not bad, "cite docs/architecture.md / docs/engineering.md instead:\n" + "\n".join(bad)


def test_every_citation_names_a_section_that_exists():
    arch = _read("architecture.md")
    sections = {int(n) for n in re.findall(r"^## §(\d+) ", arch, re.M)}
    habits = {int(n) for n in re.findall(r"^(\d+)\. \*\*", _read("engineering.md"), re.M)}
    assert sections == set(range(1, 9)) and habits == set(range(1, 22))
    bad = []
    for path, text in _sources():
        for m in SECTION.finditer(text):
            n, title = int(m.group(1)), m.group(2)
            if n not in sections:
                bad.append(f"{path}: {m.group(0)} (no such section)")
            elif title and f"**{title}" not in arch:
                bad.append(f"{path}: {m.group(0)} (no paragraph titled so)")
        for m in HABIT.finditer(text):
            if int(m.group(1)) not in habits:
                bad.append(f"{path}: {m.group(0)} (no such habit)")
    assert not bad, "\n".join(bad)
