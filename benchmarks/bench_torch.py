"""`spirad.interop.autograd.kernel_function` against a direct kernel call, on 4M floats (CPU).

    python benchmarks/bench_torch.py [--n 4194304] [--reps 15]

Goal (issue 26): the torch.autograd.Function wrapper within 1.5x of calling the kernel directly,
forward and forward + backward: on the CPU the wrapper passes the tensors' memory to the kernel
(DLPack, no copies) and returns tensors over the kernel's output memory.

What is compared, each the minimum over alternating repetitions (this machine is shared):
  forward           f(x, v, dt)  vs  step(x, v, dt, y) with torch tensors (y preallocated;
                    the wrapper also allocates y, zeroed, as outputs start at zero)
  forward+backward  f(...) then y.backward(g)  vs  step(...) + step.grad(...) on sd.ndarrays
                    over the same memory with gradients (the direct user zeroes the input
                    gradients and seeds the output gradient from g, as the wrapper does)
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import spirad as sd
from target_info import print_target  # benchmarks/target_info.py


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4 * 1024 * 1024)
    ap.add_argument("--reps", type=int, default=15)
    a = ap.parse_args()
    print_target()
    sd.init(arch=sd.cpu)
    import spirad.interop.autograd as sdt

    @sd.kernel
    def step(x: sd.types.ndarray(), v: sd.types.ndarray(), dt: sd.f32, y: sd.types.ndarray()):
        for i in x:
            y[i] = x[i] + dt * sd.sin(v[i])

    n = a.n
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

    cases = {"forward": (direct_forward, wrapped_forward),
             "forward+backward": (direct_both, wrapped_both)}
    for fn in (direct_forward, wrapped_forward, direct_both, wrapped_both):
        fn()  # compile, warm up
    out = f(xr, vr, 0.1)
    assert np.allclose(out.detach().numpy(), x.numpy() + 0.1 * np.sin(v.numpy()), atol=1e-6)
    print(f"kernel_function vs direct kernel call, {n} f32 elements, cpu, min of {a.reps} "
          f"(torch {torch.__version__}, {torch.get_num_threads()} torch threads)")
    for name, (direct, wrapped) in cases.items():
        td, tw = [], []
        for _ in range(a.reps):
            for fn, ts in ((direct, td), (wrapped, tw)):
                sd.sync()
                t0 = time.perf_counter()
                fn()
                sd.sync()
                ts.append(time.perf_counter() - t0)
        d, w = min(td), min(tw)
        print(f"  {name:17s} direct {d * 1e3:8.2f} ms   kernel_function {w * 1e3:8.2f} ms   "
              f"ratio {w / d:5.2f}   (goal <= 1.5)")


if __name__ == "__main__":
    main()
