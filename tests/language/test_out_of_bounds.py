"""Issue #42: out of bounds never crashes and never lies.

Without `debug=True` every global access that is not provably in range is checked cheaply: an
out-of-range one is skipped (a load reads 0, a store writes nothing) and the next sync raises
`SpiradOutOfBoundsError` (a SpiradRuntimeError and an IndexError) naming the kernel and the
field, and suggesting debug=True. Nothing crashes, no other field changes, spirad's own status
words are never hit, later launches run normally.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradIndexError, SpiradOutOfBoundsError, SpiradRuntimeError
from tests.support.archs import EVERY_ARCH, SPIRV_ARCHS, test_archs



def _two_fields():
    x = sd.field(sd.f32, shape=8, name="x")
    y = sd.field(sd.f32, shape=(4, 4), name="y")
    return x, y


def _raises_oob(kernel_name, field_name):
    return pytest.raises(SpiradOutOfBoundsError, match=rf"kernel {kernel_name} .*'{field_name}'")


@test_archs(EVERY_ARCH)
def test_one_past_the_end_of_the_last_field(arch):
    sd.init(arch=arch)
    x, y = _two_fields()
    y.fill(2.0)

    @sd.kernel
    def wr():
        for i in x:
            x[i + 1] = 1.0

    wr()
    with _raises_oob("wr", "x") as e:
        sd.sync()
    assert "debug=True" in str(e.value)
    assert isinstance(e.value, SpiradRuntimeError) and isinstance(e.value, IndexError)
    np.testing.assert_array_equal(x.to_numpy(), [0] + [1] * 7)
    np.testing.assert_array_equal(y.to_numpy(), np.full((4, 4), 2.0))  # the neighbour is intact

    @sd.kernel
    def fine():
        for i in x:
            x[i] = i * 2.0

    fine()  # later launches run normally: the error was reported once
    sd.sync()
    np.testing.assert_array_equal(x.to_numpy(), np.arange(8) * 2.0)


@test_archs(EVERY_ARCH)
def test_axis_overflow_in_2d(arch):
    sd.init(arch=arch)
    x, y = _two_fields()

    @sd.kernel
    def wr2():
        for i in range(4):
            y[i, 4] = 1.0

    wr2()
    with _raises_oob("wr2", "y"):
        sd.sync()
    np.testing.assert_array_equal(y.to_numpy(), np.zeros((4, 4)))  # the next row is intact
    np.testing.assert_array_equal(x.to_numpy(), np.zeros(8))


@test_archs(EVERY_ARCH)
def test_read_past_the_end(arch):
    sd.init(arch=arch)
    x, y = _two_fields()
    y.fill(5.0)
    x.fill(3.0)

    @sd.kernel
    def rd(o: sd.i32):
        for i in x:
            x[i] = x[i] + y[0, i + o]

    rd(0)  # columns 4..7 of row 0 are out of range
    with _raises_oob("rd", "y"):
        sd.sync()
    np.testing.assert_array_equal(x.to_numpy(), [8] * 4 + [3] * 4)  # skipped reads gave 0
    rd(-4)
    with _raises_oob("rd", "y"):
        x.to_numpy()  # a host read syncs


@test_archs(EVERY_ARCH)
def test_far_writes_and_reads(arch):
    sd.init(arch=arch)
    x, y = _two_fields()

    @sd.kernel
    def far(o: sd.i32):
        for i in x:
            x[i + o] = 1.0
            y[i % 4, i // 4] = x[i - o]

    for o in (2**20, -2**20, 2**30):
        far(o)
        with _raises_oob("far", "x"):
            sd.sync()
    np.testing.assert_array_equal(x.to_numpy(), np.zeros(8))
    far(0)
    sd.sync()
    np.testing.assert_array_equal(x.to_numpy(), np.ones(8))


@test_archs(EVERY_ARCH)
def test_lanes_and_atomics(arch):
    """A range long enough for SPMD lanes on the CPU: consecutive stores, gathers, atomics."""
    sd.init(arch=arch)
    n = 1000
    a = sd.field(sd.f32, shape=n, name="a")
    s = sd.field(sd.f32, shape=(), name="s")
    nd = sd.ndarray(sd.f32, shape=n)

    @sd.kernel
    def lanes(o: sd.i32, m: sd.types.ndarray()):
        for i in range(n):
            a[i + o] = 1.0
            sd.atomic_add(s[None], a[(i * 7) % (n + o + 1)])
            m[i + o] += 2.0

    lanes(0, nd)
    sd.sync()
    assert a.to_numpy().sum() == n and nd.to_numpy().sum() == 2 * n
    a.fill(0)
    nd.fill(0)
    for o in (3, -3):
        lanes(o, nd)
        with pytest.raises(SpiradOutOfBoundsError, match="kernel lanes"):
            sd.sync()
    got = a.to_numpy()
    assert got[:n - 3].sum() == n - 3 and got[n - 3:].sum() == 3  # both launches' in-range part
    assert nd.to_numpy().sum() == 2 * 2 * (n - 3)


@test_archs(EVERY_ARCH, debug_only="the named bounds check (line, index) is debug=True's")
def test_debug_names_line_and_index(arch):
    """debug=True keeps its precise error (SpiradIndexError with the index)."""
    x, _ = _two_fields()

    @sd.kernel
    def wr():
        for i in x:
            x[i + 1] = 1.0

    wr()
    with pytest.raises(SpiradIndexError, match="indexed with 8"):
        sd.sync()


@test_archs(SPIRV_ARCHS)
def test_unchecked_off_by_one_never_hits_the_status_words(arch):
    """check_bounds=False: no checks, but a write one past the last field (or one row past a
    4x4 field) lands in the guard around the status words, not on them."""
    sd.init(arch=arch, check_bounds=False)
    x, y = _two_fields()

    @sd.kernel
    def wr():
        for i in x:
            x[i + 1] = 1.0

    @sd.kernel
    def wr2():
        for i in range(4):
            y[i, 4] = 1.0

    wr()
    wr2()
    sd.sync()  # no "device error code 1065353216"
    x.to_numpy()


@test_archs(EVERY_ARCH)
def test_pending_error_at_init_is_reported(arch):
    """A bounds error (debug or default) still pending at sd.init() is warned about there, and
    not reported against the new state."""
    for debug, what in ((True, "index out of range"), (False, "out of range")):
        _pending_at_init(arch, debug, what)


def _pending_at_init(arch, debug, what):
    sd.init(arch=arch, debug=debug)
    x = sd.field(sd.f32, shape=4)

    @sd.kernel
    def wr():
        for i in x:
            x[i + 1] = 1.0

    wr()
    with pytest.warns(RuntimeWarning, match=f"(?s)never raised.*{what}"):
        sd.init(arch=arch)
    x2 = sd.field(sd.f32, shape=4)
    x2.fill(1)
    sd.sync()  # not reported again against the new state


def test_in_range_accesses_are_not_checked():
    from kernel_ir.index_range import in_range_accesses
    from kernel_ir.ops import GLOBAL_ACCESS

    sd.init(arch=sd.cpu)
    x = sd.field(sd.f32, shape=(8, 3), name="x")
    v = sd.Vector.field(3, sd.f32, shape=5, name="v")
    seen = []

    import llvm_codegen.codegen as cg
    orig = cg.compile_tasks

    def spy(tl, abi, *a, **k):
        seen.append(tl)
        return orig(tl, abi, *a, **k)

    @sd.kernel
    def k(a: sd.types.ndarray(), o: sd.i32):
        for i, j in x:      # struct-for: idx // 3, idx % 3
            x[i, j] = 1.0
        for i in v:
            v[i] = v[i] * 2
        for i in range(a.shape[0]):
            a[i] = a[i] + 1
            for j in range(3):
                x[j + 5, j] = a[i]
        for i in range(8):
            x[i + o, 0] = 1.0   # unknown offset: checked

    cg.compile_tasks = spy
    try:
        k(sd.ndarray(sd.f32, shape=4), 0)
    finally:
        cg.compile_tasks = orig
    from kernel_ir.nodes import walk
    tasks = seen[0].tasks
    for t in tasks[:-1]:
        acc = [n for n in walk(t.body) if n.op in GLOBAL_ACCESS]
        assert acc and set(acc) == in_range_accesses(t), t.name
    last = [n for n in walk(tasks[-1].body) if n.op in GLOBAL_ACCESS]
    assert not in_range_accesses(tasks[-1]) and last


@pytest.mark.parametrize("arch", ["cpu", "vulkan", "cuda"])
def test_far_write_does_not_kill_the_process(arch, tmp_path):
    """A far write used to SIGSEGV the CPU process: run it in a subprocess so a crash fails
    this test instead of killing pytest."""
    from tests.support.archs import arch_or_skip
    arch_or_skip(arch)
    code = textwrap.dedent(f"""
        import spirad as sd
        sd.init(arch="{arch}")
        x = sd.field(sd.f32, shape=1 << 16)
        @sd.kernel
        def far(o: sd.i32):
            for i in x:
                x[i + o] = 1.0
        for o in (1 << 20, -(1 << 20), (1 << 31) - (1 << 17)):
            far(o)
            try:
                sd.sync()
            except sd.SpiradOutOfBoundsError as e:
                print("raised:", str(e)[:40])
        far(0)
        sd.sync()
        print("sum", x.to_numpy().sum())
    """)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    script = tmp_path / "far.py"
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                       cwd=root, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("raised: kernel far") == 3, r.stdout
    assert f"sum {1 << 16}.0" in r.stdout


@test_archs(EVERY_ARCH)
def test_2d_ndarray_each_axis_in_a_serial_loop(arch):
    """A 2-D ndarray indexed by values read from memory in a serialised loop (Genesis' shape:
    no guard can prove them): each axis out of range alone, below and above, on a load and on
    a store, is skipped (the load reads 0) and reported; in-range accesses around it run."""
    sd.init(arch=arch)
    a = sd.ndarray(sd.f32, shape=(3, 4))
    out = sd.ndarray(sd.f32, shape=(3, 4))
    idx = sd.ndarray(sd.i32, shape=(2, 2))

    @sd.kernel
    def gather(a: sd.types.ndarray(), out: sd.types.ndarray(), idx: sd.types.ndarray()):
        sd.loop_config(serialize=True)
        for k in range(2):
            i, j = idx[k, 0], idx[k, 1]
            out[i, j] = a[i, j] + 1.0

    a.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    for bad in ((3, 0), (-1, 2), (1, 4), (2, -1)):
        out.fill(0)
        idx.from_numpy(np.array([bad, (1, 2)], np.int32))
        gather(a, out, idx)
        with pytest.raises(SpiradOutOfBoundsError, match=r"kernel gather"):
            sd.sync()
        want = np.zeros((3, 4), np.float32)
        want[1, 2] = 7.0
        np.testing.assert_array_equal(out.to_numpy(), want)
    idx.from_numpy(np.array([(2, 3), (0, 0)], np.int32))
    gather(a, out, idx)
    sd.sync()
    assert out.to_numpy()[2, 3] == 12.0 and out.to_numpy()[0, 0] == 1.0
