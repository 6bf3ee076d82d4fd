"""A spirad kernel as a JAX function with a custom VJP (the adjoint kernel), usable under
`jax.jit`, `jax.grad` and `jax.vjp` on the CPU.

    from spirad.interop.jax import jax_kernel

    @sd.kernel
    def step(x: sd.types.ndarray(), v: sd.types.ndarray(), dt: sd.f32, y: sd.types.ndarray()):
        for i in x:
            y[i] = x[i] + dt * sd.sin(v[i]) * x[i]

    f = jax_kernel(step, outputs={"y": "x"})            # y: shape and dtype of x
    loss = jax.jit(lambda x, v: (f(x, v, 0.1) ** 2).sum())
    jax.grad(loss, argnums=(0, 1))(x, v)                # step.grad runs in the backward pass

The function takes the kernel's arguments in order without the outputs (JAX arrays for ndarray
parameters, numbers or 0-d arrays for scalars) and returns the output array(s). `outputs` maps
each output parameter to its shape: an input's name (same shape and dtype), a shape tuple (dtype
of the first array input), or a function of the inputs (`jax.ShapeDtypeStruct`s and scalars, by
name) returning a shape. Arrays of scalar elements only (a vector / matrix `dtype=` or
`element_dim` is refused). As for `kernel.grad`: the kernel must not write its inputs, and
outputs start at zero. Integer arrays are constants; scalars too, and asking for a scalar's
gradient is an error (the adjoint computes none; make it an ndarray parameter).

How it runs, and what that costs: through `jax.pure_callback`. XLA's FFI would avoid the Python
round trip, but registering an FFI target from Python means implementing XLA's C call-frame ABI
by hand (ctypes structs of a header that changes between jaxlib versions); the callback is the
path JAX supports from Python. Per call it costs a host callback (XLA leaves the compiled
computation, hands the operands to Python as numpy arrays, and copies the results back in): about
tens of microseconds plus one copy of each output, measured by `benchmarks/bench_torch.py`'s JAX
rows. On the CPU the kernel reads the operands' memory as it is (no copy in). XLA cannot fuse
across the call, and the callback is treated as pure: under `jit` an unused result may be dropped,
and the call may be run again or in another order, so the kernel must be a function of its inputs.
`jax.vmap` over the function runs the kernel once per batch element (`vmap_method="sequential"`).
On GPU backends of spirad the arrays are copied to the device and back on each call. A spirad
error in the kernel (a compile error, say) is raised as itself by an eager call; under `jit`,
XLA raises a `JaxRuntimeError` whose text quotes it.
"""
from __future__ import annotations

import numbers
import threading

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero
import numpy as np

from kernel_ir import dtypes as T
from kernel_ir.dtypes import DType
from kernel_ir.errors import SpiradError, SpiradTypeError, SpiradValueError

from ..runtime import state as _state
from ..data.ndarray import Ndarray
from ..tracebacks import api
from ..types import NdarrayType
from .arrays import _NP_TO_DTYPE, alias

__all__ = ["jax_kernel"]


def _bind(arr: np.ndarray, what: str) -> tuple:
    """(sd.ndarray over `arr`'s memory on host-memory backends or a device copy of it, whether
    it is `arr`'s memory)."""
    arr = np.ascontiguousarray(arr)
    dt = _NP_TO_DTYPE.get(arr.dtype)
    if dt is None:
        raise SpiradTypeError(f"{what} has dtype {arr.dtype}; use float32 / float64 "
                              f"(differentiable) or int32 / int64 / uint32")
    nd, zero_copy = alias(arr, dt, (), tuple(arr.shape))
    if not zero_copy:
        _state.backend().write(nd._storage(), arr)
    return nd, zero_copy


def _read(nd: Ndarray, arr: np.ndarray, zero_copy: bool) -> np.ndarray:
    """The values of `nd`: `arr` itself where the kernel wrote its memory, else read back."""
    return arr if zero_copy else nd.to_numpy()


def _is_float(ann) -> bool:
    """Whether a scalar parameter's annotation (a dtype, or Python's float / int) is a float."""
    dt = T.from_python(ann, T.f64, T.i64)
    return isinstance(dt, DType) and dt.is_float


