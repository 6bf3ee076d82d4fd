"""spirad kernels as torch custom ops (`spirad.interop.torch_op`) under
`torch.compile(fullgraph=True)`: no graph break (fullgraph raises at one), one graph, and the
values and gradients of eager mode and of a float64 numpy reference; `torch.library.opcheck`
checks the schema, the fake implementation and the autograd registration."""
import numpy as np
import pytest
import torch  # a test dependency: missing, it fails (never a skip)

import spirad as sd
import spirad.interop as sdi
from tests.support.archs import exactly, test_archs
from tests.support.interop_kernels import gather_loop, step


def _model(op):
    def model(x, v):
        return (op(torch.tanh(x), v, 0.3) ** 2).sum()
    return model


def _reference(x, v, dt=0.3):
    """loss = sum(y^2), y = t + dt sin(v) t, t = tanh(x): value and analytic gradients."""
    t = np.tanh(x)
    y = t + dt * np.sin(v) * t
    return (y ** 2).sum(), 2 * y * (1 + dt * np.sin(v)) * (1 - t ** 2), 2 * y * dt * np.cos(v) * t


def _value_and_grads(fn, x0, v0):
    x = torch.tensor(x0, requires_grad=True)
    v = torch.tensor(v0, requires_grad=True)
    loss = fn(x, v)
    loss.backward()
    return loss.item(), x.grad.numpy(), v.grad.numpy()


@test_archs(archs=exactly("cpu"), default_fp=sd.f64)
def test_compiled_fullgraph_matches_eager_and_numpy(arch):
    torch._dynamo.reset()
    op = sdi.torch_op(step, outputs={"y": "x"})
    rng = np.random.default_rng(0)
    x0, v0 = rng.uniform(-1, 1, 9), rng.uniform(-1, 1, 9)
    graphs = []

    def count(gm, example_inputs):  # the graphs Dynamo hands the compiler: exactly one
        graphs.append(gm)
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, example_inputs)

    eager = _value_and_grads(_model(op), x0, v0)
    compiled = _value_and_grads(torch.compile(_model(op), fullgraph=True, backend=count), x0, v0)
    assert len(graphs) == 1
    assert any("spirad" in str(n.target) for n in graphs[0].graph.nodes)  # the op, not traced in
    ref = _reference(x0, v0)
    for e, c, r in zip(eager, compiled, ref):
        np.testing.assert_allclose(c, e, rtol=1e-12)
        np.testing.assert_allclose(c, r, rtol=1e-12)


@test_archs(archs=exactly("cpu"), default_fp=sd.f64)
def test_compiled_dynamic_loop_int_input_two_outputs(arch):
    torch._dynamo.reset()
    op = sdi.torch_op(gather_loop, outputs={"out": lambda x, idx, n: idx.shape, "total": (1,)})
    idx = torch.tensor([3, 0, 2, 2, 1], dtype=torch.int32)

    def model(x):
        out, total = op(x * 2.0, idx, 3)
        return out.sum() + total[0]

    def reference(x):  # the same computation in torch, float64
        s = (x * 2.0)[idx.long()]
        for _ in range(3):
            s = torch.sin(s) + 0.5 * s
        return s.sum() + (s * s).sum()

    def value_and_grad(fn):
        x = torch.linspace(-0.8, 0.9, 4, dtype=torch.float64, requires_grad=True)
        loss = fn(x)
        loss.backward()
        return loss.item(), x.grad.numpy()

    ref = value_and_grad(reference)
    compiled = value_and_grad(torch.compile(model, fullgraph=True, backend="aot_eager"))
    eager = value_and_grad(model)
    for r, c, e in zip(ref, compiled, eager):
        np.testing.assert_allclose(c, r, rtol=1e-12)
        np.testing.assert_allclose(e, r, rtol=1e-12)


@test_archs(require=("f64",), default_fp=sd.f64)
def test_opcheck_and_outputs_left_alone_by_backward(arch):
    op = sdi.torch_op(step, outputs={"y": "x"})
    x = torch.rand(5, dtype=torch.float64, requires_grad=True)
    v = torch.rand(5, dtype=torch.float64, requires_grad=True)
    y = op(x, v, 0.1)
    before = y.detach().clone()
    y.backward(torch.ones(5, dtype=torch.float64))
    assert torch.equal(y.detach(), before)
    np.testing.assert_allclose(v.grad.numpy(), (0.1 * torch.cos(v) * x).detach().numpy(),
                               rtol=1e-12)
    torch.library.opcheck(op.op, (x, v, 0.1))  # raises on a failed check


@test_archs(archs=exactly("cpu"), default_fp=sd.f64)
def test_torch_op_refusals(arch):
    @sd.kernel
    def takes_template(a: sd.template(), y: sd.types.ndarray()):
        for i in y:
            y[i] = 1.0

    with pytest.raises(sd.SpiradTypeError, match="cannot be a torch op argument"):
        sdi.torch_op(takes_template, outputs={"y": (3,)})
    with pytest.raises(sd.SpiradValueError, match="not a parameter"):
        sdi.torch_op(step, outputs={"z": "x"})
    op = sdi.torch_op(step, outputs={"y": "x"})
    with pytest.raises(RuntimeError, match="missing value for argument .dt."):  # the schema
        op(torch.zeros(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
