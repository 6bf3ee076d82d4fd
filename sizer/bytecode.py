"""Flat post-order bytecode for a task's size expressions (one root per stack).

The bytecode is a 1-D array of **int32 words** (``numpy.int32``,
little-endian when serialised with ``.tobytes()``).  ``sizer/FORMAT.md`` is the
normative description; this docstring is a summary.

Layout (all offsets are word offsets from the start of the array)::

    header   8 words   MAGIC, VERSION, n_roots, n_nodes, n_index,
                       roots_off, nodes_off, index_off
    roots    2 words per root        first_node, root_node
    nodes    4 words per node        opcode, a, b, c
    index    1 word per entry        node indices (operands of reads)

``MAGIC = 0x43425A53`` (the bytes ``b"SZBC"`` read as little-endian int32),
``VERSION = 1``, ``roots_off = 8``, ``nodes_off = roots_off + 2*n_roots``,
``index_off = nodes_off + 4*n_nodes``; the array has exactly
``index_off + n_index`` words.

Nodes are numbered 0..n_nodes-1 in record order.  Every operand is a node
index smaller than its user (post-order), so one forward sweep evaluates
everything.  Root ``r`` occupies the contiguous node span
``[first_node, root_node]``; spans of consecutive roots are adjacent and the
last root's ``root_node`` is ``n_nodes - 1``.

Records (``op, a, b, c``; unused words are 0)::

    1  CONST          lo, hi, 0        value = (int64(hi) << 32) | uint32(lo)
    2  SCALAR_ARG     arg, 0, 0
    3  NDARRAY_SHAPE  arg, axis, 0
    4  FIELD_LOAD     field, off, n    indices = index[off : off+n] (node ids)
    5  NDARRAY_READ   arg, off, n      idem
    6  ADD            x, y, 0          x + y
    7  SUB            x, y, 0          max(x - y, 0)
    8  MUL            x, y, 0          x * y
    9  MAX            x, y, 0          max(x, y)
    10 LOOP           begin, end, q    opens MaxOverRange; q = its MOR record
    11 MOR            body, p, var     closes it; p = its LOOP record
    12 BOUND_VAR      p, 0, 0          current var of the LOOP record p

``MaxOverRange(var, begin, end, body)`` is encoded as
``[begin nodes] [end nodes] LOOP@p [body nodes] MOR@q``.  The interpreter keeps
one int64 value per node (``val[]``); the loop needs no other state:

* at ``LOOP@p``: ``b = val[begin]; e = val[end]``; if ``b >= e`` then
  ``val[q] = 0`` and jump to ``q + 1`` (the body is skipped); else
  ``val[p] = b`` (the loop variable) and ``val[q] = INT64_MIN`` (the
  accumulator), continue at ``p + 1``;
* at ``MOR@q``: ``val[q] = max(val[q], val[body])``; ``v = val[p] + 1``; if
  ``v < val[end of p]`` then ``val[p] = v`` and jump to ``p + 1``, else
  continue at ``q + 1`` (``val[q]`` now holds the result);
* ``BOUND_VAR p`` reads ``val[p]``.

Every arithmetic result, read and constant must satisfy ``|v| <= 2**62 - 1``
(an overflow is an error, never a wrap).  ``var`` in the MOR record is the
original var id, kept only for ``decode``; interpreters ignore it.

Limits: every word is an int32, so ids (field, arg, axis, var), node counts
and table sizes are at most ``2**31 - 1``; a read has at most
``MAX_INDICES = 8`` indices.  Expressions are trees: every node except a root
is the operand of exactly one user (no sharing), so ``val[]`` slots of a loop
body are only rewritten by that body.
"""

from __future__ import annotations

import numpy as np

from .errors import MAX_ABS, SizerError
from .expr import (Add, BoundVariable, Const, FieldLoad, Max, MaxOverRange, Mul,
                   NdarrayRead, NdarrayShape, ScalarArg, SizeExpr, Sub)

__all__ = [
    "MAGIC", "VERSION", "HEADER_WORDS", "RECORD_WORDS", "MAX_INDICES", "Op",
    "Header", "encode", "decode", "verify", "disassemble", "const_words", "const_value",
]

