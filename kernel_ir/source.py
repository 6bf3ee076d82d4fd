"""Source locations in user errors: the quoted line and its caret underline.

Every user error that points at kernel code quotes the line and underlines the offending
expression (`user_error`), wherever it is raised (frontend, passes, backends):

    File "sim.py", line 12, in kernel step:
        y[i] = foo(x[i])
               ^^^
    kernel_ir.errors.SpiradNameError: name 'foo' is not defined

A `SrcLoc` (in `kernel_ir.nodes`) is plain data, so code generators and backends can format one
without the frontend that parsed the Python source.
"""
from __future__ import annotations

from .nodes import SrcLoc


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
