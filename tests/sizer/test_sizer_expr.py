import pytest

from sizer import (Add, BoundVariable, Const, FieldLoad, Leaves, Max, MaxOverRange, Mul,
                   NdarrayRead, NdarrayShape, ScalarArg, SizerError, Sub, free_vars,
                   has_device_leaves, is_closed, leaves, lower_bound, simplify, to_str)

j, k = BoundVariable(0), BoundVariable(1)
X = NdarrayRead(0, (Const(0),))          # may be negative
N = NdarrayShape(0, 0)                    # never negative


def test_nodes_are_frozen_and_hashable():
    e = Add(Const(1), N)
    with pytest.raises(Exception):
        e.a = Const(2)
    assert e == Add(Const(1), NdarrayShape(0, 0))
    assert len({e, Add(Const(1), N)}) == 1


@pytest.mark.parametrize("make", [
    lambda: Const(1.5), lambda: Const(True), lambda: Const(2**62),
    lambda: FieldLoad(-1, ()), lambda: FieldLoad(0, [Const(1)]),
    lambda: NdarrayRead(0, (1,)), lambda: Add(Const(1), 2), lambda: ScalarArg("a"),
    lambda: MaxOverRange(0, Const(0), Const(1), None), lambda: NdarrayShape(0, 2**31),
])
def test_malformed_nodes_raise(make):
    with pytest.raises(SizerError):
        make()


def test_const_accepts_numpy_int():
    import numpy as np
    assert Const(np.int64(5)).value == 5 and type(Const(np.int64(5)).value) is int


def test_leaves_and_free_vars():
    e = MaxOverRange(0, ScalarArg(2), NdarrayShape(1, 0),
                     Add(FieldLoad(7, (j,)), NdarrayRead(3, (j, k))))
    assert leaves(e) == Leaves(frozenset({7}), frozenset({3}), frozenset({1}), frozenset({2}))
    assert leaves(Const(1)).is_empty()
    assert free_vars(e) == {1}
    assert free_vars(MaxOverRange(0, j, Const(3), j)) == {0}  # begin is outside the scope
    # shadowing: the inner binding of var 0 does not free the outer one
    assert free_vars(MaxOverRange(0, Const(0), Const(2), MaxOverRange(0, j, Const(5), j))) == set()


def test_closedness():
    assert is_closed(Add(Const(1), MaxOverRange(0, Const(0), Const(3), j)))
    assert not is_closed(ScalarArg(0))
    assert not is_closed(N)
    assert not is_closed(j)
    assert has_device_leaves(Add(Const(1), FieldLoad(0, ())))
    assert not has_device_leaves(Add(ScalarArg(0), N))


def test_to_str():
    e = MaxOverRange(0, Const(0), N, Sub(Mul(NdarrayRead(0, (j,)), Const(2)), FieldLoad(1, ())))
    assert to_str(e) == "max(v0 in [0, shape(arg0, 0)): ((arg0[v0] * 2) -+ field1[]))"
    assert str(Max(ScalarArg(1), k)) == "max(scalar1, v1)"


@pytest.mark.parametrize("e, want", [
    (Add(Const(2), Const(3)), Const(5)),
    (Sub(Const(2), Const(3)), Const(0)),
    (Mul(Const(4), Const(3)), Const(12)),
    (Max(Const(4), Const(-3)), Const(4)),
    (Add(X, Const(0)), X), (Add(Const(0), X), X),
    (Mul(X, Const(1)), X), (Mul(Const(1), X), X),
    (Mul(X, Const(0)), Const(0)), (Mul(Const(0), X), Const(0)),
    (Max(X, X), X), (Sub(X, X), Const(0)),
    (Sub(N, Const(0)), N),                 # N >= 0
    (Sub(X, Const(0)), Sub(X, Const(0))),  # X may be negative: clamp stays
    (Sub(Const(0), N), Const(0)),
    (Max(N, Const(0)), N),
    (Max(X, Const(0)), Max(X, Const(0))),
    (Add(Add(X, Const(2)), Const(3)), Add(X, Const(5))),
    (Max(Max(X, Const(2)), Const(3)), Max(X, Const(3))),
    (Add(Const(2), X), Add(X, Const(2))),
    (Mul(Const(2**40), Const(2**40)), Mul(Const(2**40), Const(2**40))),  # would overflow
    (MaxOverRange(0, Const(3), Const(3), X), Const(0)),
    (MaxOverRange(0, Const(0), Add(N, Const(1)), X), X),                  # nonempty
    (MaxOverRange(0, Const(0), N, X), MaxOverRange(0, Const(0), N, X)),   # may be empty
    (MaxOverRange(0, Const(0), N, Add(j, Const(0))), MaxOverRange(0, Const(0), N, j)),
])
def test_simplify_rules(e, want):
    assert simplify(e) == want


def test_lower_bound():
    assert lower_bound(N) == 0
    assert lower_bound(X) is None
    assert lower_bound(Add(N, Const(2))) == 2
    assert lower_bound(Max(X, Const(1))) == 1
    assert lower_bound(MaxOverRange(0, Const(0), N, Const(5))) == 0