MAGIC = 0x43425A53  # b"SZBC" little-endian
VERSION = 1
HEADER_WORDS = 8
# word positions of the header fields (FORMAT.md "Header"); the GPU sizer kernel reads these
(H_MAGIC, H_VERSION, H_N_ROOTS, H_N_NODES, H_N_INDEX, H_ROOTS_OFF, H_NODES_OFF,
 H_INDEX_OFF) = range(HEADER_WORDS)
RECORD_WORDS = 4
R_OP, R_A, R_B, R_C = range(RECORD_WORDS)  # word positions in a node record
ROOT_WORDS = 2
MAX_INDICES = 8
I32_MAX = (1 << 31) - 1


class Op:
    CONST = 1
    SCALAR_ARG = 2
    NDARRAY_SHAPE = 3
    FIELD_LOAD = 4
    NDARRAY_READ = 5
    ADD = 6
    SUB = 7
    MUL = 8
    MAX = 9
    LOOP = 10
    MOR = 11
    BOUND_VAR = 12

    NAMES = {1: "CONST", 2: "SCALAR_ARG", 3: "NDARRAY_SHAPE", 4: "FIELD_LOAD",
             5: "NDARRAY_READ", 6: "ADD", 7: "SUB", 8: "MUL", 9: "MAX",
             10: "LOOP", 11: "MOR", 12: "BOUND_VAR"}


_BINARY_OPS = {Add: Op.ADD, Sub: Op.SUB, Mul: Op.MUL, Max: Op.MAX}
_BINARY_NODES = {v: k for k, v in _BINARY_OPS.items()}


def const_words(value: int) -> tuple:
    """``(lo, hi)`` signed int32 halves of a 64-bit constant."""
    lo = value & 0xFFFFFFFF
    if lo >= 1 << 31:
        lo -= 1 << 32
    return lo, value >> 32


def const_value(lo: int, hi: int) -> int:
    """Inverse of ``const_words``."""
    return (int(hi) << 32) | (int(lo) & 0xFFFFFFFF)


# --------------------------------------------------------------------------
# Encoder


class _Encoder:
    def __init__(self):
        self.records: list = []  # [op, a, b, c]
        self.index: list = []

    def emit(self, op, a=0, b=0, c=0) -> int:
        for w in (a, b, c):
            if not -(1 << 31) <= w <= I32_MAX:
                raise SizerError(f"bytecode operand {w} does not fit an int32 word")
        self.records.append([op, a, b, c])
        if len(self.records) > I32_MAX:
            raise SizerError("too many bytecode nodes")
        return len(self.records) - 1

    def node(self, e: SizeExpr, scope: dict) -> int:
        if isinstance(e, Const):
            lo, hi = const_words(e.value)
            return self.emit(Op.CONST, lo, hi)
        if isinstance(e, ScalarArg):
            return self.emit(Op.SCALAR_ARG, e.arg)
        if isinstance(e, NdarrayShape):
            return self.emit(Op.NDARRAY_SHAPE, e.arg, e.axis)
        if isinstance(e, (FieldLoad, NdarrayRead)):
            if len(e.indices) > MAX_INDICES:
                raise SizerError(f"{type(e).__name__} has {len(e.indices)} indices; "
                                 f"the bytecode allows at most {MAX_INDICES}")
            ids = [self.node(i, scope) for i in e.indices]
            off = len(self.index)
            self.index.extend(ids)
            if isinstance(e, FieldLoad):
                return self.emit(Op.FIELD_LOAD, e.field, off, len(ids))
            return self.emit(Op.NDARRAY_READ, e.arg, off, len(ids))
        op = _BINARY_OPS.get(type(e))
        if op is not None:
            x = self.node(e.a, scope)
            y = self.node(e.b, scope)
            return self.emit(op, x, y)
        if isinstance(e, BoundVariable):
            p = scope.get(e.var)
            if p is None:
                raise SizerError(f"BoundVariable({e.var}) is not bound by an enclosing "
                                 f"MaxOverRange")
            return self.emit(Op.BOUND_VAR, p)
        if isinstance(e, MaxOverRange):
            b = self.node(e.begin, scope)
            n = self.node(e.end, scope)
            p = self.emit(Op.LOOP, b, n, 0)
            body = self.node(e.body, {**scope, e.var: p})
            q = self.emit(Op.MOR, body, p, e.var)
            self.records[p][3] = q
            return q
        raise SizerError(f"not a SizeExpr node: {e!r}")


