"""Kernel source: parsing a Python function and pointing at its lines in error messages.

Every user error raised while compiling a kernel goes through `SourceInfo.error`, so it quotes the
line and underlines the offending expression:

    File "sim.py", line 12, in kernel step:
        y[i] = foo(x[i])
               ^^^
    spirad.errors.SpiradNameError: name 'foo' is not defined
"""
from __future__ import annotations

import ast
import inspect
import textwrap

from ..ir.nodes import SrcLoc


class SourceInfo:
    def __init__(self, fn):
        self.fn = fn
        try:
            lines, start = inspect.getsourcelines(fn)
            self.filename = inspect.getsourcefile(fn) or "<unknown>"
        except (OSError, TypeError) as e:
            from ..errors import SpiradSyntaxError
            raise SpiradSyntaxError(f"cannot read the source of {fn.__qualname__}: {e}") from None
        raw = "".join(lines)
        self.indent = len(lines[0]) - len(lines[0].lstrip())
        self.tree = ast.parse(textwrap.dedent(raw))
        ast.increment_lineno(self.tree, start - 1)
        self.lines = {start + k: line.rstrip("\n") for k, line in enumerate(lines)}
        self.func_def = self.tree.body[0]
        if not isinstance(self.func_def, ast.FunctionDef):
            raise RuntimeError("source of a kernel is not a function definition")

    def loc(self, node) -> SrcLoc | None:
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            return None
        col = getattr(node, "col_offset", 0) + self.indent
        end_line = getattr(node, "end_lineno", lineno)
        end = getattr(node, "end_col_offset", None)
        end_col = end + self.indent if (end is not None and end_line == lineno) else None
        text = self.lines.get(lineno, "")
        if end_col is None:
            end_col = len(text)
        return SrcLoc(self.filename, lineno, col, end_col, text, self.fn.__name__)


def format_loc(loc: SrcLoc | None) -> str:
    """`File ..., line N, in NAME:` + the line + a caret underline."""
    if loc is None:
        return ""
    text = loc.line_text
    stripped = text.lstrip()
    cut = len(text) - len(stripped)
    width = max(1, min(loc.end_col, len(text)) - loc.col)
    caret = " " * (loc.col - cut) + "^" * width
    return (f'File "{loc.filename}", line {loc.lineno}, in {loc.func_name}:\n'
            f"    {stripped}\n    {caret}\n")


def user_error(cls, msg: str, loc: SrcLoc | None):
    """Build a user error of class `cls` whose message quotes `loc`."""
    err = cls(format_loc(loc) + msg)
    err.loc = loc
    return err
