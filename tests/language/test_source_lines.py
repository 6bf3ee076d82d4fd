"""Reading a kernel's source (`spirad.source.SourceInfo`): the definition's lines are found by
indentation (`_indented_block`) and checked by parsing; shapes where indentation alone would cut
wrongly fall back to `inspect.getblock`. Each shape below must give what `inspect` gives: the
same lines, the same AST with the file's line numbers, so error carets point at the user's line.
"""
import ast
import inspect
import textwrap

import pytest

from spirad.source import SourceInfo, _indented_block, _parse

SHAPES = '''
import functools


def deco(*a, **k):
    if len(a) == 1 and callable(a[0]) and not k:
        return a[0]
    return lambda f: f


@deco
def plain(x):
    return x + 1


@deco(
    1,
    two=2,
)
def decorated_over_lines(x):
    return x


def header_over_lines(
    a,
    b,
):
    return a + b


def column_zero_string(x):
    s = """
text at column 0
"""
    return x


def column_zero_comment(x):
# a comment at column 0 inside the body
    y = x
    # trailing comment inside

    return y
# a comment after the definition


def continued(x):
    y = x + \\
1
    z = (x +
2)
    return y + z


def one_line(x): return x * 2


class Holder:
    @staticmethod
    def method(x):
        if x:
            return 1
        return 2

    def second(self):
        return 0


def nested_def(x):
    def inner(y):
        return y
    return inner(x)


@functools.wraps(plain)
def wrapped(x):
    return x
'''


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    import importlib.util
    path = tmp_path_factory.mktemp("src") / "shapes_mod.py"
    path.write_text(SHAPES)
    spec = importlib.util.spec_from_file_location("shapes_mod", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


NAMES = ["plain", "decorated_over_lines", "header_over_lines", "column_zero_string",
         "column_zero_comment", "continued", "one_line", "Holder.method", "Holder.second",
         "nested_def"]


def _get(mod, name):
    obj = mod
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _old_tree(fn):
    """What SourceInfo built before: inspect's lines, dedented, line numbers shifted."""
    lines, start = inspect.getsourcelines(fn)
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return lines, start, None
    ast.increment_lineno(tree, start - 1)
    return lines, start, tree


@pytest.mark.parametrize("name", NAMES)
def test_same_lines_and_tree_as_inspect(shapes, name):
    fn = _get(shapes, name)
    info = SourceInfo(fn)
    lines, start, tree = _old_tree(fn)
    code_lines = {start + k: ln.rstrip("\n") for k, ln in enumerate(lines)
                  if ln.strip() and not ln.lstrip().startswith("#")}
    got = {k: v for k, v in info.lines.items() if v.strip() and not v.lstrip().startswith("#")}
    assert got == code_lines
    if tree is not None:
        assert ast.dump(info.tree, include_attributes=True) == \
            ast.dump(tree, include_attributes=True)
    assert info.func_def.name == name.split(".")[-1]
    # the fast path (no tokenizer) serves every shape but text at column 0 inside the body
    file_lines, first = inspect.findsource(fn)
    fast = _parse(_indented_block(file_lines, first), first + 1)
    assert (fast is None) == (name in ("column_zero_string", "continued"))


def test_column_zero_string_is_cut_short_then_recovered(shapes):
    """Indentation alone stops inside the string; the fragment does not parse and the tokenizer
    finds the real end: the whole body is there."""
    fn = shapes.column_zero_string
    file_lines, first = inspect.findsource(fn)
    assert len(_indented_block(file_lines, first)) < len(inspect.getblock(file_lines[first:]))
    info = SourceInfo(fn)
    assert isinstance(info.func_def.body[-1], ast.Return)


def test_wrapped_function_reads_its_own_source(shapes):
    """`functools.wraps` sets `__wrapped__`: the source read is the wrapped one's, as
    `inspect.getsourcelines` reads it."""
    info = SourceInfo(shapes.wrapped)
    assert info.func_def.name == inspect.unwrap(shapes.wrapped).__name__


def test_a_kernel_error_points_at_the_users_line(tmp_path):
    """End to end: an error in a kernel whose header spans lines names the right line."""
    import subprocess
    import sys
    src = textwrap.dedent('''
        import spirad as sd
        sd.init(arch="cpu", offline_cache=False)

        @sd.kernel
        def k(
            a: sd.types.ndarray(),
        ):
            for i in a:
                a[i] = undefined_name + 1

        k(sd.ndarray(sd.f32, 4))
    ''')
    path = tmp_path / "prog.py"
    path.write_text(src)
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True)
    assert r.returncode != 0
    assert "prog.py" in r.stderr and "line 10" in r.stderr, r.stderr
    assert "a[i] = undefined_name + 1" in r.stderr