def encode(roots, *, scalar_args=None, ndarray_shapes=None, fold: bool = True) -> np.ndarray:
    """Encode a task's root expressions (one per stack) into int32 bytecode.

    With ``fold=True`` (default) every subtree that reads no device-resident
    data (no ``FieldLoad`` / ``NdarrayRead``) and has no free bound variable
    is evaluated on the host and replaced by a ``CONST``; ``ScalarArg(i)``
    counts as closed when ``scalar_args`` (mapping or sequence) provides arg
    ``i``, ``NdarrayShape(a, k)`` when ``ndarray_shapes`` (mapping or sequence
    of shape tuples) provides arg ``a``.  Leaves not provided stay in the
    bytecode as ``SCALAR_ARG`` / ``NDARRAY_SHAPE`` and are read from the
    launch context at evaluation time.  A subtree whose host evaluation fails
    (e.g. overflow) is kept unfolded, so the error surfaces where and when the
    runtime evaluates it.  ``fold=False`` encodes the trees verbatim.
    """
    roots = list(roots)
    if fold:
        from .fold import fold_constants
        roots = [fold_constants(r, scalar_args=scalar_args, ndarray_shapes=ndarray_shapes)
                 for r in roots]
    enc = _Encoder()
    spans = []
    for r in roots:
        if not isinstance(r, SizeExpr):
            raise SizerError(f"root must be a SizeExpr, got {r!r}")
        first = len(enc.records)
        spans.append((first, enc.node(r, {})))
    n_roots, n_nodes, n_index = len(spans), len(enc.records), len(enc.index)
    roots_off = HEADER_WORDS
    nodes_off = roots_off + ROOT_WORDS * n_roots
    index_off = nodes_off + RECORD_WORDS * n_nodes
    total = index_off + n_index
    if total > I32_MAX:
        raise SizerError("bytecode too large for int32 offsets")
    code = np.zeros(total, dtype=np.int32)
    for pos, word in ((H_MAGIC, MAGIC), (H_VERSION, VERSION), (H_N_ROOTS, n_roots),
                      (H_N_NODES, n_nodes), (H_N_INDEX, n_index), (H_ROOTS_OFF, roots_off),
                      (H_NODES_OFF, nodes_off), (H_INDEX_OFF, index_off)):
        code[pos] = word
    if n_roots:
        code[roots_off:nodes_off] = np.asarray(spans, dtype=np.int64).ravel()
    if n_nodes:
        code[nodes_off:index_off] = np.asarray(enc.records, dtype=np.int64).ravel()
    if n_index:
        code[index_off:] = enc.index
    return code


# --------------------------------------------------------------------------
# Verification and decoding


class Header:
    """Parsed header fields of a bytecode array."""

    def __init__(self, words):
        w = [int(x) for x in words]
        self.magic, self.version = w[H_MAGIC], w[H_VERSION]
        self.n_roots, self.n_nodes, self.n_index = w[H_N_ROOTS], w[H_N_NODES], w[H_N_INDEX]
        self.roots_off, self.nodes_off, self.index_off = (w[H_ROOTS_OFF], w[H_NODES_OFF],
                                                          w[H_INDEX_OFF])


def _as_words(code) -> np.ndarray:
    if isinstance(code, (bytes, bytearray, memoryview)):
        if len(code) % 4:
            raise SizerError("bytecode byte length is not a multiple of 4")
        return np.frombuffer(code, dtype="<i4").astype(np.int32)
    arr = np.asarray(code)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise SizerError("bytecode must be a 1-D integer array")
    if arr.size and (arr.min() < -(1 << 31) or arr.max() > I32_MAX):
        raise SizerError("bytecode words must fit int32")
    return arr.astype(np.int32, copy=False)


