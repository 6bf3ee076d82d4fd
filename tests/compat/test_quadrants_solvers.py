"""Language constructs Genesis' particle / grid solvers use (issue #37), with Quadrants 1.3.3's
semantics: `field.fill(v)` inside kernels and `@func`s (Genesis' spatial hasher clears its slot
counters so) is the loop `for I in grouped(field): field[I] = v` at the call site."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


@test_archs()
def test_field_fill_in_kernel(arch):
    x = sd.field(sd.i32, shape=(4, 3))
    v = sd.Vector.field(3, sd.f32, shape=5)
    y = sd.field(sd.i32, shape=4)
    cnt = sd.field(sd.i32, shape=())

    @sd.data_oriented
    class Hasher:
        def __init__(self):
            self.slots = x

        @sd.func
        def clear(self):
            self.slots.fill(7)  # in a func: the kernel's top-level loop

    h = Hasher()

    @sd.kernel
    def k(val: sd.f32):
        h.clear()
        v.fill(val)  # a run-time value, into every component
        for _ in range(1):
            for i in range(3):  # inside a (serial) loop: a serial loop there, the last one wins
                y.fill(i + 1)
        for i in range(4):
            cnt[None] += y[i]

    x.fill(0)
    k(2.5)
    np.testing.assert_array_equal(x.to_numpy(), np.full((4, 3), 7))
    np.testing.assert_array_equal(v.to_numpy(), np.full((5, 3), 2.5, np.float32))
    np.testing.assert_array_equal(y.to_numpy(), np.full(4, 3))
    assert cnt[None] == 12


@test_archs()
def test_field_fill_refuses_two_values(arch):
    x = sd.field(sd.i32, shape=4)

    @sd.kernel
    def k():
        x.fill(1, 2)

    with pytest.raises(sd.SpiradTypeError, match="fill takes one value"):
        k()


@test_archs()
def test_constant_matrices_with_keywords(arch):
    """`Matrix.identity(dt=..., n=...)` (Genesis' FEM and MPM stresses), `Vector.zero(dt=, n=)`,
    `Matrix.zero(dt, n, m=)`, `Vector.unit(n, i, dt=)`: keywords bind as in Python scope."""
    out = sd.Matrix.field(3, 3, sd.f32, shape=4)

    @sd.kernel
    def k():
        out[0] = sd.Matrix.identity(dt=sd.f32, n=3) * 2.0
        out[1] = sd.Matrix.identity(sd.f32, n=3) + sd.Matrix.zero(dt=sd.f32, n=3, m=3)
        out[2][0, 0] = sd.Vector.zero(n=3, dt=sd.f32).norm() + sd.Vector.unit(3, 1, dt=sd.f32)[1]
        out[3] = sd.Matrix.zero(sd.f32, 3, m=3)

    k()
    r = out.to_numpy()
    np.testing.assert_array_equal(r[0], 2 * np.eye(3))
    np.testing.assert_array_equal(r[1], np.eye(3))
    assert r[2][0, 0] == 1.0
    np.testing.assert_array_equal(r[3], np.zeros((3, 3)))


@test_archs()
def test_constant_matrices_bad_keyword(arch):
    out = sd.field(sd.f32, shape=1)

    @sd.kernel
    def k():
        out[0] = sd.Matrix.identity(dt=sd.f32, size=3)[0, 0]

    with pytest.raises(sd.SpiradTypeError, match="identity"):
        k()


@test_archs()
def test_template_parameters_by_reference(arch):
    """A func's `template()` parameter is the caller's variable or element itself (Quadrants and
    Taichi pass it by reference): `ret += x` and `ret = x` in the func update it. Genesis'
    spatial hasher sums a neighbour task into the caller's local this way, through two funcs."""
    out = sd.field(sd.f32, shape=3)
    vout = sd.Vector.field(3, sd.f32, shape=1)
    g = sd.field(sd.f32, shape=3)

    @sd.func
    def task(i, ret: sd.template()):
        ret += i * 1.0

    @sd.func
    def vtask(i, ret: sd.template()):
        ret += sd.Vector([1.0, 2.0, 3.0]) * i

    @sd.func
    def for_all(n, ret: sd.template(), t: sd.template()):
        for j in range(n):
            t(j, ret)

    @sd.func
    def set_it(ret: sd.template()):
        ret = 5.0

    @sd.func
    def by_value(ret):  # not a template: a copy, as before
        ret = 7.0

    @sd.kernel
    def k():
        for _ in range(1):
            den = 0.0
            for_all(4, den, task)
            out[0] = den
            acc = sd.Vector([0.0, 0.0, 0.0])
            for_all(3, acc, vtask)
            vout[0] = acc
            z = 1.0
            set_it(z)
            by_value(z)
            out[1] = z
        for i in range(3):  # a global element: its update is the element's own
            task(3, g[i])
            task(i, g[i])
        set_it(out[2])

    k()
    np.testing.assert_array_equal(out.to_numpy(), [6.0, 5.0, 5.0])
    np.testing.assert_array_equal(vout.to_numpy()[0], [3.0, 6.0, 9.0])
    np.testing.assert_array_equal(g.to_numpy(), [3.0, 4.0, 5.0])


@test_archs()
def test_list_comprehension_unrolled(arch):
    """`[e for x in seq if c]` over compile-time sequences is unrolled (Quadrants, Taichi);
    Genesis' FEM solver: `qd.Vector([H[j, k] for j in range(3)])`."""
    out = sd.Vector.field(3, sd.f32, shape=4)
    m = sd.Matrix.field(3, 3, sd.f32, shape=())

    @sd.kernel
    def k():
        H = m[None]
        for c in sd.static(range(3)):
            out[c] = sd.Vector([H[j, c] for j in range(3)])
        out[3] = sd.Vector([H[i, j] * 2.0 for i, j in ((0, 1), (1, 2), (2, 0), (2, 2)) if i != j])

    m.from_numpy(np.arange(9, dtype=np.float32).reshape(3, 3))
    k()
    r = out.to_numpy()
    np.testing.assert_array_equal(r[:3], np.arange(9).reshape(3, 3).T)
    np.testing.assert_array_equal(r[3], [2.0, 10.0, 12.0])


@test_archs()
def test_list_comprehension_needs_compile_time_iterable(arch):
    out = sd.Vector.field(2, sd.f32, shape=1)
    x = sd.field(sd.f32, shape=2)

    @sd.kernel
    def k(n: sd.i32):
        out[0] = sd.Vector([x[j] for j in range(n)])

    with pytest.raises(sd.SpiradSyntaxError, match="run-time bounds"):
        k(2)

    @sd.kernel
    def k2():
        out[0] = sd.Vector([x[j] for j in range(2) if x[j] > 0])

    with pytest.raises(sd.SpiradSyntaxError, match="'if' must be known at compile time"):
        k2()

    @sd.kernel
    def k3():  # a vector's components are known in number: they unroll (Taichi's rule too)
        v = sd.Vector([1.0, 2.0])
        out[0] = sd.Vector([c * 3.0 for c in v])

    k3()
    assert out[0].tolist() == [3.0, 6.0]


@test_archs()
def test_func_returning_a_tuple_of_run_time_values(arch):
    """`a[i], b[i] = f(...)` with `return new_pos, new_quat` (Genesis' geom placement): each
    returned value is stored before the func's region ends, so the verifier (on here: the arch
    decorator runs with debug=True) accepts the kernel and the values arrive."""
    pos = sd.Vector.field(3, sd.f32, shape=4)
    s = sd.field(sd.f32, shape=4)

    @sd.func
    def transform(p, k):
        new_p = p * 2.0 + k
        scale = new_p.norm_sqr()
        if k > 1:
            scale = -scale
        return new_p, scale, 3

    @sd.kernel
    def k():
        for i in range(4):
            pos[i], s[i], c = transform(sd.Vector([1.0, 0.0, 0.0]), i)
            s[i] += c

    k()
    p = 2.0 * np.array([1.0, 0.0, 0.0]) + np.arange(4)[:, None]
    np.testing.assert_allclose(pos.to_numpy(), p)
    n2 = (p ** 2).sum(1)
    np.testing.assert_allclose(s.to_numpy(), np.where(np.arange(4) > 1, -n2, n2) + 3)


def test_quadrants_module_short_circuits(tmp_path):
    """Through the `quadrants` module, `and` / `or` short-circuit as Quadrants' default
    (`short_circuit_operators=True`): Genesis guards a read past an ndarray's end with
    `joint_type == FREE and (ctrl_mode[d + 3, b] == ...)`; with debug bounds checks on, the
    unneeded right side must not run. `import spirad` has the same default (Taichi's)."""
    import os
    import textwrap

    from tests.support.quadrants_process import run_program
    prog = textwrap.dedent('''
        import quadrants as qd
        qd.init(arch=qd.cpu, debug=True)
        mode = qd.ndarray(qd.i32, shape=(4, 2))
        out = qd.ndarray(qd.i32, shape=(4, 2))

        @qd.kernel
        def k(mode: qd.types.ndarray(), out: qd.types.ndarray()):
            for i, b in qd.ndrange(4, 2):
                free = i == 0
                if free and (mode[i + 3, b] == 1 or mode[i + 4, b] == 1):
                    out[i, b] = 1
                out[i, b] += 2 and 3  # Python's value: 3

        mode.fill(1)
        k(mode, out)
        print(out.to_numpy().tolist())
    ''')
    r = run_program(tmp_path, prog, drop=("SPIRAD_SHORT_CIRCUIT_OPERATORS",))
    assert r.stdout.split("\n")[-2] == "[[4, 4], [3, 3], [3, 3], [3, 3]]"
    from spirad import options
    if "SPIRAD_SHORT_CIRCUIT_OPERATORS" not in os.environ:
        assert options.get("SPIRAD_SHORT_CIRCUIT_OPERATORS")  # spirad's own default: Taichi's


@test_archs()
def test_short_circuit_switch_is_the_init_default(arch, monkeypatch):
    """`SPIRAD_SHORT_CIRCUIT_OPERATORS=0` makes the bitwise `and` / `or` the default of `init`
    (Python's, Taichi's default, otherwise); an explicit `init(short_circuit_operators=...)`
    still wins."""
    def two_and_one():
        out = sd.field(sd.i32, shape=1)

        @sd.kernel
        def k():
            out[0] = 2 and 1  # bitwise: 0; Python (Taichi's default): 1

        k()
        return out[0]

    monkeypatch.delenv("SPIRAD_SHORT_CIRCUIT_OPERATORS", raising=False)
    sd.init(arch=arch, debug=True)
    assert two_and_one() == 1
    monkeypatch.setenv("SPIRAD_SHORT_CIRCUIT_OPERATORS", "0")
    sd.init(arch=arch, debug=True)
    assert two_and_one() == 0
    sd.init(arch=arch, debug=True, short_circuit_operators=True)
    assert two_and_one() == 1
