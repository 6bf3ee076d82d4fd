"""Every SPIRAD_* environment variable is read in one module, `spirad/options.py` (engineering 16):

- no other module of the project (packages, benchmarks, examples, scripts) reads the
  environment with a name that is a SPIRAD_* string or that it cannot be told is not one (test
  harnesses outside the packages may read `TEST_SWITCHES`; setting a variable is no read);
- every `options.get("...")` names a declared switch (a computed name is checked by `get`);
- every SPIRAD_* name written anywhere in the project, its docs and tests is declared
  (`SWITCHES`, or `TEST_SWITCHES` for the test suite's own variables);
- docs/errors_and_environment.md shows exactly the table `python -m spirad.options` prints.
"""
import ast
import re

from spirad import options
from tests.architecture.import_graph import ROOT, modules

OPTIONS = ROOT / "spirad" / "options.py"
EXTRA_DIRS = ("benchmarks", "examples", "scripts")


def _sources():
    paths = list(modules().values())
    for d in EXTRA_DIRS:
        paths += sorted((ROOT / d).rglob("*.py"))
    return paths


def _env_reads(tree):
    """(line, name node) of each os.environ.get / os.getenv / os.environ[...] / environ.get."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = ast.unparse(f)
            if name in ("os.environ.get", "environ.get", "os.getenv", "getenv") and node.args:
                yield node.lineno, node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and \
                ast.unparse(node.value) in ("os.environ", "environ"):
            yield node.lineno, node.slice  # (setting a variable for a child process is fine)


def test_spirad_variables_are_read_only_in_options():
    bad = []
    packages = set(modules().values())
    for path in _sources():
        if path == OPTIONS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, arg in _env_reads(tree):
            const = isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            ok = const and (not arg.value.startswith("SPIRAD_") or
                            (path not in packages and arg.value in options.TEST_SWITCHES))
            if not ok:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {ast.unparse(arg)}")
    assert not bad, "read SPIRAD_* variables through spirad.options (declare them there):\n" + \
        "\n".join(bad)


def test_options_get_names_declared_switches():
    bad = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "options.get":
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Constant) and arg.value not in options.SWITCHES:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bad, f"options.get of an undeclared switch: {bad}"


def test_every_spirad_variable_written_anywhere_is_declared():
    declared = set(options.SWITCHES) | set(options.TEST_SWITCHES)
    files = _sources() + sorted((ROOT / "tests").rglob("*.py")) + sorted((ROOT / "docs").rglob("*.md"))
    files += [ROOT / "README.md"]
    seen = {}
    for path in files:
        for name in re.findall(r"\bSPIRAD_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8")):
            seen.setdefault(name, str(path.relative_to(ROOT)))
    unknown = {n: p for n, p in seen.items() if n not in declared}
    assert not unknown, f"SPIRAD_* names not declared in spirad/options.py: {unknown}"


def test_docs_table_is_the_declared_table():
    text = (ROOT / "docs" / "errors_and_environment.md").read_text(encoding="utf-8")
    assert options.markdown_table() in text, \
        "docs/errors_and_environment.md: paste the output of `python -m spirad.options`"


def test_parsing():
    import pytest
    from kernel_ir.errors import SpiradValueError
    sw = options.SWITCHES
    assert sw["SPIRAD_VERIFY"].parse("yes") is True and sw["SPIRAD_VERIFY"].parse(None) is False
    assert sw["SPIRAD_CPU_SPMD"].parse("0") is False and sw["SPIRAD_CPU_SPMD"].parse("") is True
    assert sw["SPIRAD_CPU_SPMD_LANES"].parse("16") == 16
    with pytest.raises(SpiradValueError, match="SPIRAD_CPU_VECMATH"):
        sw["SPIRAD_CPU_VECMATH"].parse("fast")
    with pytest.raises(RuntimeError, match="not declared"):
        options.get("SPIRAD_" + "NO_SUCH_SWITCH")


def test_process_default(monkeypatch):
    """`set_default` (the Taichi alias's defaults) applies where the variable is unset; a set
    variable wins; `reset_default` restores the declared default; values are checked."""
    import pytest
    from kernel_ir.errors import SpiradValueError
    name = "SPIRAD_AD_OVERWRITTEN_READS"
    monkeypatch.delenv(name, raising=False)
    options.set_default(name, "warn")
    try:
        assert options.get(name) == "warn"
        monkeypatch.setenv(name, "error")
        assert options.get(name) == "error"
        monkeypatch.setenv(name, "")
        assert options.get(name) == "warn"
        with pytest.raises(SpiradValueError, match=name):
            options.set_default(name, "ignore")
    finally:
        options.reset_default(name)
    assert options.get(name) == "error"


# the modules that decide what a kernel compiles to: an init option they read changes code
COMPILE_PATH = ("spirad/frontend", "passes", "spirad/compile/driver.py",
                "spirad/compile/kernel_return.py", "spirad/func.py")


def _option_reads(tree):
    """(line, name) of each `<...>.options.NAME` and `opts.NAME` (opts = <...>.options)."""
    aliases = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
               and isinstance(node.value, ast.Attribute) and node.value.attr == "options"
               for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in options.INIT_OPTIONS and (
                isinstance(node.value, ast.Attribute) and node.value.attr == "options" or
                isinstance(node.value, ast.Name) and node.value.id in aliases):
            yield node.lineno, node.attr


def test_init_options_the_compile_path_reads_are_in_the_cache_key():
    """An init option that the frontend, the passes or the driver reads changes what a kernel
    compiles to, so it must be `affects_code` (the offline cache's key, `InitValues.code_key`):
    else a program stored under one value is loaded under another."""
    read, bad = set(), []
    for where in COMPILE_PATH:
        p = ROOT / where
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            for line, name in _option_reads(ast.parse(f.read_text(encoding="utf-8"))):
                read.add(name)
                if not options.INIT_OPTIONS[name].affects_code:
                    bad.append(f"{f.relative_to(ROOT)}:{line}: {name}")
    assert not bad, "declare these init options affects_code=True:\n" + "\n".join(bad)
    assert {"random_seed", "max_while_iterations", "deterministic"} <= read  # the scan sees reads


def test_every_code_changing_init_option_changes_the_key():
    base = options.InitValues().code_key()
    other = {bool: lambda v: not v, int: lambda v: v + 7, object: lambda v: ("other", v)}
    for o in options.INIT_OPTIONS.values():
        if o.affects_code:
            changed = options.InitValues({o.name: other[o.type](o.default_value())}).code_key()
            assert changed != base, o.name
    assert len(base) == sum(o.affects_code for o in options.INIT_OPTIONS.values())


def test_init_reads_options_through_the_table():
    """No module reads an init option by string (`state.options.get("name")`, `opts["name"]`,
    `kwargs.get("name")`): through the typed attributes of `InitValues`."""
    bad = []
    for p in modules().values():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "get" and node.args and \
                    isinstance(node.args[0], ast.Constant) and \
                    node.args[0].value in options.INIT_OPTIONS or \
                    isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                    and node.slice.value in options.INIT_OPTIONS:
                bad.append(f"{p.relative_to(ROOT)}:{node.lineno}")
    assert not bad, "read init options as state.options.NAME:\n" + "\n".join(bad)
