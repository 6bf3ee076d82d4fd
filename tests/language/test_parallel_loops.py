"""Which loops run in parallel (docs/parallel_loops.md): a loop at the kernel's outermost scope,
also when it is reached through @sd.func calls, `sd.static` ifs and static for-loops; never a
loop under a non-static `if` (a Python-constant condition included) or inside another loop.
Each case checks the task kinds offloading produced and the result against numpy, and loops
reached through funcs get the same diagnostics as loops written directly."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, SPIRV_ARCHS, exactly, test_archs
from tests.support.source_quotes import assert_quotes

N = 64
FLAG = True


def kinds(kernel, *args):
    """The task kinds of `kernel` compiled for `args` ('range' = a parallel loop)."""
    return [t.kind for t in kernel.compile(args).tl.tasks]


# -- loops inside @sd.func at the outermost scope -------------------------------------------------


@sd.func
def fill_squares(a: sd.template(), n):
    for i in range(n):                     # the outermost scope of the kernel: parallel
        a[i] = i * i


@sd.func
def fill_via(a: sd.template(), n):
    fill_squares(a, n)                     # a func called at the top scope of a func


@sd.func
def fill_ndrange(b: sd.template()):
    for i, j in sd.ndrange(4, 8):
        b[i, j] = i * 10 + j


@sd.func
def fill_grouped(b: sd.template()):
    for I in sd.grouped(b):
        b[I] += 1


@sd.func
def fill_field(a: sd.template()):
    for i in a:
        a[i] += 3


@test_archs(archs=exactly("interp") | EVERY_ARCH)
def test_loops_in_funcs_at_top_level_are_parallel(arch):
    a = sd.field(sd.i32, shape=N)
    b = sd.field(sd.i32, shape=(4, 8))

    @sd.kernel
    def k_direct(n: sd.i32):
        fill_squares(a, n)

    @sd.kernel
    def k_nested(n: sd.i32):
        fill_via(a, n)

    @sd.kernel
    def k_forms():
        fill_ndrange(b)
        fill_grouped(b)
        fill_field(a)

    for k in (k_direct, k_nested):
        a.fill(-1)
        k(N)
        assert kinds(k, N) == ["range"]
        np.testing.assert_array_equal(a.to_numpy(), np.arange(N) ** 2)
    k_forms()
    assert kinds(k_forms) == ["range", "range", "range"]
    i, j = np.meshgrid(np.arange(4), np.arange(8), indexing="ij")
    np.testing.assert_array_equal(b.to_numpy(), i * 10 + j + 1)
    np.testing.assert_array_equal(a.to_numpy(), np.arange(N) ** 2 + 3)


@sd.func
def fill_million(a: sd.template(), n):
    for i in range(n):
        a[i] = i * 3 + 1


@sd.func
def fill_million_via(a: sd.template(), n):
    fill_million(a, n)


@test_archs(archs=EVERY_ARCH)
def test_million_iteration_loop_in_func_spreads_over_threads(arch):
    """One thread could not run this on lavapipe (its loop cap, 65,535 iterations per
    invocation, is reported as an error); as a parallel task it runs in full."""
    m = 1_000_000
    a = sd.field(sd.i32, shape=m)

    @sd.kernel
    def k(n: sd.i32):
        fill_million_via(a, n)

    k(m)
    tl = k.compile((m,)).tl
    assert [t.kind for t in tl.tasks] == ["range"]
    np.testing.assert_array_equal(a.to_numpy(), np.arange(m, dtype=np.int32) * 3 + 1)


@test_archs(archs=SPIRV_ARCHS)
def test_million_iteration_serial_loop_still_reports_the_loop_cap(arch):
    """The same loop made serial (`for _ in range(1):`) is one invocation: reported, never
    truncated (architecture §5) — the contrast that shows the func's loop above really is parallel."""
    m = 1_000_000
    a = sd.field(sd.i32, shape=m)

    @sd.kernel
    def k(n: sd.i32):
        for _ in range(1):
            fill_million(a, n)

    k(m)
    with pytest.raises(sd.SpiradDeviceError, match="65535 loop iterations"):
        sd.sync()


@test_archs(archs=exactly("interp") | EVERY_ARCH)
def test_funcs_called_inside_loops_or_ifs_stay_serial(arch):
    a = sd.field(sd.i32, shape=N)
    c = sd.field(sd.i32, shape=())

    @sd.kernel
    def k_in_loop(n: sd.i32):
        for _ in range(1):
            fill_squares(a, n)             # nested in the parallel loop: serial inside it

    @sd.kernel
    def k_in_if(n: sd.i32):
        if c[None] == 0:
            fill_squares(a, n)             # under a run-time if: a serial task

    for k, want in ((k_in_loop, ["range"]), (k_in_if, ["serial"])):
        a.fill(0)
        k(N)
        assert kinds(k, N) == want
        np.testing.assert_array_equal(a.to_numpy(), np.arange(N) ** 2)
    tl = k_in_loop.compile((N,)).tl
    assert (tl.tasks[0].begin.arg, tl.tasks[0].end.arg) == (0, 1)   # one parallel iteration


