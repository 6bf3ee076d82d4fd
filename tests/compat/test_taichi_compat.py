"""Running Taichi programs unchanged (issue #23): the `import taichi` alias
(spirad.compat.taichi_alias), `python -m spirad.compat.run_as_taichi`, and torch tensors that
require grad getting a `.grad` as Taichi gives them."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, test_archs

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROGRAM = textwrap.dedent('''
    import math
    import taichi as ti
    from taichi.lang.impl import current_cfg
    from taichi.lang.exception import TaichiRuntimeError
    import taichi.math as tm

    ti.init(arch=ti.cuda, default_fp=ti.f32)   # --arch overrides it, like TI_ARCH
    x = ti.field(float)
    ti.root.dense(ti.l, 2).dense(ti.i, 3).place(x)
    ti.root.lazy_grad()

    @ti.kernel
    def f():
        for i, t in x:
            x[i, t] = math.exp(0.0) * i + t * tm.pi

    f()
    print(current_cfg().arch, x.shape, x[2, 1], ti is __import__("spirad"),
          issubclass(TaichiRuntimeError, Exception), sep="|")
''')


def test_run_as_taichi_runs_a_taichi_file_unchanged(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=REPO)
    r = subprocess.run([sys.executable, "-m", "spirad.compat.run_as_taichi", "--arch", "cpu",
                        str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    arch, shape, value, same, is_error = r.stdout.strip().splitlines()[-1].split("|")
    assert (arch, shape, same, is_error) == ("cpu", "(3, 2)", "True", "True"), r.stdout
    assert float(value) == pytest.approx(2 + np.pi, rel=1e-6)


def test_alias_refuses_unknown_taichi_modules():
    from spirad.compat import taichi_alias
    taichi_alias.install()
    try:
        import taichi
        assert taichi is sd
        with pytest.raises(ModuleNotFoundError, match="alias of spirad"):
            import taichi.aot  # noqa: F401
    finally:
        taichi_alias.uninstall()


@test_archs(EVERY_ARCH)
def test_torch_tensor_gets_grad_as_in_taichi(arch):
    torch = pytest.importorskip("torch")

    @sd.kernel
    def f(x: sd.types.ndarray(), y: sd.types.ndarray()):
        for i in x:
            y[0] += x[i] * x[i]

    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = torch.zeros(1, requires_grad=True)
    with torch.no_grad():  # a leaf that requires grad is written only outside grad mode (torch)
        f(x, y)
    assert x.grad is not None and y.grad is not None  # allocated by the launch, zeros
    assert y.item() == 14 and x.grad.tolist() == [0, 0, 0]
    y.grad.fill_(1.0)
    f.grad(x, y)
    assert x.grad.tolist() == [2, 4, 6]
    loss = torch.zeros(1, requires_grad=True)
    x.grad.zero_()
    with sd.ad.Tape(loss=loss):  # a torch loss, as Taichi allows
        f(x, loss)
    assert loss.item() == 14 and x.grad.tolist() == [2, 4, 6]


# -- what Taichi runs and plain spirad refuses: under the alias, run as Taichi, with a warning --

@pytest.fixture
def alias(monkeypatch):
    """The Taichi alias installed for the test (its defaults included), removed after."""
    from spirad.compat import taichi_alias
    for name in taichi_alias.TAICHI_DEFAULTS:
        monkeypatch.delenv(name, raising=False)
    taichi_alias.install()
    yield taichi_alias
    taichi_alias.uninstall()


def _read_then_overwrite():
    """Each thread reads p[i] into the loss, then adds 1 to it: the adjoint, which runs after the
    launch, reads the new p[i]. A fresh kernel each call (no adjoint compiled earlier)."""
    p = sd.field(sd.f32, shape=4, needs_grad=True)
    w = sd.field(sd.f32, shape=(), needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def k():
        for i in p:
            loss[None] += w[None] * p[i] * p[i]
            p[i] += 1.0

    def run():
        p.from_numpy(np.arange(4, dtype=np.float32))
        w[None] = 0.5
        with sd.ad.Tape(loss=loss):
            k()
        return w.grad[None], p.grad.to_numpy()
    return run


@test_archs()
def test_alias_differentiates_overwritten_reads_as_taichi(arch, alias, monkeypatch):
    """Taichi 1.7.4 differentiates this kernel with the overwritten p (w.grad = sum (p+1)^2 = 30,
    p.grad = 2 w (p+1): measured with Taichi on this program); through the alias spirad gives the
    same numbers with a SpiradWarning naming the read. Plain spirad, and the alias with
    SPIRAD_AD_OVERWRITTEN_READS=error, refuse it (the right values would be 14 and 2 w p)."""
    with pytest.warns(sd.SpiradWarning, match="reads 'p' and also overwrites it"):
        wg, pg = _read_then_overwrite()()
    assert wg == 30.0
    np.testing.assert_array_equal(pg, [1, 2, 3, 4])
    monkeypatch.setenv("SPIRAD_AD_OVERWRITTEN_READS", "error")  # the user's setting wins
    with pytest.raises(sd.SpiradAutodiffError, match="reads 'p' and also overwrites it"):
        _read_then_overwrite()()
    monkeypatch.delenv("SPIRAD_AD_OVERWRITTEN_READS")
    alias.uninstall()  # plain spirad keeps refusing
    with pytest.raises(sd.SpiradAutodiffError, match="reads 'p' and also overwrites it"):
        _read_then_overwrite()()


@test_archs()
def test_alias_writes_torch_leaf_as_taichi(arch, alias, monkeypatch):
    """Taichi writes a torch leaf that requires grad (grad mode on, no Tape); torch would refuse
    the in-place change, and so does plain spirad. Through the alias it is written, with a
    SpiradWarning; SPIRAD_TORCH_LEAF_WRITES=error restores the refusal."""
    torch = pytest.importorskip("torch")

    @sd.kernel
    def add(y: sd.types.ndarray()):
        for i in y:
            y[i] += 1.0

    y = torch.zeros(3, requires_grad=True)
    with pytest.warns(sd.SpiradWarning, match="torch leaf tensor that requires grad"):
        add(y)
    assert y.detach().tolist() == [1, 1, 1]
    monkeypatch.setenv("SPIRAD_TORCH_LEAF_WRITES", "error")
    with pytest.raises(sd.SpiradValueError, match="torch leaf tensor that requires grad"):
        add(y)
    monkeypatch.delenv("SPIRAD_TORCH_LEAF_WRITES")
    alias.uninstall()
    with pytest.raises(sd.SpiradValueError, match="torch leaf tensor that requires grad"):
        add(y)
    assert y.detach().tolist() == [1, 1, 1]  # refused before the launch


def test_alias_profiler_off_warns_as_taichi(alias, monkeypatch):
    """Taichi warns and reports nothing when a profiler call finds the profiler off; plain
    spirad refuses (nothing was recorded). Through the alias: a SpiradWarning and no table;
    SPIRAD_PROFILER_OFF=error restores the refusal."""
    sd.init(arch=sd.cpu)
    with pytest.warns(sd.SpiradWarning, match="kernel profiler is off"):
        sd.profiler.print_kernel_profiler_info()
    with pytest.warns(sd.SpiradWarning, match="kernel profiler is off"):
        assert sd.profiler.get_kernel_profiler_total_time() == 0.0
    monkeypatch.setenv("SPIRAD_PROFILER_OFF", "error")
    with pytest.raises(sd.SpiradError, match="kernel profiler is off"):
        sd.profiler.print_kernel_profiler_info()
    monkeypatch.delenv("SPIRAD_PROFILER_OFF")
    alias.uninstall()
    with pytest.raises(sd.SpiradError, match="kernel profiler is off"):
        sd.profiler.clear_kernel_profiler_info()


@test_archs()
def test_alias_wraps_int_args_as_taichi(arch, alias, monkeypatch):
    """Taichi passes an integer argument outside its annotated type as its low bits (`a: i8`
    given 255 reads -1; values measured with Taichi 1.7.4); it refuses a negative value for an
    unsigned type. Through the alias spirad wraps the same way, with a SpiradWarning;
    SPIRAD_INT_ARGS=error, and plain spirad, refuse it."""
    out = sd.field(sd.i64, shape=2)

    @sd.kernel
    def k(a: sd.i8, b: sd.u8):
        out[0] = a
        out[1] = b

    k(5, 7)  # in range: no warning (and metal refuses i8 here, outside pytest.warns)
    assert out.to_numpy().tolist() == [5, 7]
    for a, b, want in ((255, 256, [-1, 0]), (-129, 300, [127, 44])):
        with pytest.warns(sd.SpiradWarning, match="does not fit (i8|u8): passed as"):
            k(a, b)
        assert out.to_numpy().tolist() == want
    with pytest.raises(sd.SpiradValueError, match="'b' = -1 does not fit u8"):
        k(0, -1)
    monkeypatch.setenv("SPIRAD_INT_ARGS", "error")
    with pytest.raises(sd.SpiradValueError, match="'a' = 255 does not fit i8"):
        k(255, 0)
    monkeypatch.delenv("SPIRAD_INT_ARGS")
    alias.uninstall()
    with pytest.raises(sd.SpiradValueError, match="'a' = 128 does not fit i8"):
        k(128, 0)


@test_archs()
def test_runtime_default_ip_assigned_after_init(arch):
    """Taichi's `impl.get_runtime().default_ip = t` (a plain attribute there) types the integer
    literals of kernels compiled from then on, unsigned types included: 0xFFFFFFFF stored in a
    u32 field as a u32 literal (with i32 it would not fit)."""
    from spirad.runtime.program_hooks import get_runtime
    for dt, val in ((sd.u32, 0xFFFFFFFF), (sd.u64, 0xFFFFFFFFFFFFFFFF)):
        get_runtime().default_ip = dt
        assert get_runtime().default_ip == dt
        f = sd.field(dt, shape=4)

        @sd.kernel
        def fill():
            for i in f:
                f[i] = val

        fill()
        assert f.to_numpy().tolist() == [val] * 4
    get_runtime().default_fp = sd.f64
    g = sd.field(float, shape=())
    assert g.dtype == sd.f64
    with pytest.raises(sd.SpiradTypeError, match="give an integer dtype"):
        get_runtime().default_ip = sd.f32


def test_taichi_impl_get_runtime():
    """`taichi.lang.impl.get_runtime()`: default types, the arch through `prog.config()`, and
    the count of kernel programs compiled in this init() (one per kernel and signature)."""
    from spirad.compat import taichi_alias
    taichi_alias.install()
    try:
        from taichi.lang import impl
        sd.init(arch=sd.cpu, default_fp=sd.f64)
        rt = impl.get_runtime()
        assert rt.default_fp == sd.f64 and rt.default_ip == sd.i32
        assert rt.prog.config().arch == sd.cpu
        assert rt.get_num_compiled_functions() == 0

        @sd.kernel
        def k(a: sd.types.ndarray()):
            for i in a:
                a[i] += 1

        k(sd.ndarray(sd.f32, 3))
        k(sd.ndarray(sd.f32, 4))  # the same signature: no new program
        assert rt.get_num_compiled_functions() == 1
        k(sd.ndarray(sd.i32, 3))
        assert rt.get_num_compiled_functions() == 2
        rt.materialize()
        sd.init(arch=sd.cpu)
        assert rt.get_num_compiled_functions() == 0
    finally:
        taichi_alias.uninstall()


@test_archs(EVERY_ARCH)
def test_taichi_lang_ops_in_python_scope_and_kernels(arch):
    """`taichi.lang.ops` (Taichi's operator functions): the same functions in Python scope and
    in kernels."""
    from spirad.compat import taichi_alias
    taichi_alias.install()
    try:
        import taichi as ti
        ops = ti.lang.ops
        v = sd.Vector([2, 0, 3])
        np.testing.assert_array_equal(ops.add(v, sd.Vector([1, 1, 1])), [3, 1, 4])
        np.testing.assert_array_equal(ops.logical_not(v), [False, True, False])
        assert ops.abs(-2.5) == 2.5
        out = sd.field(sd.i32, shape=3)

        @sd.kernel
        def k():
            w = ops.mul(sd.Vector([1, 2, 3]), 2)
            out[0] = ops.add(w[0], w[2])
            out[1] = ops.logical_not(w[1])
            ops.atomic_add(out[2], ops.neg(w[1]))

        k()
        np.testing.assert_array_equal(out.to_numpy(), [8, 0, -4])
    finally:
        taichi_alias.uninstall()


@test_archs()
def test_alias_lang_simt_loop_unique_has_clangpp(arch, alias):
    """`from taichi.lang.simt import subgroup` is spirad.simt's; `taichi.lang.misc.loop_unique`
    (a hint) returns its value in kernels; `taichi.lang.util.has_clangpp()` is False (no
    SourceBuilder: Taichi's tests of external C++ functions skip)."""
    from taichi.lang.misc import loop_unique
    from taichi.lang.simt import subgroup
    from taichi.lang.util import has_clangpp
    assert subgroup is sd.simt.subgroup and has_clangpp() is False
    x = sd.field(sd.i32, shape=4)
    y = sd.field(sd.i32, shape=8)

    @sd.kernel
    def k():
        for i in x:
            y[loop_unique(x[i] + 1)] += 1

    x.from_numpy(np.array([0, 2, 4, 6], np.int32))
    k()
    assert y.to_numpy().tolist() == [0, 1, 0, 1, 0, 1, 0, 1]
