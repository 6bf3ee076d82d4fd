"""PyTorch without copies on the CPU, record-then-backward Tapes inside torch.autograd.Functions,
and the warnings on the copies GPU backends make."""
import warnings

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs
from tests.support.interop_kernels import step

torch = pytest.importorskip("torch")
sdt = pytest.importorskip("spirad.interop.autograd")


@test_archs(archs=exactly("cpu"), default_fp=sd.f64)
def test_kernel_function_shares_memory_on_the_cpu(arch):
    f = sdt.kernel_function(step, outputs={"y": "x"})
    x = torch.rand(6, dtype=torch.float64, requires_grad=True)
    v = torch.rand(6, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no copy warning on the CPU
        y = f(x, v, 0.5)
    call = y.grad_fn.call  # the ctx of our Function: the sd.ndarrays the kernel ran on
    assert np.from_dlpack(call[0]).ctypes.data == x.data_ptr()       # the input's memory
    def pool():
        return [a.ctypes.data for arrays in f.buffers.pool.values() for a in arrays]
    assert np.from_dlpack(call[3]).ctypes.data == y.data_ptr() and y.data_ptr() in pool()
    y.backward(torch.ones(6, dtype=torch.float64))
    assert x.grad.data_ptr() in pool() and v.grad.data_ptr() in pool()  # torch kept our buffers
    xd, vd = x.detach().numpy(), v.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), 1 + 0.5 * np.sin(vd), rtol=1e-12)
    np.testing.assert_allclose(v.grad.numpy(), 0.5 * np.cos(vd) * xd, rtol=1e-12)
    # buffers come back once torch lets go of them: a loop does not allocate anew
    for _ in range(6):
        x.grad = v.grad = None
        f(x, v, 0.5).sum().backward()
    assert sum(len(a) for a in f.buffers.pool.values()) <= f.buffers.CAP
    y2 = f(x, v, 0.5)
    y3 = f(x, v, 0.5)
    assert y2.data_ptr() != y3.data_ptr()  # a buffer in use is never handed out twice
    np.testing.assert_array_equal(y2.detach().numpy(), y3.detach().numpy())


@test_archs(archs=exactly("cpu"), default_fp=sd.f64)
def test_input_modified_before_backward_is_torchs_error(arch):
    f = sdt.kernel_function(step, outputs={"y": "x"})
    x = torch.rand(4, dtype=torch.float64, requires_grad=True)
    v = torch.rand(4, dtype=torch.float64)
    w = x * 1.0
    y = f(w, v, 0.5)
    with torch.no_grad():
        w.add_(1.0)  # the kernel's adjoint would read the new values
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@sd.kernel
def spread(x: sd.types.ndarray(), h: sd.types.ndarray()):
    for i in x:
        s = x[i]
        for _ in range(3):          # a run-time loop: s on the adstack
            s = sd.sin(s) + 0.5 * s
        h[i] = s


@sd.kernel
def mix(h: sd.types.ndarray(), w: sd.f64, y: sd.types.ndarray()):
    for i in h:
        y[i] = h[i] * h[i] * w + h[(i + 1) % h.shape[0]]


class TwoKernels(torch.autograd.Function):
    """A step of two kernels: the forward records them on a Tape, the backward seeds the output
    gradient from torch and runs both adjoints."""

    @staticmethod
    def forward(ctx, x, w):
        xs = sd.from_dlpack(x.detach().contiguous(), needs_grad=True)  # zero-copy on the CPU
        h = sd.ndarray(sd.f64, x.shape, needs_grad=True)
        y = sd.ndarray(sd.f64, x.shape, needs_grad=True)
        tape = sd.ad.Tape()
        with tape:
            spread(xs, h)
            mix(h, w, y)
        ctx.tape, ctx.xs, ctx.y = tape, xs, y
        return torch.from_numpy(y.to_numpy())

    @staticmethod
    def backward(ctx, gy):
        ctx.xs.grad.fill(0)
        ctx.tape.backward(grads={ctx.y: gy})
        return torch.from_numpy(ctx.xs.grad.to_numpy()), None


@test_archs(archs=exactly("cpu", "vulkan"), require=("f64",),
            default_fp=sd.f64)
