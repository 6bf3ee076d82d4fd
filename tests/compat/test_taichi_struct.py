"""Struct fields (`sd.Struct.field`, `sd.types.struct`, `@sd.dataclass`): one field per member,
`s[i].m` / `s.m[i]` in kernels, struct-for loops, gradients through members."""
import numpy as np
import pytest

import spirad as sd
import spirad.math as tm
from tests.support.archs import exactly, test_archs


@sd.dataclass
class Particle:
    pos: tm.vec2
    mass: float
    tag: int


@test_archs()
def test_struct_fields_forward_and_grad(arch):
    p = Particle.field(shape=5, needs_grad=True)
    q = sd.Struct.field({"a": sd.f32, "b": sd.types.vector(3, sd.f32)}, shape=(2, 3))
    r = sd.types.struct(w=float).field(shape=5)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)
    assert p.pos.shape == (5,) and p.mass.needs_grad and not p.tag.needs_grad

    @sd.kernel
    def init():
        for i in p:
            p[i].pos = [i * 1.0, 2.0]
            p[i].mass = 1.0 + i
            p.tag[i] = i * 10
        for I in sd.grouped(q):
            q[I].a = I[0] + I[1]
            q[I].b = tm.vec3(1.0, 2.0, 3.0) * q[I].a
            q[I].b.z += 1.0

    @sd.kernel
    def energy():
        for i in p:
            r[i].w = p[i].mass * tm.length(p[i].pos)
            loss[None] += 0.5 * p[i].mass * p[i].pos.dot(p[i].pos)

    init()
    with sd.ad.Tape(loss):
        energy()
    pos = np.stack([np.arange(5), np.full(5, 2.0)], axis=1)
    mass = 1.0 + np.arange(5)
    np.testing.assert_allclose(p.pos.to_numpy(), pos)
    np.testing.assert_array_equal(p.tag.to_numpy(), np.arange(5) * 10)
    np.testing.assert_allclose(r.w.to_numpy(), mass * np.linalg.norm(pos, axis=1), rtol=1e-6)
    np.testing.assert_allclose(loss[None], np.sum(0.5 * mass * np.sum(pos ** 2, axis=1)), rtol=1e-6)
    np.testing.assert_allclose(p.pos.grad.to_numpy(), mass[:, None] * pos, rtol=1e-6)
    np.testing.assert_allclose(p.mass.grad.to_numpy(), 0.5 * np.sum(pos ** 2, axis=1), rtol=1e-6)
    a = np.add.outer(np.arange(2), np.arange(3)).astype(np.float64)
    np.testing.assert_allclose(q.to_numpy()["a"], a)
    np.testing.assert_allclose(q.b.to_numpy(), a[..., None] * [1, 2, 3] + [0, 0, 1])
    assert q[1, 2]["a"] == 3.0


@test_archs(archs=exactly("cpu"))
def test_struct_errors(arch):
    p = Particle.field(shape=2)

    @sd.kernel
    def k():
        for i in p:
            p[i].nope = 1.0

    with pytest.raises(sd.SpiradTypeError, match="no member 'nope'"):
        k()
    p = Particle(pos=tm.vec2(0), mass=1.0, tag=0)  # a Python-scope struct value (Taichi's)
    assert p.mass == 1.0 and list(p.pos) == [0.0, 0.0]
    with pytest.raises(sd.SpiradTypeError, match="takes the members"):
        Particle(pos=tm.vec2(0), nope=1.0)


@test_archs(archs=exactly("cpu"))
def test_taichi_names_spirad_lacks_are_errors_at_the_line(arch):
    """A Taichi name spirad has not (`get_addr`: raw addresses) is an AttributeError in Python
    and a compile error at the user's line in a kernel."""
    assert not hasattr(sd, "get_addr") and hasattr(sd, "bit_cast")
    x = sd.field(sd.f32, shape=4)

    @sd.kernel
    def k():
        for i in x:
            x[i] = sd.get_addr(x, [i])

    with pytest.raises(sd.SpiradSyntaxError, match="no attribute 'get_addr'") as e:
        k()
    assert "sd.get_addr(x, [i])" in str(e.value)
    with pytest.raises(sd.TaichiSyntaxError):
        raise sd.SpiradSyntaxError("x")


