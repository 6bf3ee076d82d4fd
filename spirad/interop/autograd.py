"""A spirad kernel and its adjoint as one `torch.autograd.Function`: a simulation step becomes a
layer of a torch model, trained by torch's optimisers.

Why here and not in users' code: the wrapping has a few rules that are easy to get wrong (inputs
copied into ndarrays with gradients, outputs allocated zeroed, output gradients seeded before the
adjoint, input gradients cleared), and a kernel's adjoint is only right when its inputs still hold
the values of the forward launch.

    import spirad.interop.autograd as sdt

    @sd.kernel
    def step(x: sd.types.ndarray(), v: sd.types.ndarray(), dt: sd.f64, y: sd.types.ndarray()):
        for i in x:
            y[i] = x[i] + dt * sd.sin(v[i])

    f = sdt.kernel_function(step, outputs={"y": "x"})   # y: shape and dtype of x
    y = f(x, v, 0.1)                                    # torch tensors in, a torch tensor out
    y.sum().backward()                                  # x.grad, v.grad from step.grad

The returned function takes the kernel's arguments in order, without the outputs; ndarray
parameters take torch tensors (differentiable when they require grad), scalar parameters numbers
(constants). `outputs` maps each output parameter to its shape: the name of an input (same shape
and dtype), a shape tuple (dtype of the first tensor input), or a function of the input tensors by
name returning a shape. It returns one tensor, or a tuple for several outputs.

Rules for the kernel (as for `kernel.grad`, docs/autodiff.md): it must not write its inputs, and
outputs start at zero (so `y[i] += ...` is fine). Each call copies the tensors into fresh
`sd.ndarray`s on the current backend (any arch) and copies results back, so CPU tensors work on
every backend; tensors on other torch devices are moved to the CPU and results returned there.
"""
from __future__ import annotations

import numbers

import numpy as np
import torch

from kernel_ir.errors import SpiradTypeError, SpiradValueError

from ..ndarray import Ndarray
from ..types import NdarrayType
from .arrays import _NP_TO_DTYPE


def _sd_dtype(t: torch.Tensor):
    dt = _NP_TO_DTYPE.get(np.dtype(str(t.dtype).replace("torch.", "")))
    if dt is None:
        raise SpiradTypeError(f"tensor dtype {t.dtype} is not supported; use float32 / float64 "
                              f"(differentiable) or int32 / int64")
    return dt


def _to_sd(t: torch.Tensor, needs_grad: bool) -> Ndarray:
    a = t.detach().cpu().contiguous().numpy()
    dt = _sd_dtype(t)
    nd = Ndarray(dt, a.shape, needs_grad=needs_grad and dt.is_float)
    nd.from_numpy(a)
    return nd


def kernel_function(kernel, outputs: dict):
    """`fn(*args) -> tensor(s)`: `kernel` as a torch.autograd.Function (see the module doc)."""
    params = kernel._annotations()
    names = [n for n, _ in params]
    for o in outputs:
        if o not in names:
            raise SpiradValueError(f"output {o!r} is not a parameter of kernel {kernel.fn.__name__} "
                                   f"({', '.join(names)})")
        if not isinstance(dict(params)[o], NdarrayType):
            raise SpiradTypeError(f"output {o!r} of {kernel.fn.__name__} must be a "
                                  f"sd.types.ndarray() parameter")
    inputs = [n for n in names if n not in outputs]
    tensor_params = {n for n, a in params if isinstance(a, NdarrayType)}

    def output_shape(name, given):
        spec = outputs[name]
        if isinstance(spec, str):
            t = given[spec]
            return tuple(t.shape), t.dtype
        first = next((t for t in given.values() if isinstance(t, torch.Tensor)), None)
        dtype = first.dtype if first is not None else torch.float64
        if callable(spec):
            spec = spec(**given)
        if isinstance(spec, numbers.Integral):
            spec = (int(spec),)
        return tuple(spec), dtype

    class KernelFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            if len(args) != len(inputs):
                raise SpiradTypeError(f"{kernel.fn.__name__} as a torch Function takes "
                                      f"{len(inputs)} argument(s) ({', '.join(inputs)}), got "
                                      f"{len(args)}")
            given = dict(zip(inputs, args))
            bound = {}
            for n, a in given.items():
                if n in tensor_params:
                    if not isinstance(a, torch.Tensor):
                        raise SpiradTypeError(f"argument {n!r} must be a torch tensor, got "
                                              f"{type(a).__name__}")
                    bound[n] = _to_sd(a, needs_grad=True)
                else:
                    bound[n] = a
            outs = {}
            for o in outputs:
                shape, dtype = output_shape(o, given)
                outs[o] = bound[o] = _to_sd(torch.zeros(shape, dtype=dtype), needs_grad=True)
            call = tuple(bound[n] for n in names)
            kernel(*call)
            ctx.call, ctx.outs = call, outs
            ctx.devices = {n: a.device for n, a in given.items() if isinstance(a, torch.Tensor)}
            dev = next(iter(ctx.devices.values()), torch.device("cpu"))
            res = tuple(torch.from_numpy(outs[o].to_numpy()).to(dev) for o in outputs)
            return res if len(res) > 1 else res[0]

        @staticmethod
        def backward(ctx, *grads):
            call = ctx.call
            for a in call:
                if isinstance(a, Ndarray) and a.grad is not None:
                    a.grad.fill(0)
            for o, g in zip(outputs, grads):
                if g is not None:
                    ctx.outs[o].grad.from_numpy(g.detach().cpu().contiguous().numpy())
            kernel.grad(*call)
            res = []
            for n, a in zip(names, call):
                if n in outputs:
                    continue
                if n in tensor_params and a.grad is not None and ctx.needs_input_grad[len(res)]:
                    res.append(torch.from_numpy(a.grad.to_numpy()).to(ctx.devices[n]))
                else:
                    res.append(None)
            return tuple(res)

    KernelFunction.__name__ = KernelFunction.__qualname__ = f"{kernel.fn.__name__}_Function"

    def fn(*args):
        return KernelFunction.apply(*args)

    fn.Function = KernelFunction
    fn.__name__ = kernel.fn.__name__
    fn.__doc__ = f"spirad kernel {kernel.fn.__name__} as a torch.autograd.Function"
    return fn
