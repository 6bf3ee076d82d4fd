"""Kernel source: parsing a Python function and mapping its AST nodes to source locations.

`SourceInfo(fn)` reads and parses a kernel's or func's source once; `loc(node)` gives the
`SrcLoc` that user errors quote (formatting lives in `kernel_ir.source`).
"""
from __future__ import annotations

import ast
import inspect
import textwrap

from kernel_ir.nodes import SrcLoc


class SourceInfo:
    def __init__(self, fn):
        self.fn = fn
        try:
            lines, start = inspect.getsourcelines(fn)
            self.filename = inspect.getsourcefile(fn) or "<unknown>"
        except (OSError, TypeError) as e:
            from kernel_ir.errors import SpiradSyntaxError
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
