"""Taichi's public classes under their names (`ti.ScalarField`, `ti.MatrixField`,
`ti.StructField`, `ti.ScalarNdarray` / `VectorNdarray` / `MatrixNdarray`, `ti.SNode`,
`ti.ArgPack`) for the `isinstance` tests Taichi programs make, with Taichi's members
(`Struct.methods`, `FieldsBuilder.empty` / `finalized` / `quant_array`, an ArgPack's `keys` /
`items` / `to_dict`), and what `dir()` of a few Taichi namespaces shows."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


@test_archs()
def test_fields_and_ndarrays_by_element_kind(arch):
    """A field / ndarray is an instance of Taichi's class of its element kind, and only of it;
    a struct field is a StructField; the kind classes are not constructed."""
    a = sd.field(sd.f32, shape=3)
    v = sd.Vector.field(2, sd.f32, shape=3)
    m = sd.Matrix.field(2, 2, sd.f32, shape=3)
    s = sd.Struct.field({"p": sd.f32, "q": sd.math.vec2}, shape=2)
    kinds = (sd.ScalarField, sd.MatrixField, sd.StructField, sd.Field)
    assert [[isinstance(x, k) for k in kinds] for x in (a, v, m, s)] == [
        [True, False, False, True], [False, True, False, True], [False, True, False, True],
        [False, False, True, False]]
    n0, n1, n2 = (sd.ndarray(sd.f32, 4), sd.Vector.ndarray(3, sd.f32, 4),
                  sd.Matrix.ndarray(2, 2, sd.f32, 4))
    kinds = (sd.ScalarNdarray, sd.VectorNdarray, sd.MatrixNdarray, sd.Ndarray)
    assert [[isinstance(x, k) for k in kinds] for x in (n0, n1, n2)] == [
        [True, False, False, True], [False, True, False, True], [False, False, True, True]]
    assert not isinstance(a, sd.ScalarNdarray) and not isinstance(n0, sd.ScalarField)
    assert isinstance(a.snode, sd.SNode) and isinstance(sd.root, sd.SNode)
    with pytest.raises(sd.SpiradTypeError, match="not constructed"):
        sd.MatrixField(2, sd.f32)

    @sd.kernel
    def k(x: sd.template(), y: sd.types.ndarray()):  # the fields work as fields
        for i in range(3):
            x[i] = sd.Vector([i, 2 * i])
            y[i] = sd.Vector([1.0, i, 0.5])

    k(v, n1)
    np.testing.assert_array_equal(v.to_numpy(), [[0, 0], [1, 2], [2, 4]])
    np.testing.assert_array_equal(n1.to_numpy()[:3], [[1, 0, 0.5], [1, 1, 0.5], [1, 2, 0.5]])


def test_argpack_values_are_argpacks():
    """An argpack value is a `ti.ArgPack`: keys / items (properties, as Taichi's), to_dict
    with nested packs as dicts and vectors as lists."""
    inner = sd.types.argpack(w=sd.f32)
    P = sd.types.argpack(a=sd.i32, v=sd.math.vec2, n=inner)
    p = P(a=1, v=sd.math.vec2(1, 2), n=inner(w=0.5))
    assert isinstance(p, sd.ArgPack) and isinstance(p.n, sd.ArgPack)
    assert p.keys == ["a", "v", "n"] and [k for k, _ in p.items] == ["a", "v", "n"]
    assert p.to_dict() == {"a": 1, "v": [1.0, 2.0], "n": {"w": 0.5}}


def test_struct_methods_and_builder_attributes():
    """`Struct.methods` (a dataclass's methods; none for a struct of members); a FieldsBuilder's
    `empty` / `finalized` follow placement and finalize(); `quant_array` in a builder's tree."""
    sd.init(arch=sd.cpu)

    @sd.dataclass
    class P:
        x: float

        @sd.func
        def twice(self):
            return self.x * 2

    assert list(P(x=1.0).methods) == ["twice"] and sd.Struct(a=1).methods == {}
    b = sd.FieldsBuilder()
    assert (b.empty, b.finalized) == (True, False)
    x = sd.field(sd.f32)
    b.dense(sd.i, 4).place(x)
    assert (b.empty, b.finalized) == (False, False)
    q = sd.field(sd.types.quant.int(8, True))
    b.dense(sd.i, 2).quant_array(sd.i, 4, max_num_bits=32).place(q)
    tree = b.finalize()
    assert b.finalized and q.shape == (8,)
    q[5] = -3
    assert q[5] == -3 and x[3] == 0
    tree.destroy()


def test_missing_snode_kinds_are_attribute_errors():
    """`root.hash` / `root.bit_struct` (Taichi 1.7.4 has neither) are AttributeErrors whose
    text names what to use; `hasattr` is False."""
    for what, hint in (("hash", "dense"), ("bit_struct", "BitpackedFields")):
        assert not hasattr(sd.root, what)
        with pytest.raises(AttributeError, match=hint) as e:
            getattr(sd.root, what)
        assert isinstance(e.value, sd.SpiradNotSupportedError)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        sd.root.nope


def test_namespaces_list_what_taichi_lists():
    """`dir(sd.sparse)` is Taichi's `ti.sparse` (grid, usage: the module's imports are
    private); the swizzle names Taichi's `ti.lang.matrix._generate_swizzle_patterns` gives are
    the names a vector answers to."""
    assert [n for n in dir(sd.sparse) if not n.startswith("_")] == ["grid", "usage"]
    from spirad.compat import taichi_lang
    pats = taichi_lang.matrix._generate_swizzle_patterns("xyzw", required_length=4)
    assert len(pats) == 4 + 16 + 64 + 256 and pats[:5] == ["x", "y", "z", "w", "xx"]
    v = sd.Vector([1.0, 2.0, 3.0, 4.0])
    assert [float(v.wzyx[i]) for i in range(4)] == [4, 3, 2, 1] and float(v.y) == 2


@test_archs()
def test_pyfunc_runs_in_kernels_and_in_python(arch):
    """`@sd.pyfunc` (Taichi's `@ti.pyfunc`): inlined in a kernel, the plain function in Python."""
    @sd.pyfunc
    def f(x):
        return x * 2 + 1

    y = sd.field(sd.f32, shape=())

    @sd.kernel
    def k(a: sd.f32):
        y[None] = f(a)

    k(2.5)
    assert y[None] == 6.0 and f(3) == 7


def test_taichi_small_names():
    """`sd.uint1` is u1; `sd.sparse_matrix_builder()` is the annotation `sd.types` gives;
    `set_logging_level` / `is_logging_effective` drive the `spirad` logger as init(log_level=)."""
    assert sd.uint1 is sd.u1
    assert sd.sparse_matrix_builder() is sd.types.sparse_matrix_builder()
    import logging
    old = logging.getLogger("spirad").level
    try:
        sd.set_logging_level(sd.DEBUG)
        assert sd.is_logging_effective("debug") and sd.is_logging_effective(sd.INFO)
        sd.set_logging_level("error")
        assert not sd.is_logging_effective(sd.WARN) and sd.is_logging_effective(sd.ERROR)
    finally:
        logging.getLogger("spirad").setLevel(old)
