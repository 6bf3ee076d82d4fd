"""spirad's framework wrappers against a direct kernel call, on 4M floats (CPU):
`interop.autograd.kernel_function` (torch.autograd.Function), `interop.torch_op` (a torch custom
op, eager and under torch.compile) and `interop.jax.jax_kernel` (jax.pure_callback, under jit).

    python benchmarks/bench_torch.py [--n 4194304] [--reps 15] [--no-jax]

Goal (issue 26): the torch.autograd.Function wrapper within 1.5x of calling the kernel directly,
forward and forward + backward: on the CPU the wrapper passes the tensors' memory to the kernel
(DLPack, no copies) and returns tensors over the kernel's output memory.

What is compared, each the minimum over alternating repetitions (this machine is shared):
  forward           f(x, v, dt)  vs  step(x, v, dt, y) with torch tensors (y preallocated;
                    the wrapper also allocates y, zeroed, as outputs start at zero)
  forward+backward  f(...) then y.backward(g)  vs  step(...) + step.grad(...) on sd.ndarrays
                    over the same memory with gradients (the direct user zeroes the input
                    gradients and seeds the output gradient from g, as the wrapper does)
The torch_op rows time the same calls through the custom op (`op(x, v, dt)`; backward through
its registered autograd formula), and through `torch.compile(fullgraph=True)` of `op(...).sum()`
against the direct `step(...)` plus a numpy sum. The JAX rows time `jax.jit(f)(x, v, dt)` (and
`jax.jit(jax.vjp)` of it with the cotangent g) on jax arrays of the same values, blocking until
ready. A second pass repeats everything on 1,000 elements, where the per-call overhead shows.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import spirad as sd
from target_info import print_target  # benchmarks/target_info.py


def run(n: int, reps: int, use_jax: bool):
    import spirad.interop as sdi
    import spirad.interop.autograd as sdt
    jax_kernel = None
    if use_jax:
        import jax
        import jax.numpy as jnp

        from spirad.interop.jax import jax_kernel

    @sd.kernel
    def step(x: sd.types.ndarray(), v: sd.types.ndarray(), dt: sd.f32, y: sd.types.ndarray()):
        for i in x:
            y[i] = x[i] + dt * sd.sin(v[i])

    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, generator=g)
    v = torch.rand(n, generator=g)
    y = torch.zeros(n)
    grad_y = torch.rand(n, generator=g)
    xr, vr = x.clone().requires_grad_(), v.clone().requires_grad_()
    f = sdt.kernel_function(step, outputs={"y": "x"})
    # direct calls with gradients: sd.ndarrays over the same memory, gradients beside them
    xs = sd.from_dlpack(x, needs_grad=True)
    vs = sd.from_dlpack(v, needs_grad=True)
    ys = sd.from_dlpack(y, needs_grad=True)
    gy = grad_y.numpy()

    def direct_forward():
        step(x, v, 0.1, y)

    def wrapped_forward():
        f(x, v, 0.1)

    def direct_both():
        step(xs, vs, 0.1, ys)
        xs.grad.fill(0)
        vs.grad.fill(0)
        ys.grad.from_numpy(gy)
        step.grad(xs, vs, 0.1, ys)
        sd.sync()

    def wrapped_both():
        xr.grad = vr.grad = None
        out = f(xr, vr, 0.1)
        out.backward(grad_y)

    op = sdi.torch_op(step, outputs={"y": "x"})
    compiled = torch.compile(lambda x, v: op(x, v, 0.1).sum(), fullgraph=True)

    def op_forward():
        op(x, v, 0.1)

    def op_both():
        xr.grad = vr.grad = None
        op(xr, vr, 0.1).backward(grad_y)

    def direct_sum():
        step(x, v, 0.1, y)
        y.numpy().sum()

    def compiled_forward():
        compiled(x, v)

    cases = {"forward": (direct_forward, wrapped_forward, "kernel_function"),
             "forward+backward": (direct_both, wrapped_both, "kernel_function"),
             "op forward": (direct_forward, op_forward, "torch_op"),
             "op fwd+bwd": (direct_both, op_both, "torch_op"),
             "op compiled+sum": (direct_sum, compiled_forward, "torch.compile")}
    if jax_kernel is not None:
        f_jax = jax_kernel(step, outputs={"y": "x"})
        jx, jv, jg = jnp.asarray(x.numpy()), jnp.asarray(v.numpy()), jnp.asarray(gy)
        jit_fwd = jax.jit(lambda x, v: f_jax(x, v, 0.1))

        @jax.jit
        def jit_both(x, v, g):
            _, vjp = jax.vjp(lambda x, v: f_jax(x, v, 0.1), x, v)
            return vjp(g)

        cases["jax jit forward"] = (direct_forward,
                                    lambda: jit_fwd(jx, jv).block_until_ready(), "jax_kernel")
        cases["jax jit vjp"] = (direct_both,
                                lambda: jax.block_until_ready(jit_both(jx, jv, jg)), "jax_kernel")
    for direct, wrapped, _ in cases.values():
        direct()
        wrapped()  # compile, warm up
    out = f(xr, vr, 0.1)
    assert np.allclose(out.detach().numpy(), x.numpy() + 0.1 * np.sin(v.numpy()), atol=1e-6)
    assert np.allclose(op(x, v, 0.1).numpy(), out.detach().numpy())
    print(f"wrappers vs direct kernel call, {n} f32 elements, cpu, min of {reps} "
          f"(torch {torch.__version__}, {torch.get_num_threads()} torch threads"
          + (f", jax {jax.__version__})" if jax_kernel is not None else ")"))
    for name, (direct, wrapped, what) in cases.items():
        td, tw = [], []
        for _ in range(reps):
            for fn, ts in ((direct, td), (wrapped, tw)):
                sd.sync()
                t0 = time.perf_counter()
                fn()
                sd.sync()
                ts.append(time.perf_counter() - t0)
        d, w = min(td), min(tw)
        print(f"  {name:17s} direct {d * 1e3:8.3f} ms   {what:15s} {w * 1e3:8.3f} ms   "
              f"ratio {w / d:5.2f}   (+{(w - d) * 1e6:7.1f} us)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4 * 1024 * 1024)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--no-jax", action="store_true")
    a = ap.parse_args()
    print_target()
    sd.init(arch=sd.cpu)
    for n in (a.n, 1000):
        run(n, a.reps, not a.no_jax)

if __name__ == "__main__":
    main()