@test_archs()
def test_struct_values_in_kernels(arch):
    p = Particle.field(shape=4, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def init():
        for i in p:
            q = Particle(pos=tm.vec2(i, 1.0), mass=2.0)   # tag not given: 0
            q.tag = i + 100
            p[i] = q

    @sd.kernel
    def step():
        for i in p:
            q = p[i]          # a copy
            q.pos *= q.mass
            q.mass = 0.0      # changes the copy only
            r = q
            r.pos += 1.0      # r is another copy
            loss[None] += q.pos.dot(q.pos) + 0.0 * r.mass + p[i].mass

    init()
    np.testing.assert_array_equal(p.tag.to_numpy(), np.arange(4) + 100)
    with sd.ad.Tape(loss):
        step()
    pos = np.stack([np.arange(4), np.ones(4)], axis=1)
    np.testing.assert_allclose(p.mass.to_numpy(), np.full(4, 2.0))
    np.testing.assert_allclose(loss[None], np.sum((2 * pos) ** 2) + 8.0, rtol=1e-6)
    np.testing.assert_allclose(p.pos.grad.to_numpy(), 8.0 * pos, rtol=1e-6)   # d/dpos (m pos)^2
    np.testing.assert_allclose(p.mass.grad.to_numpy(), 2 * 2.0 * np.sum(pos ** 2, axis=1) + 1,
                               rtol=1e-6)


@test_archs()
def test_kernel_asserts_in_debug(arch):
    """The decorator inits with debug=True: asserts are checked and raised at the next sync."""
    x = sd.field(sd.f32, shape=8)

    @sd.kernel
    def k(limit: sd.f32):
        for i in x:
            assert x[i] < limit, "x must stay below the limit"
            x[i] += 1.0

    k(10.0)
    np.testing.assert_array_equal(x.to_numpy(), np.ones(8))
    x[3] = 50.0
    k(10.0)
    with pytest.raises(AssertionError, match="x must stay below the limit") as e:
        sd.sync()
    assert isinstance(e.value, sd.SpiradAssertionError) and "assert x[i] < limit" in str(e.value)
    k(100.0)
    sd.sync()  # cleared: no stale failure
    sd.init(arch=arch)  # debug off: asserts are compiled away (Taichi)
    y = sd.field(sd.f32, shape=2)

    @sd.kernel
    def k2():
        for i in y:
            assert y[i] > 1.0
            y[i] = 2.0

    k2()
    sd.sync()
    assert y[0] == 2.0


Line = sd.types.struct(d=tm.vec3, n=float)
Segment = sd.types.struct(line=Line, idx=int)


@test_archs()
def test_struct_types_as_struct_members(arch):
    """A struct member of a struct field is a struct field of its own: read, written and
    filled through the outer element, in kernels and in Python scope; `Segment(1)` gives its
    first member (`line`) 1, as `Line(1)` (d = 1, n = 0), as Taichi does."""
    s = Segment.field(shape=4)
    ln = Line.field(shape=4)

    @sd.kernel
    def ones():
        for i in s:
            s[i] = Segment(1)

    @sd.kernel
    def build():
        for i in ln:
            ln[i] = Line(d=tm.vec3(i), n=i + 0.5)
        for i in s:
            s[i].idx = i
            s[i].line = ln[i]
            s[i].line.n += 1.0

    ones()
    assert s.idx.to_numpy().tolist() == [0] * 4
    assert s.line.d.to_numpy().tolist() == [[1.0] * 3] * 4 and s[2].line.n == 0.0
    build()
    assert s.idx.to_numpy().tolist() == [0, 1, 2, 3]
    assert s.line.n.to_numpy().tolist() == [1.5, 2.5, 3.5, 4.5]
    assert s[3].line.d.to_numpy().tolist() == [3.0, 3.0, 3.0]
    s[1] = sd.Struct({"line": {"d": tm.vec3(7), "n": 0.25}, "idx": 9})
    assert s[1].idx == 9 and s[1].line.n == 0.25 and s[1].line.d.to_numpy().tolist() == [7] * 3
    s.fill(5)
    assert s[0].idx == 5 and s[0].line.n == 5.0


@test_archs()
def test_struct_value_stores_into_an_element_with_the_same_members(arch):
    """`x[i] = sd.Struct(a=..., b=...)`: the anonymous struct's members go to the element's by
    name, each converted to its type (Taichi's implicit cast); other member names are an
    error."""
    x = sd.Struct.field({"a": sd.i32, "b": sd.f32}, shape=3)

    @sd.kernel
    def k():
        for i in x:
            x[i] = sd.Struct(b=1.5 * i, a=2.5 * i)

    with pytest.warns(sd.SpiradWarning, match="may lose precision: i32 <- f32"):
        k()
    assert x.a.to_numpy().tolist() == [0, 2, 5] and x.b.to_numpy().tolist() == [0.0, 1.5, 3.0]

    @sd.kernel
    def wrong():
        for i in x:
            x[i] = sd.Struct(a=1, c=2)

    with pytest.raises(sd.SpiradTypeError, match="assign a"):
        wrong()


@sd.dataclass
class Body:
    pos: tm.vec2
    mass: float

    @sd.func
    def momentum(self, v: sd.template()):
        return self.mass * v

    @sd.func
    def settle(self, other):
        self.pos = (self.pos + other.pos) / 2

    def heavier(self, other):
        return self.mass > other.mass


@test_archs()
def test_dataclass_methods(arch):
    """Methods of a dataclass: an @sd.func on a value or an element (`self` is the struct: a
    write through it changes the element), a plain method in Python scope; a member with a
    default value is Taichi's error."""
    b = Body.field(shape=3)
    out = sd.field(sd.f32, shape=3)

    @sd.kernel
    def step():
        for i in b:
            out[i] = b[i].momentum(2.0)
            q = Body(pos=tm.vec2(4.0, 8.0), mass=1.0)
            b[i].settle(q)

    for i in range(3):
        b[i] = Body(pos=tm.vec2(i, 0), mass=i + 1.0)
    step()
    assert out.to_numpy().tolist() == [2.0, 4.0, 6.0]
    assert b.pos.to_numpy().tolist() == [[2.0, 4.0], [2.5, 4.0], [3.0, 4.0]]
    assert Body(mass=3.0).heavier(Body(mass=2.0)) and not b[0].heavier(b[1])
    with pytest.raises(sd.SpiradSyntaxError, match="Default value in @dataclass"):
        @sd.dataclass
        class WithDefault:
            a: int
            b: float = 3.14