class _JaxKernel:
    """The host side: forward and adjoint launches on numpy arrays (the callbacks' operands)."""

    def __init__(self, kernel, outputs: dict):
        params = kernel._annotations()
        self.kernel, self.outputs = kernel, list(outputs)
        self.spec = outputs
        self.names = [n for n, _ in params]
        self.kname = kname = kernel.fn.__name__
        ann = dict(params)
        for o in outputs:
            if o not in ann:
                raise SpiradValueError(f"output {o!r} is not a parameter of kernel {kname} "
                                       f"({', '.join(self.names)})")
            if not isinstance(ann[o], NdarrayType):
                raise SpiradTypeError(f"output {o!r} of {kname} must be a sd.types.ndarray() "
                                      f"parameter")
        self.inputs = [n for n in self.names if n not in outputs]
        for n in self.inputs:
            a = ann[n]
            if not isinstance(T.from_python(a, T.f64, T.i64), (NdarrayType, DType)):
                raise SpiradTypeError(f"parameter {n!r} of {kname} cannot be a JAX argument: "
                                      f"only sd.types.ndarray() and scalar parameters can "
                                      f"(got {a!r})")
        self.arrays = [n for n in self.inputs if isinstance(ann[n], NdarrayType)]
        for n in self.arrays + self.outputs:
            a = ann[n]
            if (a.dtype is not None and not isinstance(a.dtype, DType)) or a.element_dim:
                raise SpiradTypeError(f"parameter {n!r} of {kname}: jax_kernel takes ndarrays of "
                                      f"scalar elements; annotate it sd.types.ndarray() and index "
                                      f"the components as a trailing axis")
        self.scalar_float = {n: _is_float(ann[n]) for n in self.inputs if n not in self.arrays}
        self.errors = threading.local()  # the spirad error of a failed callback, per thread

    def guarded(self, fn):
        """`fn` as a callback that records a spirad error before XLA wraps it (in a
        JaxRuntimeError whose text quotes it), so an eager call can raise the error itself."""
        def callback(*args):
            try:
                return fn(*args)
            except SpiradError as e:
                self.errors.last = e
                raise
        return callback

    def result_types(self, given: dict) -> list:
        """`jax.ShapeDtypeStruct` of each output for the inputs `given` (by name)."""
        first = next((given[n] for n in self.arrays), None)
        res = []
        for o in self.outputs:
            spec = self.spec[o]
            if isinstance(spec, str):
                t = given[spec]
                res.append(jax.ShapeDtypeStruct(tuple(t.shape), t.dtype))
                continue
            if callable(spec):
                spec = spec(**given)
            if isinstance(spec, numbers.Integral):
                spec = (int(spec),)
            dtype = first.dtype if first is not None else jnp.float32
            res.append(jax.ShapeDtypeStruct(tuple(int(s) for s in spec), dtype))
        return res

    def _scalar(self, n, a):
        return float(a) if self.scalar_float[n] else int(a)

    def _bind_inputs(self, values):
        bound = {}
        for n, a in zip(self.inputs, values):
            if n in self.arrays:
                nd, _ = _bind(np.asarray(a), f"argument {n!r} of {self.kname}")
                bound[n] = nd
            else:
                bound[n] = self._scalar(n, a)
        return bound

    def forward(self, out_types, *values):
        """The callback of the forward pass: the outputs as numpy arrays."""
        bound = self._bind_inputs(values)
        outs = []
        for o, t in zip(self.outputs, out_types):
            arr = np.zeros(t.shape, t.dtype)
            nd, zc = _bind(arr, f"output {o!r} of {self.kname}")
            bound[o] = nd
            outs.append((nd, arr, zc))
        self.kernel(*(bound[n] for n in self.names))
        self.kernel.release_plans()  # the plan would keep this call's buffers alive
        return tuple(_read(*o) for o in outs)

    def backward(self, n_in: int, *values):
        """The callback of the backward pass: (inputs, outputs' values, outputs' cotangents) ->
        the cotangent of each float array input, in input order."""
        ins, outs, cts = values[:n_in], values[n_in:n_in + len(self.outputs)], \
            values[n_in + len(self.outputs):]
        bound = self._bind_inputs(ins)
        grads = {}
        for n in self.arrays:
            nd = bound[n]
            if nd.dtype.is_float:
                g = np.zeros(nd.shape, nd.dtype.np)
                nd.grad, zc = _bind(g, "a gradient")
                grads[n] = (nd.grad, g, zc)
        for o, val, ct in zip(self.outputs, outs, cts):
            nd, _ = _bind(np.array(val), f"output {o!r}")  # a copy: jax's buffer is read-only
            nd.grad, _ = _bind(np.array(ct), f"the cotangent of {o!r}")  # consumed by the adjoint
            bound[o] = nd
        self.kernel.grad(*(bound[n] for n in self.names))
        self.kernel.release_plans()
        return tuple(_read(*grads[n]) for n in self.inputs if n in grads)


