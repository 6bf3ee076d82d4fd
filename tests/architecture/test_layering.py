"""The layering rules of architecture §1, each proved two ways: statically (every import statement in
the source, function-level ones included) and by importing in a fresh interpreter and listing
`sys.modules`.

    sizer/                imports nothing of the project
    kernel_ir/            imports only sizer/
    spirv_codegen/, llvm_codegen/   import kernel_ir (and sizer), never spirad
    gfx_runtime/          imports none of the above (its own exception types)
    no import cycle between modules or between packages, except the documented one:
    shaders/sizer_kernel.py is a spirad program (shaders -> spirad -> ... loads it by name);
    it also reads the wire format from sizer/device_format.py
"""
import json
import subprocess
import sys

import pytest

from tests.architecture.import_graph import ROOT, cycles, graph, modules, package_of

ALLOWED = {
    "sizer": set(),
    "kernel_ir": {"sizer"},
    "spirv_codegen": {"kernel_ir", "sizer"},
    "llvm_codegen": {"kernel_ir", "sizer"},
    "gfx_runtime": set(),
}


@pytest.mark.parametrize("pkg", sorted(ALLOWED))
def test_static_imports_follow_the_layers(pkg):
    g = graph()
    bad = sorted((m, d) for m, deps in g.items() if package_of(m) == pkg
                 for d in deps if package_of(d) not in ALLOWED[pkg] | {pkg})
    assert not bad, f"{pkg} may import only {sorted(ALLOWED[pkg])}: {bad}"


_PROBE = """
import importlib, json, pkgutil, sys
pkg = importlib.import_module(sys.argv[1])
for info in pkgutil.walk_packages(pkg.__path__, sys.argv[1] + "."):
    importlib.import_module(info.name)
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


@pytest.mark.parametrize("pkg", sorted(ALLOWED))
def test_fresh_interpreter_loads_only_allowed_packages(pkg):
    r = subprocess.run([sys.executable, "-c", _PROBE, pkg], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    loaded = set(json.loads(r.stdout.strip().splitlines()[-1]))
    project = {"spirad", "kernel_ir", "sizer", "spirv_codegen", "gfx_runtime", "llvm_codegen",
               "shaders"}
    extra = (loaded & project) - ALLOWED[pkg] - {pkg}
    assert not extra, f"importing every module of {pkg} loaded {sorted(extra)}"


def test_no_import_cycles_between_modules():
    assert cycles(graph()) == []


def test_no_import_cycles_between_packages_but_the_shader():
    g = graph()
    pg = {}
    for m, deps in g.items():
        pg.setdefault(package_of(m), set()).update(package_of(d) for d in deps)
    for p in pg:
        pg[p].discard(p)
    assert pg["shaders"] == {"spirad", "sizer"}, \
        "the sizer kernel is a spirad program reading the sizer's device format, nothing more"
    into_shaders = sorted(m for m, deps in g.items() if package_of(m) != "shaders"
                          and any(package_of(d) == "shaders" for d in deps))
    assert all(m.startswith("spirad.backends.gpu_sizer") for m in into_shaders), into_shaders
    pg["shaders"] = set()  # the documented edge: without it, no cycle remains
    assert cycles(pg) == []
