"""spirad kernels as torch.autograd Functions: torch.autograd.gradcheck in float64 (central
differences against the kernel's adjoint), on the CPU and on Vulkan where f64 is available."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs
from tests.support.interop_kernels import step

torch = pytest.importorskip("torch")
sdt = pytest.importorskip("spirad.interop.autograd")


@sd.kernel
def iterate(x: sd.types.ndarray(), w: sd.types.ndarray(), n: sd.i32, out: sd.types.ndarray(),
            total: sd.types.ndarray()):
    for i in x:
        s = x[i]
        for _ in range(n):          # a run-time trip count: s lives on the adstack
            s = sd.sin(s) * w[i] + 0.1 * s * s
        out[i] = s
        total[0] += s


def _inputs(n, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(n, dtype=torch.float64, generator=g, requires_grad=True) for _ in range(2)]


@test_archs(require=("f64",), default_fp=sd.f64)
def test_gradcheck_elementwise(arch):
    f = sdt.kernel_function(step, outputs={"y": "x"})
    x, v = _inputs(7, 0)
    y = f(x, v, 0.3)
    np.testing.assert_allclose(y.detach().numpy(),
                               (x + 0.3 * torch.sin(v) * x).detach().numpy(), rtol=1e-12)
    assert torch.autograd.gradcheck(lambda a, b: f(a, b, 0.3), (x, v), eps=1e-6, atol=1e-8)


@test_archs(require=("f64",), default_fp=sd.f64)
def test_gradcheck_dynamic_loop_two_outputs(arch):
    f = sdt.kernel_function(iterate, outputs={"out": "x", "total": (1,)})
    x, w = _inputs(5, 1)
    out, total = f(x, w, 4)
    ref = x.detach().clone()
    for _ in range(4):
        ref = torch.sin(ref) * w.detach() + 0.1 * ref * ref
    np.testing.assert_allclose(out.detach().numpy(), ref.numpy(), rtol=1e-12)
    np.testing.assert_allclose(total.detach().numpy(), [ref.sum().item()], rtol=1e-12)
    assert torch.autograd.gradcheck(lambda a, b: f(a, b, 4), (x, w), eps=1e-6, atol=1e-8)


@test_archs(archs=exactly("cpu"), default_fp=sd.f64)
def test_layer_in_a_torch_model_trains(arch):
    f = sdt.kernel_function(step, outputs={"y": "x"})
    x = torch.linspace(0.5, 1.5, 8, dtype=torch.float64)
    target = x * 1.4
    v = torch.zeros(8, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([v], lr=0.05)
    for _ in range(200):
        opt.zero_grad()
        loss = ((f(x, v, 1.0) - target) ** 2).mean()
        loss.backward()
        opt.step()
    assert loss.item() < 1e-6  # sin(v) -> 0.4
    np.testing.assert_allclose(torch.sin(v).detach().numpy(), 0.4, atol=1e-3)
    assert x.grad is None  # an input that does not require grad gets none


@test_archs(archs=exactly("cpu"), default_fp=sd.f64)
def test_wrapping_errors(arch):
    with pytest.raises(sd.SpiradValueError, match="not a parameter"):
        sdt.kernel_function(step, outputs={"z": "x"})
    with pytest.raises(sd.SpiradTypeError, match="must be a sd.types.ndarray"):
        sdt.kernel_function(step, outputs={"dt": "x"})
    f = sdt.kernel_function(step, outputs={"y": "x"})
    with pytest.raises(sd.SpiradTypeError, match="takes 3 argument"):
        f(torch.zeros(2, dtype=torch.float64))
