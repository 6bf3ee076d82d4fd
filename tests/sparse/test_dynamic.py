"""dynamic SNodes against a Python model of the lists: `append` / `length` (the function and
the `x[i]` methods), a full list taking nothing, a write raising the length, `deactivate`
emptying a list, and struct-for visiting each list's elements only."""
import numpy as np

import spirad as sd
from tests.support.archs import test_archs


@test_archs()
def test_append_length_deactivate_match_model(arch):
    n, cap = 8, 64
    counts = np.random.default_rng(3).integers(0, 90, n).astype(np.int32)  # some overflow
    x = sd.field(sd.i32)
    lst = sd.root.dense(sd.i, n).dynamic(sd.j, cap, chunk_size=16)
    lst.place(x)
    lens = sd.field(sd.i32, shape=n)

    c = sd.field(sd.i32, shape=n)
    c.from_numpy(counts)

    @sd.kernel
    def fill():
        for i in range(n):
            for k in range(c[i]):
                sd.append(lst, i, i * 1000 + k)

    @sd.kernel
    def lengths():
        for i in range(n):
            lens[i] = sd.length(lst, i)

    @sd.kernel
    def clear_even():
        for i in range(n):
            if i % 2 == 0:
                sd.deactivate(lst, [i])

    fill()
    lengths()
    want = np.minimum(counts, cap)
    np.testing.assert_array_equal(lens.to_numpy(), want)
    got = x.to_numpy()
    for i in range(n):
        np.testing.assert_array_equal(got[i, :want[i]], i * 1000 + np.arange(want[i]))
        assert not got[i, want[i]:].any()
    clear_even()
    lengths()
    want[::2] = 0
    np.testing.assert_array_equal(lens.to_numpy(), want)
    assert not x.to_numpy()[::2].any()


@test_archs()
def test_row_methods_write_and_struct_for(arch):
    n, cap = 6, 10
    x = sd.field(sd.f32)
    sd.root.dense(sd.i, n).dynamic(sd.j, cap).place(x)
    seen = sd.field(sd.i32, shape=(n, cap))
    lens = sd.field(sd.i32, shape=n)

    @sd.kernel
    def build():
        for i in range(n):
            for k in range(i):
                x[i].append(k * 0.5)
        x[0, 3] = 1.0  # a write at slot 3 makes the list 4 long (slots 0..2 read 0)

    @sd.kernel
    def visit():
        for i, j in x:
            seen[i, j] = 1
        for i in range(n):
            lens[i] = x[i].length()

    build()
    visit()
    want_len = np.arange(n)
    want_len[0] = 4
    np.testing.assert_array_equal(lens.to_numpy(), want_len)
    want_seen = np.zeros((n, cap), np.int32)
    for i in range(n):
        want_seen[i, :want_len[i]] = 1
    np.testing.assert_array_equal(seen.to_numpy(), want_seen)
    assert x[4, 3] == 1.5 and x[0, 3] == 1.0 and x[0, 1] == 0.0


@test_archs()
def test_root_dynamic_append_and_host_write(arch):
    x = sd.field(sd.i32)
    node = sd.root.dynamic(sd.i, 32, chunk_size=8)
    node.place(x)
    out = sd.field(sd.i32, shape=())

    @sd.kernel
    def grow():
        for k in range(5):
            x.append(k * k)

    @sd.kernel
    def length():
        out[None] = sd.length(x.parent(), [])

    grow()
    length()
    assert out[None] == 5
    x[9] = 4  # the host write raises the length to 10
    length()
    assert out[None] == 10
    assert x.to_numpy()[:5].tolist() == [0, 1, 4, 9, 16]


@test_archs()
def test_struct_field_placed_on_dynamic_appends_member_wise(arch):
    pair = sd.types.struct(a=sd.i32, b=sd.math.vec2)
    p = pair.field()
    rows = sd.root.dense(sd.i, 4).dynamic(sd.j, 8)
    rows.place(p)  # a struct field: its members, on the same node
    lens = sd.field(sd.i32, shape=4)

    @sd.kernel
    def grow():
        for i in range(4):
            for k in range(i * 3):  # row 3 overflows: 9 appends into 8 slots
                p[i].append(pair(a=i * 10 + k, b=sd.math.vec2(k, -k)))
        for i in range(4):
            lens[i] = p[i].length()

    grow()
    want = np.minimum(np.arange(4) * 3, 8)
    np.testing.assert_array_equal(lens.to_numpy(), want)
    a, b = p.a.to_numpy(), p.b.to_numpy()
    for i in range(4):
        np.testing.assert_array_equal(a[i, :want[i]], i * 10 + np.arange(want[i]))
        np.testing.assert_array_equal(b[i, :want[i], 1], -np.arange(want[i]))
        assert not a[i, want[i]:].any()
    assert p.shape == (4, 8) and p.a.parent() is rows
