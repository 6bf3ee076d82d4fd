"""`print(...)`, f-strings and `str.format(...)` in kernels.

A format with run-time values is a `FormatStr` (text and values); only `print` accepts one. With
compile-time values only, an f-string or `.format` is the Python string itself. `print` builds a
`printing.PrintFormat` (registered once per print statement, per compile), and emits one PRINT
node whose sources are the run-time scalars; the host formats each record with Python's
`format(value, spec)` (see `spirad.printing`). Supported, as in Taichi: several arguments,
`sep=`, `end=`, strings and compile-time values (printed by Python's `str`), scalars, Vector /
Matrix values (printed as nested lists), f-strings (format specs and !r / !s / !a included) and
`"...".format(...)` with positional and keyword fields.
"""
from __future__ import annotations

import ast
import re
import string
from dataclasses import dataclass

from kernel_ir.errors import SpiradSyntaxError, SpiradTypeError
from kernel_ir.nodes import Node
from kernel_ir.ops import Op

from .. import printing
from . import print_spec
from .values import VecVal

_CONV = {-1: "", ord("r"): "r", ord("s"): "s", ord("a"): "a"}


@dataclass(frozen=True)
class FormatStr:
    """Text with run-time values: pieces are str or (value, spec, conv, the ast node of the
    field, for errors)."""
    pieces: tuple

    ONLY_PRINTED = ("an f-string or str.format() with run-time values can only be printed "
                    "(print(...)) in a kernel: strings are not values there")


def _runtime(x) -> bool:
    return isinstance(x, (Node, VecVal, FormatStr))


def _resolve(v, spec, dtype, node):
    """(spec, is_printf) of a value of `dtype` (print_spec.resolve), a user error at `node`."""
    try:
        return print_spec.resolve(spec, dtype)
    except TypeError as e:
        raise v.ctx.error(SpiradTypeError, str(e), node) from None


def _static_text(v, x, spec, conv, node):
    """A compile-time value as text: Taichi's printf meaning for a number with a printf spec."""
    if conv:
        x = {"r": repr, "s": str, "a": ascii}[conv](x)
    dtype = print_spec.static_dtype(x)
    if spec and dtype is not None:
        spec, printf = _resolve(v, spec, dtype, node)
        if printf:
            return spec % x
    try:
        return format(x, spec)
    except (ValueError, TypeError) as e:
        raise v.ctx.error(SpiradTypeError, f"format spec '{spec}': {e}", node) from None


def _finish(pieces):
    """A plain str when every piece is text, else a FormatStr."""
    if all(isinstance(p, str) for p in pieces):
        return "".join(pieces)
    return FormatStr(tuple(pieces))


def joined_str(v, node: ast.JoinedStr):
    """An f-string."""
    pieces = []
    for part in node.values:
        if isinstance(part, ast.Constant):
            pieces.append(part.value)
            continue
        val = v.rvalue(v.build(part.value))
        spec = ""
        if part.format_spec is not None:
            spec = v.rvalue(v.build(part.format_spec))
            if not isinstance(spec, str):
                raise v.ctx.error(SpiradSyntaxError, "a format spec in a kernel f-string must be "
                                                     "known at compile time", part.format_spec)
        conv = _CONV[part.conversion]
        pieces.append((val, spec, conv, part) if _runtime(val) else _static_text(v, val, spec, conv, part))
    return _finish(pieces)


def str_format(v, fmt: str, args, kwargs, node):
    """`fmt.format(*args, **kwargs)` in a kernel, with Taichi's rules: an empty field `{}` takes
    the next of the empty fields' positions (so `"{2} {1} {}"` mixes numbered and automatic
    fields), every positional and keyword argument must be used, and numbers with printf specs
    print as printf prints them."""
    args = [v.rvalue(a) for a in args]
    kwargs = {k: v.rvalue(a) for k, a in kwargs.items()}
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError as e:
        raise v.ctx.error(SpiradSyntaxError, f"bad format string: {e}", node) from None
    fields, auto = [], 0
    for text, name, spec, conv in parsed:
        if name is None:
            fields.append((text, None, None, None))
            continue
        if name == "":
            key, auto = auto, auto + 1
        elif name.isdigit():
            key = int(name)
        elif name.isidentifier():
            key = name
        elif not any(_runtime(a) for a in list(args) + list(kwargs.values())):
            return fmt.format(*args, **kwargs)  # `{0.attr}` / `{0[1]}` of compile-time values
        else:
            raise v.ctx.error(SpiradSyntaxError, f"format field {{{name}}}: only positions and "
                                                 f"names are supported in kernels", node)
        if "{" in (spec or ""):
            raise v.ctx.error(SpiradSyntaxError, "nested replacement fields in a format spec are "
                                                 "not supported in kernels", node)
        fields.append((text, key, spec or "", conv or ""))
    _check_arguments(v, [f[1] for f in fields if f[1] is not None], args, kwargs, node)
    pieces = []
    for text, key, spec, conv in fields:
        if text:
            pieces.append(text)
        if key is None:
            continue
        val = args[key] if isinstance(key, int) else kwargs[key]
        pieces.append((val, spec, conv, node) if _runtime(val) else _static_text(v, val, spec, conv, node))
    return _finish(pieces)


