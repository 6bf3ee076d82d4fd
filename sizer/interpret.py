"""The bytecode interpreter: the GPU sizer shader's model, run on the host.

``eval_bytecode(code, ctx)`` is a non-recursive interpreter of the bytecode of
:mod:`sizer.bytecode`, written the way the GPU sizer shader is: one forward sweep
over fixed-width records, explicit jumps for loop spans, one value slot per node,
no recursion, no allocation during the sweep. It agrees with ``eval_tree`` and
``eval_fast`` (:mod:`sizer.evaluate`) on every input, errors included.
"""

from __future__ import annotations

import numpy as np

from .bytecode import (HEADER_WORDS, RECORD_WORDS, ROOT_WORDS, Header, Op, const_value,
                       verify as _verify)
from .errors import check_range
from .evaluate import _SENTINEL, to_int

__all__ = ["eval_bytecode"]



def eval_bytecode(code, ctx, *, verify: bool = True) -> list:
    """Evaluate every root of ``code``; returns one int per root.

    Written as the GPU shader will be: ``val`` has one slot per node; the
    instruction pointer ``ip`` moves forward except at a ``MOR`` record whose
    loop continues; no recursion.  ``verify=False`` skips the structural
    check (the shader never checks; the host verifies once before upload).
    """
    if verify:
        h, w = _verify(code)
    else:
        w = np.asarray(code, dtype=np.int32)
        h = Header(w[:HEADER_WORDS])
    n_nodes = h.n_nodes
    words = w.tolist()
    base = h.nodes_off
    ix = h.index_off
    val = [0] * n_nodes
    ip = 0
    while ip < n_nodes:
        r = base + RECORD_WORDS * ip
        op, a, b, c = words[r], words[r + 1], words[r + 2], words[r + 3]
        nxt = ip + 1
        if op == Op.CONST:
            val[ip] = const_value(a, b)
        elif op == Op.ADD:
            val[ip] = check_range(val[a] + val[b], "Add")
        elif op == Op.SUB:
            d = val[a] - val[b]
            val[ip] = check_range(d if d > 0 else 0, "Sub")
        elif op == Op.MUL:
            val[ip] = check_range(val[a] * val[b], "Mul")
        elif op == Op.MAX:
            val[ip] = val[a] if val[a] >= val[b] else val[b]
        elif op == Op.BOUND_VAR:
            val[ip] = val[a]
        elif op == Op.LOOP:
            if val[a] >= val[b]:
                val[c] = 0
                nxt = c + 1
            else:
                val[ip] = val[a]
                val[c] = _SENTINEL
        elif op == Op.MOR:
            acc = val[ip]
            if val[a] > acc:
                acc = val[a]
            val[ip] = acc
            p = b
            v = val[p] + 1
            end_node = words[base + RECORD_WORDS * p + 2]
            if v < val[end_node]:
                val[p] = v
                nxt = p + 1
        elif op == Op.SCALAR_ARG:
            val[ip] = to_int(ctx.scalar_arg(a), f"ScalarArg({a})")
        elif op == Op.NDARRAY_SHAPE:
            val[ip] = to_int(ctx.ndarray_shape(a, b), f"NdarrayShape({a}, {b})")
        elif op == Op.FIELD_LOAD or op == Op.NDARRAY_READ:
            idx = tuple(val[words[ix + k]] for k in range(b, b + c))
            if op == Op.FIELD_LOAD:
                val[ip] = to_int(ctx.field_read(a, idx), f"FieldLoad({a}, {idx})")
            else:
                val[ip] = to_int(ctx.ndarray_read(a, idx), f"NdarrayRead({a}, {idx})")
        else:
            raise RuntimeError(f"sizer bytecode interpreter: unknown opcode {op} at node {ip}")
        ip = nxt
    roots = words[h.roots_off:h.roots_off + ROOT_WORDS * h.n_roots]
    return [val[roots[2 * k + 1]] for k in range(h.n_roots)]
