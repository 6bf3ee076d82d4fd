"""The IR traversals every pass runs, made cheaper for huge kernels (Genesis' ndarray narrow
phase, docs/performance.md "Python side of a cold build"): `walk` without a generator per
nesting level, `carried_slots` without a list scan per store, `forward_stores`' stored-slot sets
in one bottom-up walk. Each gives what the straightforward definition gives."""
import sys

from kernel_ir import dtypes as T
from kernel_ir.nodes import Block, Node, carried_slots, walk
from kernel_ir.ops import Op
from passes.forward_stores import _stores_inside


def _reference_walk(block):
    for n in block.nodes:
        yield n
        for b in n.blocks:
            yield from _reference_walk(b)


def _c(v):
    return Node(Op.CONST, T.i32, (), v)


def _nest():
    """IFs with then / else blocks inside loops inside IFs, empty blocks, leaves between."""
    slot_a, slot_b = Node(Op.ALLOCA, T.i32), Node(Op.ALLOCA, T.i32)
    inner = Block((_c(1), Node(Op.STORE, None, (slot_b, _c(2))), _c(3)))
    if_ = Node(Op.IF, None, (_c(0),), None, (inner, Block((Node(Op.STORE, None, (slot_a, _c(4))),))))
    loop = Node(Op.RANGE_FOR, None, (_c(0), _c(4)), None, (Block((_c(5), if_, _c(6))),))
    empty_if = Node(Op.IF, None, (_c(0),), None, (Block(), Block()))
    outer_if = Node(Op.IF, None, (_c(0),), None, (Block((loop, _c(7))), Block((empty_if, _c(8)))))
    return Block((slot_a, slot_b, _c(9), outer_if, Node(Op.STORE, None, (slot_a, _c(10)))))


def test_walk_is_execution_order_with_nested_blocks_in_order():
    b = _nest()
    got, want = list(walk(b)), list(_reference_walk(b))
    assert len(got) == len(want) and all(x is y for x, y in zip(got, want))
    assert list(walk(Block())) == []


def test_walk_of_a_deeply_nested_block():
    """A generator per level recursed once per level (RecursionError past Python's limit)."""
    depth = sys.getrecursionlimit() + 500
    b = Block((_c(0),))
    for k in range(depth):
        b = Block((_c(k), Node(Op.IF, None, (_c(0),), None, (b, Block()))))
    assert sum(1 for _ in walk(b)) == 2 * depth + 1


def test_carried_slots_in_first_store_order_each_once_without_inner_slots():
    a, b, c, inner = (Node(Op.ALLOCA, T.i32) for _ in range(4))
    st = lambda s, v: Node(Op.STORE, None, (s, _c(v)))  # noqa: E731
    body = Block((inner, st(b, 0), st(a, 1), st(inner, 2),
                  Node(Op.IF, None, (_c(0),), None, (Block((st(c, 3), st(b, 4))), Block())),
                  st(a, 5)))
    assert carried_slots(body) == (b, a, c)
    many = [Node(Op.ALLOCA, T.i32) for _ in range(2000)]
    body = Block(tuple(st(s, k) for k in range(3) for s in many))
    assert carried_slots(body) == tuple(many)


def test_forward_stores_sets_per_control_node():
    b = _nest()
    stored = {}
    top = _stores_inside(b, stored)
    assert top == {m.srcs[0] for m in walk(b) if m.op == Op.STORE}
    controls = [n for n in walk(b) if n.blocks]
    assert set(stored) == set(controls)
    for n in controls:
        assert stored[n] == {m.srcs[0] for x in n.blocks for m in walk(x) if m.op == Op.STORE}


def test_abi_lookups_first_match_and_pickled_without_memo():
    """`KernelABI.binding_index` / `shape_offset` through dicts built on first use: the first
    binding of a buffer, the slot of (arg, axis), RuntimeError where there is none; a pickled
    ABI carries no lookup tables and answers the same after loading."""
    import pickle

    import pytest

    from kernel_ir.abi import KernelABI
    from kernel_ir.nodes import GlobalRef
    refs = [GlobalRef("ndarray", k, T.f32, 2) for k in range(3)]
    abi = KernelABI((refs[0], refs[1], refs[0]), (-1, -1, -1), ((0, 0, 8), (0, 1, 12), (1, 0, 16)), 24)
    assert [abi.binding_index(r) for r in refs[:2]] == [0, 1]
    assert abi.binding_index(GlobalRef("ndarray", 1, T.f32, 2, name="x")) == 1  # same buffer
    assert [abi.shape_offset(0, 1), abi.shape_offset(1, 0)] == [12, 16]
    with pytest.raises(RuntimeError):
        abi.binding_index(refs[2])
    with pytest.raises(RuntimeError):
        abi.shape_offset(1, 1)
    blob = pickle.dumps(abi)
    assert b"_lookups" not in blob
    back = pickle.loads(blob)
    assert back == abi and back.shape_offset(0, 0) == 8 and back.binding_index(refs[1]) == 1
