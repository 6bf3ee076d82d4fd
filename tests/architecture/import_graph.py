"""The project's import graph, read from the source (every `import`, at module level or inside a
function): module name -> the project modules it imports.

`from pkg import name` depends on `pkg.name` when that is a module of the project, else on `pkg`
(its `__init__`); imports of other distributions are ignored.
"""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("spirad", "kernel_ir", "passes", "sizer", "spirv_codegen", "gfx_runtime", "llvm_codegen",
            "shaders")


def modules() -> dict:
    """Module name -> source path, for every module of the project's packages."""
    out = {}
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _targets(mod: str, path: pathlib.Path, node, mods) -> set:
    base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    names = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            prefix = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
        else:
            prefix = node.module
        for a in node.names:
            sub = f"{prefix}.{a.name}"
            names.append(sub if sub in mods else prefix)
    out = set()
    for name in names:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        if name:
            out.add(name)
    return out


def graph() -> dict:
    mods = modules()
    g = {}
    for m, p in mods.items():
        deps = set()
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                deps |= _targets(m, p, n, mods)
        deps.discard(m)
        g[m] = deps
    return g


def cycles(g: dict) -> list:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in g:
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def package_of(mod: str) -> str:
    return mod.split(".")[0]
