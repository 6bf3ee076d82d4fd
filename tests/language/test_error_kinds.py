"""User errors are also Python's own error kinds (as Taichi's are), and arch errors name the real
cause: an arch spirad does not implement, a missing Python binding, a missing loader."""
import os
import subprocess
import sys
import textwrap

import pytest

import spirad as sd
from tests.support.archs import test_archs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("cls,base", [(sd.SpiradTypeError, TypeError),
                                      (sd.SpiradValueError, ValueError),
                                      (sd.SpiradNameError, NameError),
                                      (sd.SpiradSyntaxError, SyntaxError)])
def test_error_classes_are_python_kinds(cls, base):
    assert issubclass(cls, base) and issubclass(cls, sd.SpiradError)
    assert not issubclass(cls, RuntimeError)


@sd.kernel
def _bad_name():
    for i in range(2):
        y = undefined_thing + 1  # noqa: F821,F841


@sd.kernel
def _bad_syntax():
    for i in range(2):
        del i


@sd.kernel
def _typed(a: sd.i32):
    for i in range(a):
        pass


@test_archs()
def test_kernel_errors_caught_as_python_kinds(arch):
    with pytest.raises(NameError) as ei:
        _bad_name()
    assert "undefined_thing" in str(ei.value) and "^^^" in str(ei.value)
    with pytest.raises(SyntaxError) as es:
        _bad_syntax()
    # the caret output is kept and Python's printer adds no second quote (no lineno)
    assert "^^^" in str(es.value) and es.value.lineno is None
    import traceback
    text = "".join(traceback.format_exception_only(type(es.value), es.value))
    assert text.count("del i") == 1 and "^^^" in text
    with pytest.raises(TypeError, match="got the float"):
        _typed(1.5)
    with pytest.raises(ValueError, match="does not fit"):
        _typed(2**40)


def test_unimplemented_arch_says_so(monkeypatch):
    from spirad import backends as driver
    monkeypatch.setitem(driver.BACKENDS, "metal", "no_such_backend_module")
    sd.init(arch="cpu")
    with pytest.raises(sd.SpiradArchError, match="arch=metal is not implemented in this version"):
        sd.init(arch="metal")
    assert not driver.arch_available("metal")


def _run_isolated(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_missing_vulkan_binding_is_named():
    out = _run_isolated("""
        import sys
        sys.modules["vulkan"] = None        # as if `pip install spirad` ran without extras
        import spirad as sd
        try:
            sd.init(arch=sd.vulkan)
        except sd.SpiradArchError as e:
            print(e)
    """)
    assert "Python package 'vulkan'" in out and "pip install" in out, out
    assert "mesa-vulkan-drivers" not in out, out


def test_missing_vulkan_loader_is_named():
    out = _run_isolated("""
        import sys, importlib.abc, importlib.machinery
        class NoLoader(importlib.abc.MetaPathFinder, importlib.abc.Loader):
            def find_spec(self, name, path=None, target=None):
                if name == "vulkan":
                    return importlib.machinery.ModuleSpec(name, self)
            def create_module(self, spec):
                raise OSError("cannot load library 'libvulkan.so.1'")  # what cffi raises
            def exec_module(self, module):
                pass
        sys.meta_path.insert(0, NoLoader())
        import spirad as sd
        try:
            sd.init(arch=sd.vulkan)
        except sd.SpiradArchError as e:
            print(e)
    """)
    assert "libvulkan.so.1" in out and "libvulkan1" in out, out