def verify(code) -> tuple:
    """Check every structural invariant of ``code``; return ``(header,
    words)`` with ``words`` the int32 array.  Raises ``SizerError`` naming the
    first violation.  (The GPU interpreter relies on these invariants and
    checks none of them; the host verifies before upload.)"""
    w = _as_words(code)
    if w.size < HEADER_WORDS:
        raise SizerError(f"bytecode too short for its header ({w.size} words)")
    h = Header(w[:HEADER_WORDS])
    if h.magic != MAGIC:
        raise SizerError(f"bad bytecode magic 0x{h.magic & 0xFFFFFFFF:08x} "
                         f"(expected 0x{MAGIC:08x})")
    if h.version != VERSION:
        raise SizerError(f"unsupported bytecode version {h.version} (expected {VERSION})")
    if min(h.n_roots, h.n_nodes, h.n_index) < 0:
        raise SizerError("negative count in bytecode header")
    if (h.roots_off != HEADER_WORDS
            or h.nodes_off != h.roots_off + ROOT_WORDS * h.n_roots
            or h.index_off != h.nodes_off + RECORD_WORDS * h.n_nodes
            or w.size != h.index_off + h.n_index):
        raise SizerError("inconsistent bytecode table offsets / length")
    rec = w[h.nodes_off:h.index_off].reshape(h.n_nodes, RECORD_WORDS).tolist()
    index = w[h.index_off:].tolist()
    roots = w[h.roots_off:h.nodes_off].reshape(h.n_roots, ROOT_WORDS).tolist()

    def bad(i, msg):
        raise SizerError(f"malformed bytecode at node {i} "
                         f"({Op.NAMES.get(rec[i][0], rec[i][0])}): {msg}")

    used = [False] * h.n_nodes
    loops: list = []  # open LOOP record positions, innermost last
    index_used = [False] * h.n_index

    def use(i, r):
        if not 0 <= r < i:
            bad(i, f"operand {r} is not an earlier node")
        if used[r]:
            bad(i, f"operand {r} is used twice (bytecode must be a tree)")
        if rec[r][0] == Op.LOOP:
            bad(i, f"operand {r} is a LOOP record")
        if loops and r <= loops[-1]:
            bad(i, f"operand {r} lies outside the enclosing loop body")
        used[r] = True

    for i, (op, a, b, c) in enumerate(rec):
        if op == Op.CONST:
            if abs(const_value(a, b)) > MAX_ABS or c:
                bad(i, "constant out of range")
        elif op in (Op.SCALAR_ARG, Op.NDARRAY_SHAPE):
            if a < 0 or b < 0 or c or (op == Op.SCALAR_ARG and b):
                bad(i, "bad immediate")
        elif op in (Op.FIELD_LOAD, Op.NDARRAY_READ):
            if a < 0 or not 0 <= c <= MAX_INDICES or b < 0 or b + c > h.n_index:
                bad(i, "bad index list")
            for k in range(b, b + c):
                if index_used[k]:
                    bad(i, f"index table entry {k} shared")
                index_used[k] = True
                use(i, index[k])
        elif op in _BINARY_NODES:
            if c:
                bad(i, "nonzero unused word")
            use(i, a)
            use(i, b)
        elif op == Op.LOOP:
            use(i, a)
            use(i, b)
            if not i < c < h.n_nodes or rec[c][0] != Op.MOR or rec[c][2] != i:
                bad(i, f"LOOP does not point at its MOR record ({c})")
            loops.append(i)
        elif op == Op.MOR:
            if not loops or loops[-1] != b:
                bad(i, f"MOR closes loop {b}, but the innermost open loop is "
                       f"{loops[-1] if loops else None}")
            if rec[b][3] != i or c < 0:
                bad(i, "MOR / LOOP records disagree")
            use(i, a)
            loops.pop()
        elif op == Op.BOUND_VAR:
            if a not in loops or b or c:
                bad(i, f"BOUND_VAR refers to {a}, which is not an open loop")
        else:
            bad(i, f"unknown opcode {op}")
    if loops:
        raise SizerError(f"malformed bytecode: loop at node {loops[-1]} is never closed")
    if not all(index_used):
        raise SizerError("malformed bytecode: unused index table entries")
    expect_first = 0
    for r, (first, node) in enumerate(roots):
        if (first != expect_first or not first <= node < h.n_nodes or used[node]
                or rec[node][0] == Op.LOOP):
            raise SizerError(f"malformed bytecode: bad span for root {r}")
        expect_first = node + 1
    if expect_first != h.n_nodes:
        raise SizerError("malformed bytecode: root spans do not cover every node")
    if sum(not u and r[0] != Op.LOOP for u, r in zip(used, rec)) != h.n_roots:
        raise SizerError("malformed bytecode: unused nodes")
    return h, w