@api
def jax_kernel(kernel, outputs: dict):
    """`f(*inputs) -> array(s)`: `kernel` as a JAX function whose VJP runs the adjoint kernel
    (see the module doc)."""
    jk = _JaxKernel(kernel, outputs)
    single = len(jk.outputs) == 1

    def _given(args):
        if len(args) != len(jk.inputs):
            raise SpiradTypeError(f"{jk.kname} as a JAX function takes {len(jk.inputs)} "
                                  f"argument(s) ({', '.join(jk.inputs)}), got {len(args)}")
        return dict(zip(jk.inputs, args))

    def _operands(args):
        return [jnp.asarray(a) for a in args]

    def _run(*args):
        ops = _operands(args)
        types = jk.result_types(dict(zip(jk.inputs, ops)))
        res = jax.pure_callback(jk.guarded(lambda *v: jk.forward(types, *v)), tuple(types), *ops,
                                vmap_method="sequential")
        return res, ops

    @jax.custom_vjp
    def f(*args):
        res, _ = _run(*args)
        return res[0] if single else res

    def f_fwd(*primals):
        for n, p in zip(jk.inputs, primals):  # a derivative spirad does not compute: an error
            if p.perturbed and n not in jk.arrays:
                raise SpiradTypeError(f"{jk.kname}: the adjoint gives no gradient for scalar "
                                      f"parameter {n!r}; differentiate with respect to array "
                                      f"inputs only (or make {n!r} an ndarray parameter)")
        res, ops = _run(*(p.value for p in primals))
        return (res[0] if single else res), (tuple(ops), tuple(res))

    def f_bwd(saved, ct):
        ops, res = saved
        cts = (ct,) if single else tuple(ct)
        cts = tuple(jnp.zeros(r.shape, r.dtype) if isinstance(c, SymbolicZero) else c
                    for c, r in zip(cts, res))
        wanted = [k for k, (n, o) in enumerate(zip(jk.inputs, ops))
                  if n in jk.arrays and jnp.issubdtype(o.dtype, jnp.floating)]
        types = tuple(jax.ShapeDtypeStruct(ops[k].shape, ops[k].dtype) for k in wanted)
        grads = jax.pure_callback(jk.guarded(lambda *v: jk.backward(len(ops), *v)), types,
                                  *ops, *res, *cts, vmap_method="sequential") if wanted else ()
        out = [None] * len(ops)  # None: a zero cotangent (scalars, integer arrays)
        for k, g in zip(wanted, grads):
            out[k] = g
        return tuple(out)

    f.defvjp(f_fwd, f_bwd, symbolic_zeros=True)

    @api
    def fn(*args):
        _given(args)
        jk.errors.last = None
        try:
            return jax.block_until_ready(f(*args))  # eager: done here; traced: a no-op
        except jax.errors.JaxRuntimeError:
            err = jk.errors.last
            if err is None:
                raise
            raise err from None  # the spirad error itself (under jit: quoted in XLA's)

    fn.__name__ = jk.kname
    fn.__doc__ = f"spirad kernel {jk.kname} as a JAX function (custom VJP: its adjoint)"
    return fn
