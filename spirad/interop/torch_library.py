"""A spirad kernel as a `torch.library` custom op, so that `torch.compile(fullgraph=True)` can
put it in a graph: the compiler neither breaks the graph at the call nor traces into spirad.

Why a custom op and not only `kernel_function`'s `autograd.Function`: Dynamo traces into a
Python `autograd.Function` and breaks the graph at the first thing it cannot trace (ctypes,
numpy, spirad's launch path). A custom op is opaque to the compiler; what the compiler needs is
declared beside it:

- a *schema* (tensors for ndarray parameters, `float` / `int` for scalars), built from the
  kernel's annotations;
- a *fake* implementation, which gives the outputs' shapes and dtypes from the inputs' without
  running anything (the `outputs` specs of `kernel_function`, evaluated on fake tensors);
- an *autograd formula* (`register_autograd`) whose backward is a second custom op running the
  kernel's adjoint (`kernel.grad`), itself with a fake implementation, so AOTAutograd traces
  the backward graph as well.

    import spirad.interop as sdi

    op = sdi.torch_op(step, outputs={"y": "x"})   # y: shape and dtype of x
    model = torch.compile(lambda x, v: op(x, v, 0.1).sum(), fullgraph=True)

The launches are those of `kernel_function` (`autograd.KernelCall`): on the CPU the kernel reads
and writes the tensors' memory, nothing is copied. The backward op receives the forward's inputs
and outputs (saved by the autograd formula) and the output gradients, and returns a gradient for
every floating-point tensor input (zeros where torch needs none: the op's signature is fixed).
Each `torch_op` call registers a new op, named `spirad::<kernel>_<n>`: wrap a kernel once, at
module level, not per step.
"""
from __future__ import annotations

import itertools
import threading

import torch

from kernel_ir import dtypes as T
from kernel_ir.dtypes import DType
from kernel_ir.errors import SpiradTypeError

from ..tracebacks import api
from ..types import NdarrayType
from .autograd import KernelCall

__all__ = ["torch_op"]

_COUNTER = itertools.count()
_LOCK = threading.Lock()


def _schema_type(kname: str, name: str, ann) -> str:
    """The torch schema type of one kernel parameter."""
    if isinstance(ann, NdarrayType):
        return "Tensor"
    dt = T.from_python(ann, T.f64, T.i64)  # Python's float / int / bool as dtypes
    if isinstance(dt, DType):
        return "float" if dt.is_float else "int"
    raise SpiradTypeError(f"parameter {name!r} of {kname} cannot be a torch op argument: only "
                          f"sd.types.ndarray() and scalar parameters can (got {ann!r})")


def _op_name(kname: str) -> str:
    with _LOCK:
        return f"{kname}_{next(_COUNTER)}"


@api
def torch_op(kernel, outputs: dict, name: str | None = None):
    """`kernel` as a `torch.library` custom op with a fake implementation and a registered
    backward (the adjoint kernel): `op(*inputs) -> tensor(s)`, usable under
    `torch.compile(fullgraph=True)`. `outputs` as for `autograd.kernel_function`; `name` the op's
    name in the `spirad` namespace (default `<kernel>_<n>`, unique in the process)."""
    kc = KernelCall(kernel, outputs)
    kname, params = kc.kname, dict(kc.params)
    arg_types = [(n, _schema_type(kname, n, params[n])) for n in kc.inputs]
    tensors = [n for n, t in arg_types if t == "Tensor"]
    outs = list(outputs)
    opname = name or _op_name(kname)
    args = ", ".join(f"{t} {n}" for n, t in arg_types)
    ret = "Tensor" if len(outs) == 1 else "(" + ", ".join(["Tensor"] * len(outs)) + ")"

    def forward_impl(*args):
        _, _, res, _ = kc.forward(kc.given(args))
        return res if len(res) > 1 else res[0]

    op = torch.library.custom_op(f"spirad::{opname}", forward_impl, mutates_args=(),
                                 schema=f"({args}) -> {ret}")

    @op.register_fake
    def _fake(*args):
        given = kc.given(args)
        res = []
        for o in outs:
            shape, dtype = kc.output_shape(o, given)
            res.append(torch.empty(shape, dtype=dtype, device=_device(given)))
        return tuple(res) if len(res) > 1 else res[0]

    # the backward op: (inputs, outputs' values, outputs' gradients) -> a gradient per float
    # tensor input; which inputs are float is known only from the tensors, so the op returns
    # one gradient per tensor input (an int input's is an empty float tensor, dropped below)
    grad_args = (args + ", " if args else "") + ", ".join(
        [f"Tensor out_{o}" for o in outs] + [f"Tensor grad_{o}" for o in outs])
    grad_ret = "(" + ", ".join(["Tensor"] * len(tensors)) + ")" if len(tensors) != 1 else "Tensor"

    def backward_impl(*args):
        k = len(kc.inputs)
        given = kc.given(args[:k])
        out_values = dict(zip(outs, args[k:k + len(outs)]))
        grads = list(args[k + len(outs):])
        call, nds, host = kc.rebind(given, out_values)
        wanted = {n: kc.differentiable(n, given[n]) for n in tensors}
        devices = {n: given[n].device for n in tensors}
        res = kc.backward(call, nds, host, grads, wanted, devices)
        by_name = dict(zip(kc.inputs, res))
        full = [by_name[n] if by_name[n] is not None else torch.zeros(0) for n in tensors]
        return tuple(full) if len(full) != 1 else full[0]

    grad_op = torch.library.custom_op(f"spirad::{opname}_grad", backward_impl, mutates_args=(),
                                      schema=f"({grad_args}) -> {grad_ret}")

    @grad_op.register_fake
    def _grad_fake(*args):
        given = kc.given(args[:len(kc.inputs)])
        full = [torch.empty_like(given[n]) if kc.differentiable(n, given[n])
                else torch.empty(0, device=given[n].device) for n in tensors]
        return tuple(full) if len(full) != 1 else full[0]

    def setup_context(ctx, inputs, output):
        res = output if isinstance(output, tuple) else (output,)
        ctx.save_for_backward(*[a for n, a in zip(kc.inputs, inputs) if n in tensors], *res)
        ctx.scalars = {n: a for n, a in zip(kc.inputs, inputs) if n not in tensors}

    def backward(ctx, *grads):
        saved = ctx.saved_tensors
        by_name = dict(zip(tensors, saved[:len(tensors)]))
        by_name.update(ctx.scalars)
        out_values = saved[len(tensors):]
        grads = [g if g is not None else torch.zeros_like(v) for g, v in zip(grads, out_values)]
        g = grad_op(*[by_name[n] for n in kc.inputs], *out_values, *grads)
        g = g if isinstance(g, tuple) else (g,)
        per_tensor = dict(zip(tensors, g))
        return tuple(per_tensor[n] if n in tensors and kc.differentiable(n, by_name[n]) else None
                     for n in kc.inputs)

    op.register_autograd(backward, setup_context=setup_context)

    @api
    def fn(*args):
        return op(*args)

    fn.op, fn.grad_op, fn.buffers = op, grad_op, kc.buffers
    fn.__name__ = kname
    fn.__doc__ = f"spirad kernel {kname} as the torch custom op spirad::{opname}"
    return fn


def _device(given: dict):
    return next((a.device for a in given.values() if isinstance(a, torch.Tensor)),
                torch.device("cpu"))
