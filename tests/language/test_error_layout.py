"""Compile errors in Taichi's layout (kernel_ir/source.py): the message starts with a newline,
quotes each @func call that led to the error (outermost first) and then the line itself, as
written in the file (its indentation, tabs at 4 columns), underlined, and wraps a line longer
than 80 columns with its underline; a loop header is underlined to the end of its line."""
import inspect

import pytest

import spirad as sd
from tests.support.archs import test_archs


def _line_of(fn, text):
    src, first = inspect.getsourcelines(fn)
    for k, ln in enumerate(src):
        if text in ln:
            return first + k, ln.rstrip("\n")
    raise AssertionError(text)


@sd.func
def _inner():
    nowhere_defined()  # noqa: F821


@sd.func
def _outer():
    _inner()


@sd.kernel
def _calls_funcs():
    _outer()


@test_archs()
def test_an_error_in_a_func_quotes_the_calls_that_led_there(arch):
    with pytest.raises(sd.SpiradNameError) as e:
        _calls_funcs()
    f = __file__
    parts = []
    for fn, text, name in ((_calls_funcs, "_outer()", "_calls_funcs"), (_outer, "_inner()", "_outer"),
                           (_inner, "nowhere_defined()", "_inner")):
        n, line = _line_of(fn, text)
        col = line.index(text)
        width = len(text) if text != "nowhere_defined()" else len("nowhere_defined")
        parts.append(f'File "{f}", line {n}, in {name}:\n{line}\n{" " * col}{"^" * width}\n')
    want = "\n" + "".join(parts)
    assert str(e.value).startswith(want), str(e.value)
    assert 'Name "nowhere_defined" is not defined' in str(e.value)


@sd.kernel
def _tabbed():
    q	=	undefined_with_tabs  # noqa: E101,W191,F821


@test_archs()
def test_tabs_are_four_columns_and_the_caret_follows(arch):
    with pytest.raises(sd.SpiradNameError) as e:
        _tabbed()
    lines = str(e.value).splitlines()
    assert lines[2] == "    q   =   undefined_with_tabs  # noqa: E101,W191,F821"
    assert lines[3] == " " * 12 + "^" * len("undefined_with_tabs")


@sd.kernel
def _long_line():
    aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa(1)  # noqa: E501,F821


@test_archs()
def test_a_long_line_wraps_at_80_columns_with_its_underline(arch):
    with pytest.raises(sd.SpiradNameError) as e:
        _long_line()
    lines = str(e.value).splitlines()
    code, under = lines[2::2][:2], lines[3::2][:2]
    assert len(code[0]) == 80 and code[0].startswith("    aaaa")
    assert under[0] == "    " + "^" * 76
    assert set(under[1]) == {"^"} and len(under[1]) == len(code[1].split("(")[0])


@sd.kernel
def _stepped_range():
    for i in range(0, 8, 2):
        pass


@test_archs()
def test_a_range_with_a_step_is_reported_at_the_loop_header(arch):
    with pytest.raises(sd.SpiradSyntaxError) as e:
        _stepped_range()
    n, line = _line_of(_stepped_range, "for i in range(0, 8, 2):")
    want = (f'\nFile "{__file__}", line {n}, in _stepped_range:\n{line}\n'
            f'    {"^" * len("for i in range(0, 8, 2):")}\n'
            f"Range should have 1 or 2 arguments, found 3")
    assert str(e.value) == want
