"""`SPIRAD_QUADRANTS_ARCH` (spirad.options): a program run through the `quadrants` module that asks
for `qd.cpu` (as Genesis does under `gs.cpu`) runs its kernels on the arch the switch names, here
Metal (emulated), while its host data stays where it was (torch CPU tensors, copied at each
launch); without the switch the program's own arch is used (docs/metal.md, "Genesis on Metal")."""
import textwrap

import numpy as np

from tests.support.archs import arch_or_skip
from tests.support.quadrants_process import run_program


# a gradient kernel over ndarray arguments with a run-time loop (an autodiff stack), asking for
# the CPU as Genesis' `gs.init(backend=gs.cpu)` does
PROGRAM = textwrap.dedent('''
    import json
    import numpy as np
    import torch
    import quadrants as qd
    import spirad.runtime.state

    qd.init(arch=qd.cpu)

    @qd.kernel
    def k(x: qd.types.ndarray(), n: qd.types.ndarray(), out: qd.types.ndarray()):
        for i in x:
            v = x[i]
            for _ in range(n[i]):
                v = qd.sin(v) * 1.5
            out[i] = v

    x = qd.ndarray(qd.f32, 16, needs_grad=True)
    out = qd.ndarray(qd.f32, 16, needs_grad=True)
    x.from_numpy(np.linspace(-1.0, 1.0, 16, dtype=np.float32))
    n = torch.arange(16, dtype=torch.int32) % 4  # a torch CPU tensor, copied at each launch
    k(x, n, out)
    out.grad.fill(1.0)
    k.grad(x, n, out)
    print(json.dumps({"arch": spirad.runtime.state.backend().name, "out": out.to_numpy().tolist(),
                      "grad": x.grad.to_numpy().tolist()}))
''')


def _run(tmp_path, arch):
    chosen = {"SPIRAD_QUADRANTS_ARCH": arch} if arch else {}
    r = run_program(tmp_path, PROGRAM, drop=("SPIRAD_QUADRANTS_ARCH",), name="qd_arch.py", **chosen)
    import json
    return json.loads(r.stdout.strip().splitlines()[-1])


def _reference():
    x = np.linspace(-1.0, 1.0, 16)
    n = np.arange(16) % 4
    v, d = x.copy(), np.ones(16)
    for i in range(16):
        for _ in range(n[i]):
            d[i] *= 1.5 * np.cos(v[i])
            v[i] = 1.5 * np.sin(v[i])
    return v, d


def test_the_switch_runs_a_quadrants_program_asking_for_cpu_on_metal(tmp_path):
    arch_or_skip("metal")
    own, forced = _run(tmp_path, None), _run(tmp_path, "metal")
    assert own["arch"] == "cpu" and forced["arch"] == "metal"
    v, d = _reference()
    for res in (own, forced):
        np.testing.assert_allclose(res["out"], v, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(res["grad"], d, rtol=1e-4, atol=1e-5)
