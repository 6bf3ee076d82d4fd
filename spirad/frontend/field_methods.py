"""Field methods called inside kernels: `x.fill(v)`.

Quadrants gives `fill` a meaning in kernel scope (Genesis' spatial hasher calls
`self.slot_size.fill(0)` in a `@qd.func`): the loop `for I in grouped(x): x[I] = v` written at
the call site. So it is a parallel loop where the call sits at the kernel's top level, and a serial
loop inside another loop, exactly as that loop would be; a vector / matrix field gets `v` in
every component. It is written here as a spirad function and inlined like any `@sd.func`, so the
frontend, the passes and every backend see an ordinary loop.
"""
from __future__ import annotations

_FILL = []  # the @sd.func, made on first use (spirad.func imports the frontend)


def _fill_func():
    if not _FILL:
        from .. import lang
        from ..func import func
        from ..types import template

        grouped = lang.grouped

        @func
        def field_fill_in_kernel(F: template(), val: template()):
            for I in grouped(F):
                F[I] = val

        _FILL.append(field_fill_in_kernel)
    return _FILL[0]


def field_fill(builder, field, args, node):
    """`field.fill(v)` in a kernel (a BoundMethod's function: builder, field, args, node)."""
    from kernel_ir.errors import SpiradTypeError
    if len(args) != 1:
        raise builder.ctx.error(SpiradTypeError, f"fill takes one value, got {len(args)}", node)
    return builder.inline_func(_fill_func(), [field, args[0]], {}, node)
