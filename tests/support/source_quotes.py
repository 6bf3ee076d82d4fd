"""Checks that an error quotes the user's source: the line number of a line of a kernel or func
and the caret under it (engineering rules: a user error shows the user's source line with a
caret). Written once for the diagnostics tests of every layer."""
from __future__ import annotations

import inspect


def line_of(fn, text: str) -> int:
    """The file line number of the first line of `fn`'s source that contains `text`."""
    src, first = inspect.getsourcelines(fn)
    for k, line in enumerate(src):
        if text in line:
            return first + k
    raise AssertionError(f"{text!r} is not in the source of {fn!r}")


def assert_quotes(err, fn, text, *words, at=None):
    """`err` quotes `text` (a line of `fn`'s source) with its file line number and a caret line
    right below it starting under `at` (default: the statement), and mentions every word of
    `words`."""
    msg = str(err)
    assert f"line {line_of(fn, text)}" in msg, msg
    lines = msg.splitlines()
    k = next(k for k, line in enumerate(lines) if text in line and not line.startswith("File "))
    assert k + 1 < len(lines) and set(lines[k + 1].strip()) == {"^"}, msg
    col = lines[k].index(at or text.split()[0])
    assert lines[k + 1].index("^") == col, msg       # the caret starts under the construct
    for w in words:
        assert w in msg, msg
