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
outputs start at zero (so `y[i] += ...` is fine).

Memory: on backends that compute in host memory (the CPU) nothing is copied. The kernel reads the
input tensors' memory through DLPack (a non-contiguous tensor is made contiguous first), writes
into output tensors allocated (zeroed) for the call and returned as they are, and the adjoint
writes the input gradients into tensors allocated for the backward pass and returned to torch;
the one copy is of each incoming output gradient, which the adjoint consumes (a store zeroes
its target's gradient) and torch may share. The inputs are saved for backward
(`ctx.save_for_backward`), so modifying one in place between forward and backward is torch's
usual error instead of a wrong gradient. On GPU backends each call copies the tensors into
device memory and the results back (a `SpiradWarning` says so, once per call site); tensors on
other torch devices are moved to the CPU and the results returned to their device.
"""
from __future__ import annotations

import numbers
import sys
import threading

import numpy as np
import torch

from kernel_ir.errors import SpiradTypeError, SpiradValueError

from ..runtime import state as _state
from ..data.ndarray import Ndarray
from ..tracebacks import api, warn_user
from ..types import NdarrayType
from .arrays import _NP_TO_DTYPE, alias, element_type, host_array

__all__ = ["kernel_function"]


def _sd_dtype(t: torch.Tensor):
    dt = _NP_TO_DTYPE.get(np.dtype(str(t.dtype).replace("torch.", "")))
    if dt is None:
        raise SpiradTypeError(f"tensor dtype {t.dtype} is not supported; use float32 / float64 "
                              f"(differentiable) or int32 / int64")
    return dt


def _host(t: torch.Tensor) -> torch.Tensor:
    """`t`'s values as a contiguous CPU tensor without autograd history (no copy if it is one)."""
    a = t.detach()
    if a.device.type != "cpu":
        a = a.cpu()
    return a.contiguous()


def _bind(t, what: str) -> Ndarray:
    """An sd.ndarray over the memory of `t` (a torch tensor, through DLPack, or a numpy array:
    spirad's own buffers are bound as numpy arrays, so the tensor over them has no reference
    from spirad and torch may keep it as a `.grad` without a copy) on host-memory backends,
    else a device copy of it."""
    if isinstance(t, torch.Tensor):
        _sd_dtype(t)
        arr = host_array(t)
    else:
        arr = t
    dt, comp, shape = element_type(arr, None, what)
    nd, zero_copy = alias(arr, dt, comp, shape)
    if not zero_copy:
        _state.backend().write(nd._storage(), arr)
    return nd


class _HostBuffers:
    """Host memory for the outputs and gradients of one kernel_function, reused once torch has
    let go of it.

    Why: the cost of a fresh 16 MB buffer is not the allocation but its first touch (a page
    fault per 4 KiB, several times the kernel's own time on 4M floats), and torch's zero fill
    runs in its thread pool, slower still. A buffer handed out as a tensor (`torch.from_numpy`)
    is referenced by that tensor's storage, and so by every view, numpy array or autograd node
    that still uses it; when only this pool refers to it, it is free and is zeroed in place
    (a memset of warm pages) for the next call. At most `CAP` buffers per shape and dtype are
    kept; beyond that, calls get fresh (calloc'd, already zero) memory.
    """
    CAP = 8

    def __init__(self):
        self.pool: dict = {}
        self.lock = threading.Lock()

    def get(self, shape, np_dtype, zero: bool) -> np.ndarray:
        """A buffer (zeroed if `zero`); `torch.from_numpy` gives the tensor over it."""
        key = (tuple(shape), np.dtype(np_dtype).str)
        with self.lock:
            arrays = self.pool.setdefault(key, [])
            for a in arrays:
                if sys.getrefcount(a) == 3:  # this list, `a`, getrefcount's argument: free
                    if zero:
                        a.fill(0)
                    return a
            a = np.zeros(shape, np_dtype)
            if len(arrays) < self.CAP:
                arrays.append(a)
            return a


def _grad_buffer(nd: Ndarray, host, buffers=None):
    """Give `nd` a zeroed gradient: over a torch tensor from `buffers`, returned (host-memory
    backends), or a device buffer (returns None; read back with `_result`)."""
    if host:
        g = buffers.get(nd.full_shape, nd.dtype.np, zero=True)
        nd.grad = _bind(g, "a gradient")
        return torch.from_numpy(g)
    nbytes = int(np.prod(nd.full_shape, dtype=np.int64)) * nd.dtype.nbytes
    nd.grad = Ndarray._alias(_state.backend().allocate_ndarray(max(nbytes, 8)), nd.dtype, nd.shape,
                             comp_shape=nd.comp_shape)
    return None


def _result(nd: Ndarray, tensor, device) -> torch.Tensor:
    """The torch tensor of `nd`'s values: `tensor` itself when the kernel wrote into its memory,
    else a copy read back from the device."""
    if tensor is None:
        tensor = torch.from_numpy(nd.to_numpy())
    return tensor if device.type == "cpu" else tensor.to(device)


class KernelCall:
    """One kernel's forward and adjoint launches on torch tensors, shared by `kernel_function`
    (a torch.autograd.Function) and `spirad.interop.torch_library.torch_op` (a torch custom op):
    the parameter checks, output allocation and gradient seeding live here once."""

    def __init__(self, kernel, outputs: dict):
        params = kernel._annotations()
        self.kernel, self.outputs, self.params = kernel, outputs, params
        self.names = [n for n, _ in params]
        self.kname = kname = kernel.fn.__name__
        for o in outputs:
            if o not in self.names:
                raise SpiradValueError(f"output {o!r} is not a parameter of kernel {kname} "
                                       f"({', '.join(self.names)})")
            if not isinstance(dict(params)[o], NdarrayType):
                raise SpiradTypeError(f"output {o!r} of {kname} must be a "
                                      f"sd.types.ndarray() parameter")
        self.inputs = [n for n in self.names if n not in outputs]
        self.tensor_params = {n for n, a in params if isinstance(a, NdarrayType)}
        self.buffers = _HostBuffers()

    def output_shape(self, name, given):
        """(shape, torch dtype) of output `name` for the inputs `given` (by name); works on
        fake tensors too (torch.compile's shape propagation)."""
        spec = self.outputs[name]
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

    def given(self, args) -> dict:
        """The inputs by name, their count checked."""
        if len(args) != len(self.inputs):
            raise SpiradTypeError(f"{self.kname} as a torch function takes {len(self.inputs)} "
                                  f"argument(s) ({', '.join(self.inputs)}), got {len(args)}")
        return dict(zip(self.inputs, args))

    def _host_backend(self) -> bool:
        be = _state.backend()
        host = be.host_storage(np.zeros(8, np.uint8)) is not None
        if not host:
            warn_user(f"{self.kname} as a torch function on {be.name}: every call copies its "
                      f"tensors to device memory and the results back (the CPU backend shares "
                      f"their memory)")
        return host

    def _bind_inputs(self, given) -> dict:
        bound = {}
        for n, a in given.items():
            if n in self.tensor_params:
                if not isinstance(a, torch.Tensor):
                    raise SpiradTypeError(f"argument {n!r} must be a torch tensor, got "
                                          f"{type(a).__name__}")
                bound[n] = _bind(_host(a), f"argument {n!r} of {self.kname}")
            else:
                bound[n] = a
        return bound

    def forward(self, given: dict):
        """Run the kernel: (the launch's arguments, output ndarrays by name, the output tensors
        in `outputs` order, host flag)."""
        host = self._host_backend()
        bound = self._bind_inputs(given)
        outs, out_tensors = {}, {}
        for o in self.outputs:
            shape, dtype = self.output_shape(o, given)
            np_dtype = _sd_dtype(torch.empty(0, dtype=dtype)).np
            if host:
                a = self.buffers.get(shape, np_dtype, zero=True)
                outs[o] = bound[o] = _bind(a, f"output {o!r} of {self.kname}")
                out_tensors[o] = torch.from_numpy(a)
            else:
                outs[o] = bound[o] = _bind(np.zeros(shape, np_dtype), f"output {o!r}")
                out_tensors[o] = None
        call = tuple(bound[n] for n in self.names)
        self.kernel(*call)
        self.kernel.release_plans()  # the plan would keep this call's buffers alive
        devices = [a.device for a in given.values() if isinstance(a, torch.Tensor)]
        dev = devices[0] if devices else torch.device("cpu")
        res = tuple(_result(outs[o], out_tensors[o], dev) for o in self.outputs)
        return call, outs, res, host

    def rebind(self, given: dict, out_values: dict):
        """The launch arguments of a forward run, from its inputs and its outputs' values (the
        custom op's backward gets tensors, not the forward's ndarrays)."""
        host = self._host_backend()
        bound = self._bind_inputs(given)
        outs = {}
        for o, t in out_values.items():
            outs[o] = bound[o] = _bind(_host(t), f"output {o!r} of {self.kname}")
        return tuple(bound[n] for n in self.names), outs, host

    def differentiable(self, n: str, a) -> bool:
        """Whether input `n` (value `a`) gets a gradient: a floating-point tensor."""
        return n in self.tensor_params and isinstance(a, torch.Tensor) and a.is_floating_point()

    def backward(self, call, outs, host, grads, wanted: dict, devices: dict) -> list:
        """Run the adjoint with output gradients `grads` (None: zero); the gradient of each
        input in `wanted` (name -> True), None for the others, in input order."""
        by_name = dict(zip(self.names, call))
        in_grads = {}
        for n in self.inputs:
            nd = by_name[n]
            if wanted.get(n) and nd.dtype.is_float:
                in_grads[n] = _grad_buffer(nd, host, self.buffers)
        for o, g in zip(self.outputs, grads):
            nd = outs[o]
            if g is None:
                _grad_buffer(nd, host, self.buffers)
            elif host:  # the adjoint consumes (zeroes) it, and torch may share g: a copy
                buf = self.buffers.get(nd.full_shape, nd.dtype.np, zero=False)
                np.copyto(buf, g.detach().cpu().numpy())
                nd.grad = _bind(buf, f"the gradient of output {o!r}")
            else:
                _grad_buffer(nd, False)
                nd.grad.from_numpy(_host(g).numpy())
        self.kernel.grad(*call)
        self.kernel.release_plans()
        res = [_result(by_name[n].grad, in_grads[n], devices[n]) if n in in_grads else None
               for n in self.inputs]
        for nd in call:  # the aliases keep the call's memory: drop the gradients now
            if isinstance(nd, Ndarray):
                nd.grad = None
        return res


@api
def kernel_function(kernel, outputs: dict):
    """`fn(*args) -> tensor(s)`: `kernel` as a torch.autograd.Function (see the module doc)."""
    kc = KernelCall(kernel, outputs)
    kname, inputs, tensor_params = kc.kname, kc.inputs, kc.tensor_params

    class KernelFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            given = kc.given(args)
            call, outs, res, host = kc.forward(given)
            ctx.save_for_backward(*[a for n, a in given.items() if n in tensor_params])
            ctx.call, ctx.outs, ctx.host = call, outs, host
            ctx.devices = {n: a.device for n, a in given.items() if isinstance(a, torch.Tensor)}
            return res if len(res) > 1 else res[0]

        @staticmethod
        def backward(ctx, *grads):
            ctx.saved_tensors  # noqa: B018 - torch's check: no input was modified in place
            wanted = {n: n in tensor_params and ctx.needs_input_grad[k]
                      for k, n in enumerate(inputs)}
            return tuple(kc.backward(ctx.call, ctx.outs, ctx.host, grads, wanted, ctx.devices))

    KernelFunction.__name__ = KernelFunction.__qualname__ = f"{kname}_Function"

    @api
    def fn(*args):
        return KernelFunction.apply(*args)

    fn.Function = KernelFunction
    fn.buffers = kc.buffers  # the host memory it reuses (tests)
    fn.__name__ = kname
    fn.__doc__ = f"spirad kernel {kname} as a torch.autograd.Function"
    return fn
