"""Readable text form of IR, one node per line: `%3 : f32 = ADD %1, %2`."""
from __future__ import annotations

from .nodes import Block, KernelIR, LoopArg, TaskList


class _Names:
    def __init__(self):
        self.ids = {}

    def __call__(self, n):
        if n not in self.ids:
            self.ids[n] = len(self.ids)
        return f"%{self.ids[n]}"


def _fmt_arg(arg, name):
    if isinstance(arg, LoopArg):
        parts = []
        if arg.index is not None:
            parts.append(f"index={name(arg.index)}")
        if arg.carried:
            parts.append("carried=[" + ", ".join(name(c) for c in arg.carried) + "]")
        if arg.parallel:
            parts.append("parallel")
        return " ".join(parts)
    if arg is None:
        return ""
    if hasattr(arg, "name") and not isinstance(arg, (int, float, str)):
        return repr(arg)
    return repr(arg)


def print_block(block: Block, name=None, indent=1) -> str:
    name = name or _Names()
    lines = []
    pad = "  " * indent
    for n in block.nodes:
        srcs = ", ".join(name(s) for s in n.srcs)
        lhs = f"{name(n)} : {n.dtype} = " if n.dtype is not None else ""
        a = _fmt_arg(n.arg, name)
        lines.append(f"{pad}{lhs}{n.op.name} {srcs}{' ' if srcs and a else ''}{('[' + a + ']') if a else ''}".rstrip())
        for k, b in enumerate(n.blocks):
            if k:
                lines.append(f"{pad}else:")
            lines.append(print_block(b, name, indent + 1) if b.nodes else f"{pad}  (empty)")
    return "\n".join(lines)


def print_kernel(k: KernelIR) -> str:
    return f"kernel {k.name}({', '.join(a.name for a in k.args)}):\n" + print_block(k.body)


def print_tasks(tl: TaskList) -> str:
    out = [f"kernel {tl.name}:"]
    for i, t in enumerate(tl.tasks):
        name = _Names()
        if t.kind == "range":
            from .rewrite import expr_nodes
            out.append(f" task {i} range {name(t.index)} in [begin, end):")
            for which, e in (("begin", t.begin), ("end", t.end)):
                nodes = expr_nodes(e)
                out.append(f"  {which} = " + "; ".join(
                    f"{name(x)}={x.op.name}({', '.join(name(s) for s in x.srcs)}{x.arg if x.op.name in ('CONST', 'ARG', 'NDARRAY_SHAPE') else ''})" for x in nodes))
        else:
            out.append(f" task {i} serial:")
        out.append(print_block(t.body, name, 2))
    return "\n".join(out)