def test_tape_backward_inside_a_torch_function(arch):
    x = torch.rand(7, dtype=torch.float64, generator=torch.Generator().manual_seed(3),
                   requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.SpiradWarning)  # vulkan: from_dlpack copies
        assert torch.autograd.gradcheck(lambda a: TwoKernels.apply(a, 0.7), (x,), eps=1e-6,
                                        atol=1e-8)


@test_archs(archs=exactly("cpu", "vulkan"))
def test_tape_backward_seeds(arch):
    x = sd.field(sd.f32, shape=4, needs_grad=True)
    y = sd.field(sd.f32, shape=4, needs_grad=True)
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def square():
        for i in x:
            y[i] = x[i] * x[i]

    @sd.kernel
    def total():
        for i in y:
            loss[None] += y[i]

    x.from_numpy(np.arange(4, dtype=np.float32))
    tape = sd.ad.Tape()
    with tape:
        square()
        total()
        with pytest.raises(sd.SpiradAutodiffError, match="after the `with` block"):
            tape.backward(loss=loss)
    assert np.all(x.grad.to_numpy() == 0)  # no loss: the Tape only recorded
    tape.backward(loss=loss)
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * np.arange(4))
    tape.backward(loss=loss)  # accumulates, as torch's backward does
    np.testing.assert_allclose(x.grad.to_numpy(), 4 * np.arange(4))
    tape.zero()
    assert np.all(x.grad.to_numpy() == 0) and loss.grad[None] == 0
    t2 = sd.ad.Tape()
    with t2:
        square()
    t2.backward(grads={y: np.array([1, 0, 2, 0], np.float32)})  # the output's gradient
    np.testing.assert_allclose(x.grad.to_numpy(), [0, 0, 8, 0])
    t2.zero()
    t2.backward(grads={y: torch.full((4,), 0.5)})
    np.testing.assert_allclose(x.grad.to_numpy(), np.arange(4))
    with pytest.raises(sd.SpiradAutodiffError, match="has no gradient"):
        t2.backward(grads={sd.field(sd.f32, shape=4): 1.0})
    with pytest.raises(sd.SpiradAutodiffError, match=r"has shape \(3,\), expected \(4,\)"):
        t2.backward(grads={y: np.ones(3)})
    with pytest.raises(sd.SpiradAutodiffError, match="this Tape has none"):
        t2.grad()
    t2.reset()
    assert t2.calls == []
    with sd.ad.Tape(loss=loss):  # with a loss: evaluated at exit, as before (and in Taichi)
        square()
        total()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * np.arange(4))


@sd.kernel
def double(a: sd.types.ndarray()):
    """Doubles its ndarray in place: the launch whose argument copies the two tests below watch."""
    for i in a:
        a[i] = a[i] * 2


@test_archs(archs=exactly("vulkan"))
def test_silent_copies_warn_once_per_call_site(arch):
    a = np.ones(4, np.float32)
    with pytest.warns(sd.SpiradWarning, match=r"argument 'a' of double: the numpy array is copied "
                                              r"to vulkan device memory before every launch") as w:
        for _ in range(3):
            double(a)  # one site: one warning
    assert len([r for r in w if issubclass(r.category, sd.SpiradWarning)]) == 1
    assert w[0].filename == __file__
    np.testing.assert_array_equal(a, 8)  # copied back
    with pytest.warns(sd.SpiradWarning, match="sd.from_dlpack: the torch tensor was copied to vulkan"):
        sd.from_dlpack(torch.ones(3))
    nd = sd.ndarray(sd.f32, 3)
    with pytest.warns(sd.SpiradWarning, match="DLPack exported a host copy") as w:
        torch.from_dlpack(nd)
    assert w[0].filename == __file__  # the user's line, not torch's
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nd.__dlpack__(copy=True)  # asked for: not silent, no warning


@test_archs(archs=exactly("cpu"))
def test_no_copy_warnings_on_the_cpu(arch):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        double(np.ones(4, np.float32))
        double(torch.ones(4))
        nd = sd.from_dlpack(torch.ones(3))
        torch.from_dlpack(nd)
