"""Source locations in user errors: the quoted line and its caret underline.

Every user error that points at kernel code quotes the line and underlines the offending
expression (`user_error`), wherever it is raised (frontend, passes, backends):

    kernel_ir.errors.SpiradNameError:
    File "sim.py", line 12, in step:
            y[i] = foo(x[i])
                   ^^^
    name 'foo' is not defined

Taichi's layout: the line as it is in the file, wrapped at 80 columns, each @func call that led
there quoted first.

A `SrcLoc` (in `kernel_ir.nodes`) is plain data, so code generators and backends can format one
without the frontend that parsed the Python source.
"""
from __future__ import annotations

from textwrap import TextWrapper

from .nodes import SrcLoc

WIDTH = 80  # quoted lines wrap here (Taichi's layout), their underlines with them


def _shown(text: str) -> str:
    """A source line as quoted: tabs to 4 columns, other whitespace a space, no trailing
    whitespace (how Taichi reads kernel source, so carets line up as in its messages)."""
    return "".join(" " if c.isspace() else c for c in text.expandtabs(4)).rstrip()


def format_loc(loc: SrcLoc | None) -> str:
    """`File ..., line N, in NAME:` + the line as written (its indentation kept) + a caret
    underline; a line longer than `WIDTH` is wrapped, each piece over its part of the
    underline."""
    if loc is None:
        return ""
    text = loc.line_text
    shown = _shown(text)
    col = len(text[:loc.col].expandtabs(4))
    end = len(text[:max(loc.end_col, loc.col + 1)].expandtabs(4))
    end = max(col + 1, min(end, len(shown)))
    hint = (" " * col + "^" * (end - col)).ljust(len(shown))
    wrap = TextWrapper(width=WIDTH)
    code, under = wrap.wrap(shown), wrap.wrap(hint)
    quoted = "".join(c + "\n" + h + "\n" for c, h in zip(code, under)) if code else "\n\n"
    return f'File "{loc.filename}", line {loc.lineno}, in {loc.func_name}:\n' + quoted


def user_error(cls, msg: str, loc: SrcLoc | None, calls=()):
    """Build a user error of class `cls` whose message quotes `loc`, after the call sites that
    led there (`calls`: the locations of the @func calls, outermost first). Starts with a
    newline, as Taichi's, so the quoted lines begin at the left margin under the error's name."""
    where = "".join(format_loc(c) for c in calls) + format_loc(loc)
    err = cls(("\n" + where if where else "") + msg)
    err.loc = loc
    return err
