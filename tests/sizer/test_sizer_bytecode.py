import numpy as np
import pytest

from sizer import (HEADER_WORDS, MAGIC, RECORD_WORDS, VERSION, Add, BoundVariable, Const,
                   DictContext, FieldLoad, Max, MaxOverRange, Mul, NdarrayRead, NdarrayShape,
                   Op, ScalarArg, SizerError, Sub, decode, disassemble, encode, eval_bytecode,
                   verify)

j, k = BoundVariable(0), BoundVariable(1)
TRI = MaxOverRange(0, Const(0), NdarrayShape(0, 0),
                   MaxOverRange(1, Const(0), Add(j, Const(1)),
                                Add(NdarrayRead(0, (k,)), FieldLoad(3, (j, Const(0))))))


def test_header_and_tables():
    code = encode([TRI, Const(-7)], fold=False)
    assert code.dtype == np.int32
    magic, version, n_roots, n_nodes, n_index, roots_off, nodes_off, index_off = code[:8]
    assert (magic, version, n_roots) == (MAGIC, VERSION, 2)
    assert roots_off == HEADER_WORDS and nodes_off == roots_off + 4
    assert index_off == nodes_off + RECORD_WORDS * n_nodes
    assert len(code) == index_off + n_index == index_off + 3
    roots = code[roots_off:nodes_off].reshape(2, 2)
    assert roots[0, 0] == 0 and roots[1, 0] == roots[0, 1] + 1 and roots[1, 1] == n_nodes - 1
    recs = code[nodes_off:index_off].reshape(-1, 4)
    assert recs[roots[0, 1], 0] == Op.MOR and recs[-1, 0] == Op.CONST
    assert bytes(code[:1].tobytes()) == b"SZBC"


def test_roundtrip_examples():
    roots = [TRI, Const(2**62 - 1), Const(-(2**62 - 1)), Const(-1), ScalarArg(5),
             Sub(Max(NdarrayShape(2, 1), Const(3)), Mul(ScalarArg(0), Const(2**40))),
             FieldLoad(9, ()), MaxOverRange(3, Const(0), Const(4), MaxOverRange(3, BoundVariable(3), Const(9), BoundVariable(3)))]
    code = encode(roots, fold=False)
    assert decode(code) == roots
    assert decode(code.tobytes()) == roots
    assert decode(encode([])) == []


def test_fold_scalars_and_shapes():
    e = Add(Mul(ScalarArg(0), NdarrayShape(1, 1)), FieldLoad(0, (ScalarArg(2),)))
    code = encode([e], scalar_args={0: 3.9, 2: 1}, ndarray_shapes={1: (5, 7)})
    assert decode(code) == [Add(Const(21), FieldLoad(0, (Const(1),)))]
    # not provided: kept and read at evaluation time
    code = encode([e], scalar_args={0: 3})
    assert decode(code) == [Add(Mul(Const(3), NdarrayShape(1, 1)), FieldLoad(0, (ScalarArg(2),)))]
    ctx = DictContext(scalars={0: 3, 2: 1}, ndarrays={1: np.zeros((5, 7))},
                      fields={0: np.array([0, 4])})
    assert eval_bytecode(code, ctx) == [25]
    # closed loops fold; loops over device data do not
    closed = MaxOverRange(0, Const(0), ScalarArg(0), Mul(j, j))
    assert decode(encode([closed], scalar_args=[6])) == [Const(25)]
    with pytest.raises(SizerError):
        encode([NdarrayShape(0, 3)], ndarray_shapes={0: (4,)})


def test_fold_keeps_failing_subtree():
    big = Mul(Const(2**40), Const(2**40))
    code = encode([MaxOverRange(0, Const(0), NdarrayShape(0, 0), Add(big, j))])
    # unfolded, so an empty range never raises ...
    assert eval_bytecode(code, DictContext(ndarrays={0: np.zeros(0)})) == [0]
    # ... and a nonempty one does
    with pytest.raises(SizerError, match="overflow"):
        eval_bytecode(code, DictContext(ndarrays={0: np.zeros(2)}))


def _corrupt(code, word, value):
    bad = code.copy()
    bad[word] = value
    return bad


def test_bad_bytecode():
    code = encode([TRI], fold=False)
    nodes_off = code[6]
    with pytest.raises(SizerError, match="magic"):
        verify(_corrupt(code, 0, 0x12345678))
    with pytest.raises(SizerError, match="version"):
        eval_bytecode(_corrupt(code, 1, 2), DictContext())
    with pytest.raises(SizerError):
        verify(code[:-1])
    with pytest.raises(SizerError):
        verify(code[:5])
    with pytest.raises(SizerError, match="unknown opcode"):
        verify(_corrupt(code, nodes_off, 99))
    # an ADD whose operand is a later node
    add = Add(Const(1), Const(2))
    c2 = encode([add], fold=False)
    with pytest.raises(SizerError, match="earlier"):
        verify(_corrupt(c2, c2[6] + 2 * 4 + 1, 2))
    # LOOP pointing at the wrong MOR
    recs = code[nodes_off:code[7]].reshape(-1, 4)
    loop = int(np.flatnonzero(recs[:, 0] == Op.LOOP)[0])
    with pytest.raises(SizerError):
        verify(_corrupt(code, nodes_off + 4 * loop + 3, loop))
    with pytest.raises(SizerError):
        verify(np.zeros((2, 8), dtype=np.int32))
    with pytest.raises(SizerError):
        verify(b"SZB")


def test_free_variable_rejected():
    with pytest.raises(SizerError, match="not bound"):
        encode([Add(j, Const(1))])


def test_too_many_indices():
    with pytest.raises(SizerError, match="at most"):
        encode([FieldLoad(0, (Const(0),) * 9)])


def test_disassemble():
    text = disassemble(encode([TRI], fold=False))
    assert "LOOP" in text and "MOR" in text and "NDARRAY_READ 0" in text
    assert "root 0" in text


def test_unverified_interpreter_and_internal_errors():
    ctx = DictContext(ndarrays={0: np.array([1, 2, 3])}, fields={3: np.ones((3, 1))})
    code = encode([TRI], fold=False)
    assert eval_bytecode(code, ctx, verify=False) == eval_bytecode(code, ctx) == [4]
    bad = _corrupt(code, code[6], 99)
    with pytest.raises(RuntimeError):
        eval_bytecode(bad, ctx, verify=False)
