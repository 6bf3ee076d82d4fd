"""Hypothesis strategies for random size expressions and launch data."""

import numpy as np
from hypothesis import strategies as st

from sizer import (Add, BoundVariable, Const, DictContext, FieldLoad, Max, MaxOverRange,
                   Mul, NdarrayRead, NdarrayShape, ScalarArg, Sub)

BINARY = (Add, Sub, Mul, Max)


def make_context(seed: int) -> DictContext:
    """Small random launch data: two ndarrays (1-D, 2-D), three fields (1-D
    int, 0-d float, 2-D float), two scalar args (int, float)."""
    rng = np.random.default_rng(seed)
    n0 = int(rng.integers(0, 7))
    r, c = (int(x) for x in rng.integers(1, 5, size=2))
    nd0 = rng.integers(-3, 9, size=n0).astype(np.int32)
    nd1 = rng.uniform(-3.5, 8.5, size=(r, c))  # floats: truncated toward zero
    f0 = rng.integers(-2, 8, size=int(rng.integers(1, 7))).astype(np.int64)
    f1 = np.array(rng.uniform(-1, 6), dtype=np.float32)
    f2 = rng.uniform(-2.0, 7.9, size=(int(rng.integers(1, 4)), int(rng.integers(1, 4))))
    scalars = {0: int(rng.integers(-2, 7)), 1: float(rng.uniform(-1, 6.9))}
    return DictContext(scalars=scalars, ndarrays={0: nd0, 1: nd1},
                       fields={0: f0, 1: f1, 2: f2})


@st.composite
def exprs(draw, depth=3, bound=(), loops=2):
    """A random SizeExpr.  ``bound``: var ids in scope; ``loops``: how many
    more MaxOverRange levels may nest (keeps the reference evaluator fast)."""
    leaf_kinds = ["const", "scalar", "shape", "read0", "field0", "field1"]
    if bound:
        leaf_kinds += ["var", "var", "var"]
    kinds = list(leaf_kinds)
    if depth > 0:
        kinds += ["bin", "bin", "bin", "read1", "field2"]
        if loops > 0:
            kinds += ["mor"] * 4
    kind = draw(st.sampled_from(kinds))
    if kind == "const":
        return Const(draw(st.integers(-3, 9)))
    if kind == "scalar":
        return ScalarArg(draw(st.integers(0, 1)))
    if kind == "shape":
        return draw(st.sampled_from([NdarrayShape(0, 0), NdarrayShape(1, 0), NdarrayShape(1, 1)]))
    if kind == "var":
        return BoundVariable(draw(st.sampled_from(bound)))
    if kind == "read0":
        return NdarrayRead(0, (draw(index(bound)),))
    if kind == "field0":
        return FieldLoad(0, (draw(index(bound)),))
    if kind == "field1":
        return FieldLoad(1, ())
    sub = exprs(depth - 1, bound, loops)
    if kind == "bin":
        op = draw(st.sampled_from(BINARY))
        return op(draw(sub), draw(sub))
    if kind == "read1":
        return NdarrayRead(1, (draw(index(bound)), draw(index(bound))))
    if kind == "field2":
        return FieldLoad(2, (draw(index(bound)), draw(index(bound))))
    # MaxOverRange: new var id, or (sometimes) shadow an enclosing one
    var = draw(st.integers(0, 3))
    begin = draw(bounds(bound))
    end = draw(bounds(bound))
    body = draw(exprs(depth - 1, tuple(set(bound) | {var}), loops - 1))
    return MaxOverRange(var, begin, end, body)


def index(bound):
    """Index expressions: mostly bound variables and small constants, so most
    reads are in range, sometimes something arbitrary."""
    opts = [st.builds(Const, st.integers(0, 3))]
    if bound:
        opts += [st.sampled_from([BoundVariable(v) for v in bound])] * 3
        opts.append(st.builds(Sub, st.sampled_from([BoundVariable(v) for v in bound]),
                              st.builds(Const, st.integers(0, 2))))
    opts.append(st.sampled_from([FieldLoad(1, ()), ScalarArg(0), NdarrayShape(1, 1)]))
    return st.one_of(*opts)


def bounds(bound):
    """Loop bounds with small values (<= ~10), possibly using enclosing
    variables (triangular loops) or data."""
    opts = [st.builds(Const, st.integers(-1, 6)),
            st.sampled_from([NdarrayShape(0, 0), NdarrayShape(1, 0), NdarrayShape(1, 1),
                             ScalarArg(0), ScalarArg(1), FieldLoad(1, ()),
                             NdarrayRead(0, (Const(0),))])]
    if bound:
        vs = [BoundVariable(v) for v in bound]
        opts += [st.sampled_from(vs), st.sampled_from(vs),
                 st.builds(Add, st.sampled_from(vs), st.builds(Const, st.integers(0, 2))),
                 st.builds(lambda v: NdarrayRead(0, (v,)), st.sampled_from(vs))]
    return st.one_of(*opts)


seeds = st.integers(0, 2**32 - 1)