def decode(code) -> list:
    """Rebuild the root expressions from bytecode (after ``verify``)."""
    h, w = verify(code)
    rec = w[h.nodes_off:h.index_off].reshape(h.n_nodes, RECORD_WORDS).tolist()
    index = w[h.index_off:].tolist()
    roots = w[h.roots_off:h.nodes_off].reshape(h.n_roots, ROOT_WORDS).tolist()
    out: list = [None] * h.n_nodes
    for i, (op, a, b, c) in enumerate(rec):
        if op == Op.CONST:
            out[i] = Const(const_value(a, b))
        elif op == Op.SCALAR_ARG:
            out[i] = ScalarArg(a)
        elif op == Op.NDARRAY_SHAPE:
            out[i] = NdarrayShape(a, b)
        elif op == Op.FIELD_LOAD:
            out[i] = FieldLoad(a, tuple(out[index[k]] for k in range(b, b + c)))
        elif op == Op.NDARRAY_READ:
            out[i] = NdarrayRead(a, tuple(out[index[k]] for k in range(b, b + c)))
        elif op in _BINARY_NODES:
            out[i] = _BINARY_NODES[op](out[a], out[b])
        elif op == Op.LOOP:
            out[i] = None
        elif op == Op.MOR:
            begin, end = rec[b][1], rec[b][2]
            out[i] = MaxOverRange(c, out[begin], out[end], out[a])
        elif op == Op.BOUND_VAR:
            out[i] = BoundVariable(rec[rec[a][3]][3])
    return [out[node] for _, node in roots]


def disassemble(code) -> str:
    """Human-readable listing of a bytecode array (one line per record)."""
    h, w = verify(code)
    rec = w[h.nodes_off:h.index_off].reshape(h.n_nodes, RECORD_WORDS).tolist()
    index = w[h.index_off:].tolist()
    roots = w[h.roots_off:h.nodes_off].reshape(h.n_roots, ROOT_WORDS).tolist()
    lines = [f"; sizer bytecode v{h.version}: {h.n_roots} roots, {h.n_nodes} nodes, "
             f"{h.n_index} index words"]
    for r, (first, node) in enumerate(roots):
        lines.append(f"; root {r}: nodes [{first}, {node}] -> %{node}")
    depth = 0
    for i, (op, a, b, c) in enumerate(rec):
        if op == Op.MOR:
            depth -= 1
        name = Op.NAMES.get(op, f"?{op}")
        if op == Op.CONST:
            args = str(const_value(a, b))
        elif op in (Op.FIELD_LOAD, Op.NDARRAY_READ):
            args = f"{a} [" + ", ".join(f"%{index[k]}" for k in range(b, b + c)) + "]"
        elif op in _BINARY_NODES:
            args = f"%{a}, %{b}"
        elif op == Op.LOOP:
            args = f"%{a}, %{b} -> end at %{c}"
        elif op == Op.MOR:
            args = f"body %{a}, loop %{b}, var {c}"
        elif op == Op.BOUND_VAR:
            args = f"loop %{a}"
        else:
            args = f"{a}, {b}, {c}"
        lines.append(f"%{i:<4} {'  ' * depth}{name} {args}")
        if op == Op.LOOP:
            depth += 1
    return "\n".join(lines)
