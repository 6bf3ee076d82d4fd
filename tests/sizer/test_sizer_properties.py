"""Property tests: every evaluator agrees with the reference on random
expressions and data, including errors; simplify and folding preserve values;
encode/decode round-trips."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sizer import (SizerError, decode, encode, eval_bytecode, eval_fast, eval_tree,
                   fold_constants, free_vars, simplify, verify)

from tests.sizer.sizer_strategies import exprs, make_context, seeds

SETTINGS = settings(max_examples=1500, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def outcome(f):
    try:
        return ("ok", f())
    except SizerError:
        return ("error",)


@SETTINGS
@given(roots=st.lists(exprs(), min_size=1, max_size=3), seed=seeds)
def test_evaluators_agree(roots, seed):
    ctx = make_context(seed)
    tree = [outcome(lambda r=r: eval_tree(r, ctx)) for r in roots]
    fast = [outcome(lambda r=r: eval_fast(r, ctx)) for r in roots]
    assert fast == tree
    # one bytecode for all roots: errors are per sweep, so compare as a whole
    expect = ("error",) if any(t[0] == "error" for t in tree) else ("ok", [t[1] for t in tree])
    code = encode(roots, fold=False)
    assert outcome(lambda: eval_bytecode(code, ctx)) == expect
    # folded with the launch's scalar args and ndarray shapes
    folded = encode(roots, scalar_args=ctx.scalars, ndarray_shapes=ctx.shapes)
    assert outcome(lambda: eval_bytecode(folded, ctx)) == expect
    # the folded bytecode needs no scalars / shapes at evaluation time
    data_only = type(ctx)(None, ctx.ndarrays, ctx.fields, None)
    assert outcome(lambda: eval_bytecode(folded, data_only)) == expect
    for r, t in zip(roots, tree):
        s = simplify(r)
        got = outcome(lambda: eval_tree(s, ctx))
        if t[0] == "ok":
            assert got == t, (r, s)
        assert free_vars(s) <= free_vars(r)


@settings(max_examples=400, deadline=None)
@given(roots=st.lists(exprs(), min_size=0, max_size=4))
def test_roundtrip(roots):
    code = encode(roots, fold=False)
    verify(code)
    assert decode(code) == roots
    assert decode(code.tobytes()) == roots
    # folding yields a tree decode can read back too
    decode(encode(roots))


@settings(max_examples=300, deadline=None)
@given(e=exprs(), seed=seeds)
def test_fold_preserves_value(e, seed):
    ctx = make_context(seed)
    want = outcome(lambda: eval_tree(e, ctx))
    f = fold_constants(e, scalar_args=ctx.scalars, ndarray_shapes=ctx.shapes)
    assert outcome(lambda: eval_tree(f, ctx)) == want


@settings(max_examples=300, deadline=None)
@given(e=exprs(), seed=seeds, chunk=st.integers(1, 4))
def test_fast_small_chunks(e, seed, chunk):
    """Tiny chunks split loops across chunk boundaries in every batch shape."""
    import sizer.evaluate as ev
    ctx = make_context(seed)
    want = outcome(lambda: eval_tree(e, ctx))
    old, ev.CHUNK = ev.CHUNK, chunk
    try:
        assert outcome(lambda: eval_fast(e, ctx)) == want
    finally:
        ev.CHUNK = old
