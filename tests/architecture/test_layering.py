"""The layering rules of architecture §1, each proved two ways: statically (every import statement in
the source, function-level ones included) and by importing in a fresh interpreter and listing
`sys.modules`.

    sizer/                imports nothing of the project
    kernel_ir/            imports only sizer/
    passes/               imports only kernel_ir (and sizer): what it needs of spirad is passed in
    spirv_codegen/, llvm_codegen/   import kernel_ir (and sizer), never spirad
    gfx_runtime/          imports none of the above (its own exception types)
    no import cycle between modules or between packages, except the documented one:
    shaders/sizer_kernel.py is a spirad program (shaders -> spirad -> ... loads it by name);
    it also reads the wire format from sizer/device_format.py

Inside spirad/ the layers of architecture §1 (`LAYERS_INSIDE_SPIRAD`, bottom to top): a module imports
only modules of its own layer or of the layers below it, and the package's root holds at most
20 modules (the public surface and the user namespaces; the core lives in the sub-packages).
Between spirad's packages (root modules, first-level sub-packages) no import cycle.
"""
import json
import subprocess
import sys

import pytest

from tests.architecture.import_graph import ROOT, cycles, graph, modules, package_of

ALLOWED = {
    "sizer": set(),
    "kernel_ir": {"sizer"},
    "passes": {"kernel_ir", "sizer"},
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
    project = {"spirad", "kernel_ir", "passes", "sizer", "spirv_codegen", "gfx_runtime", "llvm_codegen",
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


# spirad/'s layers, bottom to top: (layer, the modules and packages in it). The runtime sits
# below the backends and the user's data: what it needs of them (the backend loader, the array
# type of internal buffers) they set at import (`spirad.runtime.state`). The tape and forward
# mode (`spirad.recording`) sit below `kernel` (a launch records on them); the `sd.ad` namespace
# and checkpointed time stepping above it (they build kernels). `sd.linalg`: what kernels use
# (the sparse-matrix builder, dense solves) is language, the namespace and its matrix-free
# solvers (kernels) surface.
LAYERS_INSIDE_SPIRAD = (
    ("foundation", ("spirad.options", "spirad._version", "spirad.tracebacks", "spirad.printing",
                    "spirad.types", "spirad.bitops", "spirad.source")),
    ("runtime", ("spirad.runtime", "spirad.profiler")),
    ("backends", ("spirad.backends",)),
    ("data", ("spirad.data", "spirad.data.tensor")),
    ("language", ("spirad.frontend", "spirad.func", "spirad.lang", "spirad.math", "spirad.simt", "spirad.texture",
                  "spirad.graph.device", "spirad.algorithms.device", "spirad.real_func", "spirad.linalg.builder",
                  "spirad.linalg.sparse_matrix", "spirad.linalg.dense", "spirad.linalg.solvers")),
    ("ad", ("spirad.recording", "spirad.ad.revolve")),
    ("interop", ("spirad.interop",)),
    ("compile", ("spirad.compile",)),
    ("kernel", ("spirad.kernel", "spirad.launch_graph")),
    ("ad namespace", ("spirad.ad", "spirad.ad.time_steps")),
    ("surface", ("spirad", "spirad.__main__", "spirad._logging", "spirad.perf_dispatch",
                 "spirad.compat", "spirad.gui", "spirad.tools", "spirad.linalg", "spirad.algorithms", "spirad.graph")),
)


def spirad_layer(mod: str):
    """The index in LAYERS_INSIDE_SPIRAD of `mod`'s layer (the longest prefix that names it), or None."""
    best = None
    for i, (_, members) in enumerate(LAYERS_INSIDE_SPIRAD):
        for p in members:
            if (mod == p or mod.startswith(p + ".")) and (best is None or len(p) > best[1]):
                best = (i, len(p))
    return None if best is None else best[0]


def test_every_spirad_module_has_a_layer():
    missing = sorted(m for m in modules() if package_of(m) == "spirad" and spirad_layer(m) is None)
    assert not missing, f"add these to LAYERS_INSIDE_SPIRAD: {missing}"


def test_spirad_imports_only_its_own_layer_and_below():
    g = graph()
    up = sorted((LAYERS_INSIDE_SPIRAD[spirad_layer(m)][0], m, LAYERS_INSIDE_SPIRAD[spirad_layer(d)][0], d)
                for m, deps in g.items() if package_of(m) == "spirad"
                for d in deps if package_of(d) == "spirad" and spirad_layer(d) > spirad_layer(m))
    assert not up, "upward imports inside spirad/ (layer, module -> layer, module): " + \
        "; ".join(f"{a} {b} -> {c} {d}" for a, b, c, d in up)


# spirad/'s packages: each root module and each first-level sub-package (its __init__ and every
# module below it) is one node, and no import cycle runs between them. The user namespaces with a
# kernel-side half (`sd.graph.do_while`, `sd.algorithms.sort`, `sd.linalg`'s sparse-matrix
# builder) hand it to the frontend through `frontend/namespace_hooks.py` (architecture §1).
def spirad_package(mod: str) -> str:
    """`spirad.X` for a module of spirad/ (X a root module or a first-level sub-package)."""
    return ".".join(mod.split(".")[:2])


def test_no_import_cycles_between_spirad_packages():
    g = graph()
    pg = {}
    for m, deps in g.items():
        if package_of(m) != "spirad":
            continue
        pm = spirad_package(m)
        pg.setdefault(pm, set()).update(
            spirad_package(d) for d in deps if package_of(d) == "spirad" and spirad_package(d) != pm)
    assert cycles(pg) == [], "import cycles between spirad's packages (root modules, sub-packages)"


def test_spirad_root_holds_at_most_20_modules():
    root = sorted(p.name for p in (ROOT / "spirad").glob("*.py"))
    assert len(root) <= 20, f"{len(root)} modules at spirad/'s root: {root}"