# -- scopes follow the source, never constant folding ---------------------------------------------


@test_archs(archs=exactly("interp") | EVERY_ARCH)
def test_loop_under_constant_if_is_serial(arch):
    """`if True:` is a scope of its own: the loop in it is serial, so this count is exact (in
    parallel the increments would race) and a local carried across it is no race."""
    c = sd.field(sd.i32, shape=())
    s = sd.field(sd.i32, shape=())
    flag = True

    @sd.kernel
    def k_true():
        if True:
            for i in range(1000):
                c[None] = c[None] + 1

    @sd.kernel
    def k_flag():
        if flag:                           # a Python value, resolved at compile time
            for i in range(1000):
                c[None] = c[None] + 1

    @sd.kernel
    def k_else():
        if not FLAG:
            pass
        else:
            for i in range(1000):
                c[None] = c[None] + 1

    @sd.kernel
    def k_carried():
        t = 0
        if True:
            for i in range(10):
                t = t + i                  # carried across iterations: fine when serial
        s[None] = t

    for k in (k_true, k_flag, k_else):
        c[None] = 0
        k()
        assert kinds(k) == ["serial"]
        assert c[None] == 1000
    k_carried()
    assert kinds(k_carried) == ["serial"]
    assert s[None] == 45


@test_archs(archs=exactly("interp") | EVERY_ARCH)
def test_static_if_and_static_for_keep_the_outermost_scope(arch):
    """`if sd.static(...)` and `for ... in sd.static(...)` are resolved before scoping (Taichi
    unrolls them into the enclosing block): loops directly in them at the top are parallel."""
    a = sd.field(sd.i32, shape=N)
    b = sd.field(sd.i32, shape=(3, N))

    @sd.kernel
    def k_static_if():
        if sd.static(FLAG):
            for i in range(N):
                a[i] = i + 7

    @sd.kernel
    def k_static_else():
        if sd.static(not FLAG):
            pass
        else:
            for i in range(N):
                a[i] = i + 9

    @sd.kernel
    def k_static_for():
        for r in sd.static(range(3)):
            for i in range(N):             # one parallel task per unrolled copy
                b[r, i] = r * 100 + i

    k_static_if()
    assert kinds(k_static_if) == ["range"]
    np.testing.assert_array_equal(a.to_numpy(), np.arange(N) + 7)
    k_static_else()
    assert kinds(k_static_else) == ["range"]
    np.testing.assert_array_equal(a.to_numpy(), np.arange(N) + 9)
    k_static_for()
    assert kinds(k_static_for) == ["range"] * 3
    r, i = np.meshgrid(np.arange(3), np.arange(N), indexing="ij")
    np.testing.assert_array_equal(b.to_numpy(), r * 100 + i)


@test_archs(archs=exactly("interp") | EVERY_ARCH)
def test_while_and_nested_loops_are_serial(arch):
    c = sd.field(sd.i32, shape=())
    a = sd.field(sd.i32, shape=4)

    @sd.kernel
    def k():
        j = 0
        while j < 3:
            for i in range(100):           # in a while: serial
                c[None] = c[None] + 1
            j += 1
        for i in range(4):                 # parallel
            for m in range(5):             # nested: serial in each iteration
                a[i] = a[i] + m

    k()
    assert kinds(k) == ["serial", "range"]
    assert c[None] == 300
    np.testing.assert_array_equal(a.to_numpy(), [10] * 4)


# -- the diagnostics of a parallel loop, through funcs ---------------------------------------------


@sd.func
def total(x: sd.template()):
    s = 1.0
    for i in x:
        s = s * x[i] + 0.0                 # a func local assigned in its parallel loop: races
    return s


@sd.func
def total_param(x: sd.template(), acc):
    for i in x:
        acc = x[i]                         # a func parameter assigned in its parallel loop
    return acc


@sd.func
def read_back(x: sd.template()):
    s = 0.0
    for i in x:
        s += x[i]
        x[i] = s                           # reads the shared local inside the loop
    return s


@sd.func
def first_negative(x: sd.template(), out: sd.template()):
    for i in x:
        if x[i] < 0:
            out[None] = i
            break


@sd.func
def loop_to(a: sd.template(), n):
    for i in range(n):
        a[i] = 1