def _check_arguments(v, keys, args, kwargs, node):
    """Taichi's refusals of a `.format` whose fields and arguments disagree (SyntaxErrors)."""
    expected = max((k for k in keys if isinstance(k, int)), default=-1) + 1
    if expected != len(args):
        raise v.ctx.error(SpiradSyntaxError, f"Expected {expected} positional argument(s), but "
                                             f"received {len(args)} instead.", node)
    names = [k for k in keys if isinstance(k, str)]
    for k in names:
        if k not in kwargs:
            raise v.ctx.error(SpiradSyntaxError, f"Keyword '{k}' not found.", node)
    for k in kwargs:
        if k not in names:
            raise v.ctx.error(SpiradSyntaxError, f"Keyword '{k}' not used.", node)


class _Builder:
    """Flattens print's arguments into PrintFormat pieces and the PRINT node's sources."""

    def __init__(self, v, node):
        self.v, self.node, self.pieces, self.srcs = v, node, [], []

    def text(self, s: str):
        if s:
            if self.pieces and isinstance(self.pieces[-1], str):
                self.pieces[-1] += s
            else:
                self.pieces.append(s)

    def value(self, x, spec="", conv="", node=None):
        if isinstance(x, FormatStr):
            for p in x.pieces:
                if isinstance(p, str):
                    self.text(p)
                else:
                    self.value(*p)
        elif isinstance(x, (VecVal, Node)):
            printf = False
            if spec:
                spec, printf = _resolve(self.v, spec, x.dtype, node or self.node)
            shape = x.shape if isinstance(x, VecVal) else ()
            self.pieces.append(printing.Value(shape, x.dtype, spec, conv, printf))
            self.srcs.extend(x.comps if isinstance(x, VecVal) else (x,))
        elif isinstance(x, (list, tuple)) and any(_runtime(i) for i in _flat(x)):
            opened, closed = ("[", "]") if isinstance(x, list) else ("(", ")")
            self.text(opened)
            for k, item in enumerate(x):
                if k:
                    self.text(", ")
                if _runtime(item) or isinstance(item, (list, tuple)):
                    self.value(item)
                else:
                    self.text(repr(item))
            self.text("," + closed if isinstance(x, tuple) and len(x) == 1 else closed)
        else:
            self.text(_static_text(self.v, x, spec, conv, node or self.node))


def _flat(x):
    for i in x:
        if isinstance(i, (list, tuple)):
            yield from _flat(i)
        else:
            yield i


def h_print(v, args, kw, node):
    """`print(*args, sep=' ', end='\\n')` in a kernel."""
    for k in kw:
        if k not in ("sep", "end"):
            raise v.ctx.error(SpiradSyntaxError, f"print() in a kernel takes sep= and end= only, "
                                                 f"not {k}=", node)
    sep, end = (v.rvalue(kw.get(k, d)) for k, d in (("sep", " "), ("end", "\n")))
    if not (isinstance(sep, str) and isinstance(end, str)):
        raise v.ctx.error(SpiradTypeError, "print()'s sep= and end= must be strings known at "
                                           "compile time", node)
    b = _Builder(v, node)
    for k, a in enumerate(args):
        if k:
            b.text(sep)
        b.value(v.rvalue(a))
    b.text(end)
    _emit(v, b)
    return None


_PERCENT = re.compile(r"%(%|([-+ #0]*\d*(?:\.\d+)?)([diouxXeEfFgGcrsa]))")


def percent_format(v, fmt: str, args, node):
    """`"x[%d] = %f" % (i, x[i])` with run-time values (Taichi takes it in an assert's
    message): the printf template as `str.format` fields with the same specs."""
    out, pos = [], 0
    for m in _PERCENT.finditer(fmt):
        out.append(fmt[pos:m.start()].replace("{", "{{").replace("}", "}}"))
        pos = m.end()
        if m.group(1) == "%":
            out.append("%")
            continue
        flags, conv = m.group(2), m.group(3)
        conv = "d" if conv in "iu" else conv
        out.append("{}" if conv == "s" and not flags else "{!" + conv + "}" if conv in "ra"
                   else "{:" + flags + conv + "}")
    out.append(fmt[pos:].replace("{", "{{").replace("}", "}}"))
    return str_format(v, "".join(out), list(args), {}, node)


def emit_assert_text(v, node, msg: FormatStr, site: int) -> None:
    """In a failing assert's branch: a record of its message's run-time values, kept as the
    message of assert `site` (printing.PrintFormat.assert_site) instead of printed."""
    b = _Builder(v, node)
    b.value(msg)
    _emit(v, b, site)


def emit_text(v, node, text: str) -> None:
    """A PRINT of the constant `text` (the debug checks' messages: frontend/overflow.py)."""
    b = _Builder(v, node)
    b.text(text)
    _emit(v, b)


def _emit(v, b, assert_site: int = 0) -> None:
    st = v.ctx.state
    if st.prints is None:  # the first kernel of this init() that prints
        from ..data.field import internal_field
        st.prints = printing.PrintBuffer(internal_field)
    fid = st.prints.register(printing.PrintFormat(tuple(b.pieces), assert_site))
    v.ctx.b.emit(Op.PRINT, None, tuple(b.srcs), fid)
