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
from tests.support.archs import test_archs

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
            import taichi.ui  # noqa: F401
    finally:
        taichi_alias.uninstall()


@test_archs(["cpu", "vulkan"])
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
