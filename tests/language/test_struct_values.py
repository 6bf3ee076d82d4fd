"""Struct values in Python scope and at the kernel boundary (Taichi's `ti.Struct(...)`, a struct
type called in Python, struct-typed kernel parameters and return types, nested structs, dict
literals and comprehensions in kernels) and argument packs (`sd.types.argpack`)."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


def test_python_scope_struct_values():
    sd.init(arch=sd.cpu)
    vec2i = sd.types.vector(2, int)
    S = sd.types.struct(a=int, b=vec2i, c=sd.i16)
    s = S(2.5, (2.5, 3.7), c=65537)             # converted: truncated, wrapped into i16
    assert s.a == 2 and list(s.b) == [2, 3] and s.c == 1
    assert S(0) == {"a": 0, "b": [0, 0], "c": 0}
    s.a = 7.9
    assert s.a == 7 and s["a"] == 7 and list(s.keys()) == ["a", "b", "c"]
    with pytest.raises(AttributeError, match="no member 'z'"):
        s.z = 1
    u = sd.Struct({"x": 1, "v": [1.0, 2.0]})
    assert u.x == 1 and list(u.v) == [1.0, 2.0] and sd.Struct(x=1, v=[1.0, 2.0]) == u
    with pytest.raises(sd.SpiradTypeError, match="takes the members"):
        S(1, 2, 3, 4)


@test_archs()
def test_struct_arguments_returns_and_nesting(arch):
    s0 = sd.types.struct(a=sd.i32, b=sd.f32)
    s1 = sd.types.struct(a=sd.f32, b=s0, v=sd.math.vec3)

    @sd.kernel
    def k(p: s1, scale: sd.f32) -> s1:
        q = p                      # a copy: p itself is not changed
        q.b.a += 1
        q.v *= scale
        return q

    p = s1(a=1.5, b=s0(a=2, b=3.25), v=[1, 2, 3])
    r = k(p, 2.0)
    assert r.a == 1.5 and r.b.a == 3 and r.b.b == 3.25
    np.testing.assert_allclose(r.v, [2, 4, 6])
    assert p.b.a == 2
    p.b.a = 10                     # a changed value is seen by the next launch
    assert k(p, 1.0).b.a == 11
    assert k({"a": 0.0, "b": {"a": -1, "b": 0.0}, "v": [0, 0, 1]}, 3.0).b.a == 0

    other = sd.types.struct(a=sd.f32, b=sd.f32)

    @sd.kernel
    def wrong() -> s0:
        return other(a=1.0, b=2.0)  # same member names, other types

    with pytest.raises(sd.SpiradTypeError, match="returns a struct"):
        wrong()


@test_archs()
def test_struct_and_dicts_inside_kernels(arch):
    a = sd.Struct({"a": 2, "b": 3})
    out = sd.field(sd.f32, shape=6)

    @sd.kernel
    def k():
        b = a                                       # a Python-scope struct value, copied
        c = sd.Struct({"x": b.a * 1.5, "v": sd.Vector([1.0, 2.0])})
        c.v[1] = 5.0
        d = {j: j * 10 for j in range(3) if j != 1}
        e = sd.Struct(m=c.x, n=d[2])
        out[0], out[1], out[2] = b.a, b.b, c.x
        out[3], out[4], out[5] = c.v[1], e.n, {"k": 7}["k"]

    k()
    np.testing.assert_allclose(out.to_numpy(), [2, 3, 3, 5, 20, 7])


@test_archs()
def test_argpacks(arch):
    arr = sd.ndarray(dtype=sd.math.vec3, shape=(4, 4))
    arr.fill(1.0)
    inner = sd.types.argpack(a=sd.i32, s=sd.types.struct(x=sd.f32, y=sd.f32))
    pack_t = sd.types.argpack(arr=sd.types.ndarray(dtype=sd.math.vec3, ndim=2), c=sd.f32,
                              v=sd.math.vec2, inner=inner)

    @sd.kernel
    def k(p: pack_t) -> sd.f32:
        p.arr[1, 2][1] = 7.0       # the ndarray is the run-time argument itself
        return p.c * p.v[1] + p.inner.a + p.inner.s.y + p.arr[1, 2][1]

    pk = pack_t(arr=arr, c=2.0, v=[0.5, 3.0], inner=inner(a=1.9, s=dict(x=0.0, y=0.25)))
    assert k(pk) == pytest.approx(2 * 3 + 1 + 0.25 + 7)
    assert arr[1, 2][1] == 7.0
    arr2 = sd.ndarray(dtype=sd.math.vec3, shape=(2, 3))
    assert k(pack_t(arr=arr2, c=1.0, v=[0, 1], inner=inner(a=0, s=dict(x=0, y=0)))) == 8.0
    assert arr2[1, 2][1] == 7.0


def test_argpack_refusals():
    sd.init(arch=sd.cpu)
    pack_t = sd.types.argpack(a=sd.i32, b=bool)
    assert repr(pack_t) == "<ti.ArgPackType a=i32, b=u1>"
    with pytest.raises(ValueError, match="Invalid data type <ti.ArgPackType a=i32, b=u1>"):
        sd.types.struct(element=pack_t)
    with pytest.raises(sd.SpiradSyntaxError, match="cannot be a return type"):
        @sd.kernel
        def k(p: pack_t) -> pack_t:
            return p
    with pytest.raises(sd.SpiradTypeError, match="is an ndarray"):
        sd.types.argpack(x=sd.types.ndarray())(x=3)


@test_archs()
def test_struct_members_cast_and_structs_in_returned_tuples(arch):
    """A struct type called in a kernel casts its members as in Python scope (Taichi's: an i16
    member of 65537 is 1; a literal past default_ip is still refused); structs returned from a
    func (a local one or a struct field's element) and inside a kernel's returned tuple; debug
    mode verifies the IR of each."""
    s0 = sd.types.struct(a=sd.math.vec3, b=sd.i16)
    s1 = sd.types.struct(a=sd.f32, b=s0)
    sf = s0.field(shape=2)

    @sd.func
    def make(k: sd.i32) -> s0:
        return s0(a=sd.math.vec3(k, 0.5, 2), b=65537 + k)

    @sd.real_func
    def element(i: sd.i32) -> s0:
        return sf[i]

    @sd.kernel
    def both(k: sd.i32) -> (sd.f32, s1, s0):
        sf[1] = make(k + 1)
        e = element(1)
        e.b = 9  # a copy: sf[1] keeps its value
        return 1, s1(a=2, b=make(k)), e

    a, b, c = both(3)
    assert a == 1 and b.a == 2 and list(b.b.a) == [3, 0.5, 2] and b.b.b == 65540 - 65536
    assert list(c.a) == [4, 0.5, 2] and c.b == 9 and sf[1].b == 65541 - 65536

    @sd.kernel
    def too_big() -> s0:
        return s0(b=3000000000)

    with pytest.raises(sd.SpiradTypeError, match="integer literal 3000000000 does not fit i32"):
        too_big()
