"""Kernel source: parsing a Python function and mapping its AST nodes to source locations.

`SourceInfo(fn)` reads and parses a kernel's or func's source once; `loc(node)` gives the
`SrcLoc` that user errors quote (formatting lives in `kernel_ir.source`).
"""
from __future__ import annotations

import ast
import inspect
import linecache
import textwrap

from kernel_ir.nodes import SrcLoc


class SourceInfo:
    def __init__(self, fn):
        self.fn = fn
        try:
            file_lines, first = inspect.findsource(inspect.unwrap(fn))  # as getsourcelines
            self.filename = inspect.getsourcefile(fn) or "<unknown>"
        except (OSError, TypeError) as e:
            from kernel_ir.errors import SpiradSyntaxError
            raise SpiradSyntaxError(no_source_message(fn, e)) from None
        start = first + 1
        lines = _indented_block(file_lines, first)
        self.tree = _parse(lines, start)
        if self.tree is None:  # the indentation cut was wrong: let the tokenizer find the end
            lines = inspect.getblock(file_lines[first:])
            self.tree = _parse(lines, start)
            if self.tree is None:  # e.g. a string at column 0 inside: dedent cannot, as before
                self.tree = ast.parse(textwrap.dedent("".join(lines)))
                ast.increment_lineno(self.tree, start - 1)
        self.indent = len(lines[0]) - len(lines[0].lstrip())
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


def _indented_block(lines: list, first: int) -> list:
    """The lines of the definition starting at `lines[first]` (decorators, header, body): up
    to the first code line after the `def` header indented no deeper than the definition. The
    same lines `inspect.getblock` finds by tokenizing, which was a third of the Python work of
    compiling a small kernel. A cut inside a bracket, a string or a continuation leaves a
    fragment that does not parse, and the caller then asks `inspect.getblock`."""
    depth = len(lines[first]) - len(lines[first].lstrip())
    k = first
    while k < len(lines) and not lines[k].lstrip().startswith(("def ", "async def ")):
        k += 1  # decorators
    end = k + 1
    for k in range(k + 1, len(lines)):
        s = lines[k].lstrip()
        if not s or s[0] == "#":
            continue
        if len(lines[k]) - len(s) <= depth and s[0] not in ")]}":
            break  # ")" at the definition's depth: the end of a header written over lines
        end = k + 1
    return lines[first:end]


def _parse(lines: list, start: int):
    """The module AST of the dedented definition with line numbers of its file (`start`: the
    first line's number), or None when the lines are not one whole definition."""
    try:
        tree = ast.parse("\n" * (start - 1) + textwrap.dedent("".join(lines)))
    except SyntaxError:
        return None
    return tree if len(tree.body) == 1 else None


def no_source_message(fn, e) -> str:
    """Why the source of `fn` cannot be read, and what to do."""
    code = getattr(fn, "__code__", None)
    where = code.co_filename if code is not None else "?"
    msg = (f"cannot read the source of {fn.__qualname__} (defined in {where}): spirad compiles a "
           f"kernel or func from its Python source, ")
    if where in ("<stdin>", "<string>") or where.startswith("<"):
        return msg + (f"and Python keeps none for code typed at the interactive prompt, piped to "
                      f"`python -` or run by exec() ({where}). Put the code in a .py file and run "
                      f"that (python file.py), or use IPython / Jupyter, which keep the source "
                      f"(exec() users: compile with a file name registered in linecache)")
    return msg + f"and it cannot be read ({e}); is the .py file still there?"


class LambdaSourceInfo(SourceInfo):
    """The source of a lambda, as a one-statement function `def <lambda>(...): return body`.

    The lambda's whole file is parsed (its line alone may be a fragment of a longer
    statement); among the lambdas on its first line, the one whose bytecode matches is taken."""

    def __init__(self, fn):
        from kernel_ir.errors import SpiradSyntaxError
        self.fn = fn
        code = fn.__code__
        self.filename = inspect.getsourcefile(fn) or code.co_filename
        lines = linecache.getlines(self.filename, fn.__globals__)
        if not lines:
            raise SpiradSyntaxError(f"cannot read the source of a lambda in {self.filename}; "
                                    f"define a function with def instead")
        self.indent = 0
        self.lines = {k + 1: line.rstrip("\n") for k, line in enumerate(lines)}
        tree = ast.parse("".join(lines))
        found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)
                 and n.lineno == code.co_firstlineno
                 and [a.arg for a in n.args.args] == list(code.co_varnames[:code.co_argcount])]
        if len(found) > 1:  # several lambdas with the same parameters on the line: compare code
            same = [n for n in found if _lambda_code(n, self.filename) == _code_key(code)]
            found = same or found[:1]
        if not found:
            raise SpiradSyntaxError(f"cannot find the source of the lambda at {self.filename}:"
                                    f"{code.co_firstlineno}; define a function with def instead")
        lam = found[0]
        ret = ast.copy_location(ast.Return(lam.body), lam.body)
        fdef = ast.FunctionDef(name="lambda", args=lam.args, body=[ret], decorator_list=[],
                               returns=None, type_comment=None)
        self.func_def = ast.copy_location(fdef, lam)
        ast.fix_missing_locations(self.func_def)
        self.tree = ast.Module(body=[self.func_def], type_ignores=[])


def _code_key(code):
    """What tells two lambdas on one line apart: bytecode, constants, names, body columns."""
    cols = tuple(p[2] for p in code.co_positions()) if hasattr(code, "co_positions") else ()
    return code.co_code, code.co_consts, code.co_names, cols


def _lambda_code(lam, filename):
    """`_code_key` of the lambda expression `lam` compiled alone (at its own position), or None."""
    try:
        expr = ast.Expression(lam)
        mod = compile(expr, filename, "eval")
    except (SyntaxError, ValueError):
        return None
    for c in mod.co_consts:
        if hasattr(c, "co_code"):
            return _code_key(c)
    return None