@test_archs(archs=EVERY_ARCH)
def test_parallel_loop_diagnostics_through_funcs(arch):
    x = sd.field(sd.f32, shape=8)
    y = sd.field(sd.f32, shape=())
    out = sd.field(sd.i32, shape=())
    steps = sd.field(sd.i32, shape=())

    @sd.kernel
    def k_local():
        y[None] = total(x)

    @sd.kernel
    def k_param():
        y[None] = total_param(x, 0.0)

    @sd.kernel
    def k_break():
        first_negative(x, out)

    flags = sd.field(sd.i32, shape=8)

    @sd.kernel
    def k_bound():
        loop_to(flags, steps[None])

    @sd.kernel
    def k_read():
        y[None] = read_back(x)

    with pytest.raises(sd.SpiradSyntaxError, match="the parallel loop assigns to 's'") as e:
        k_local()
    assert_quotes(e.value, total, "s = s * x[i] + 0.0")
    with pytest.raises(sd.SpiradSyntaxError, match="the parallel loop assigns to 'acc'") as e:
        k_param()
    assert_quotes(e.value, total_param, "acc = x[i]")
    with pytest.raises(sd.SpiradSyntaxError, match="the parallel loop reads 's'") as e:
        k_read()
    assert_quotes(e.value, read_back, "x[i] = s")
    with pytest.raises(sd.SpiradSyntaxError, match="'break' is not allowed") as e:
        k_break()
    assert_quotes(e.value, first_negative, "break")
    steps[None] = 5                 # a range read from a field, through a func: fine (issue #13)
    k_bound()
    np.testing.assert_array_equal(flags.to_numpy(), [1] * 5 + [0] * 3)


@test_archs(archs=exactly("cpu"))
def test_same_funcs_nested_in_a_serial_scope_compile(arch):
    """The fixes those errors suggest: call the func from inside `for _ in range(1):`."""
    x = sd.field(sd.f32, shape=8)
    y = sd.field(sd.f32, shape=())
    x.from_numpy(np.arange(1, 9, dtype=np.float32))

    @sd.kernel
    def k():
        for _ in range(1):
            y[None] = total(x) + total_param(x, 1.0)

    k()
    assert y[None] == 40320 + 8


@test_archs()
def test_kernel_locals_updated_in_the_parallel_loop(arch):
    """Quadrants' reductions into a local declared before the parallel loop: `s += v`, `-=`,
    `|=`, `max(s, v)` are atomics on a kernel temporary, `ok = False` (the same value in every
    iteration) a plain store; the value is read after the loop. Not differentiated: refused."""
    x = sd.field(sd.f32, shape=64, needs_grad=True)
    out = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def valid() -> sd.i32:
        ok = True
        for i in x:
            if sd.math.isnan(x[i]):
                ok = False
        return ok

    @sd.kernel
    def reduce(n: sd.i32) -> sd.i32:
        m = -100
        f = 0
        c = 0
        for i in range(n):
            m = max(m, i * 3 % 17)
            f |= 1 << (i % 5)
            c -= 1
        return m * 10000 + f * 100 - c

    @sd.kernel
    def total():
        s = 0.0
        for i in x:
            s += x[i]
        out[None] = s

    data = np.arange(64, dtype=np.float32) * 0.5
    x.from_numpy(data)
    assert valid() == 1
    assert reduce(7) == 15 * 10000 + 31 * 100 + 7
    assert reduce(100) == 16 * 10000 + 31 * 100 + 100
    total()
    assert out[None] == pytest.approx(data.sum())
    x[3] = float("nan")
    assert valid() == 0
    with pytest.raises(sd.SpiradAutodiffError, match="not differentiated"):
        total.grad()


@test_archs()
def test_parallel_loop_writes_components_of_an_outer_local(arch):
    # Taichi keeps a local declared before the parallel loop in a global temporary: iterations
    # that write different components by a run-time index (`v[i] = c`) do not race, and each
    # reads its own back. spirad stores `if i == p: temporary[p] = c` (passes/offload.py)
    vo = sd.Vector.field(4, sd.i32, shape=())
    mo = sd.Matrix.field(2, 3, sd.i32, shape=())

    @sd.kernel
    def k(n: sd.i32) -> sd.i32:
        v = sd.Vector([5, 5, 5, 5])
        m = sd.Matrix([[-1, -1, -1], [-1, -1, -1]])
        total = 0
        for i in range(n):
            v[i] = (i + 1) * 10
            v[i] += v[i] // 10        # its own component, written above
            for j in range(3):
                m[i % 2, j] = i * 3 + j
                total += m[i % 2, j]
        vo[None] = v
        mo[None] = m
        return total

    assert k(2) == sum(range(6))
    np.testing.assert_array_equal(vo.to_numpy(), [11, 22, 5, 5])   # v[2:] untouched
    np.testing.assert_array_equal(mo.to_numpy(), [[0, 1, 2], [3, 4, 5]])


@test_archs()
def test_sum_of_a_long_vector_argument_indexed_in_the_loop(arch):
    """`ret += a[i]` over a 300-component vector argument: the run-time index is a select chain
    300 deep; the race check still sees a plain update of `ret` (it gave up past depth 200)."""
    vec = sd.types.vector(300, sd.i32)

    @sd.kernel
    def total(a: vec) -> sd.i32:
        ret = 0
        for i in range(300):
            ret += a[i]
        return ret

    assert total(vec(list(range(300)))) == 299 * 300 // 2
