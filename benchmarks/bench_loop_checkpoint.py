"""Bounded adstack memory inside a kernel: a long per-thread loop, stored vs checkpointed.

    python benchmarks/bench_loop_checkpoint.py [--arch cpu] [--threads 256] [--trips 20000]

Each thread of the kernel runs `--trips` trips of a loop carrying two locals through sin / tanh
(three pushes a trip), so the fully stored adjoint needs threads x trips x 3 adstack entries.
`stored` runs it with no budget; `ckpt` with `init(ad_stack_memory=)` set to a tenth of that
heap, so the launch runs the checkpointed adjoint (passes/autodiff/loop_checkpoint.py: the loop
state every S trips, each segment replayed in the reverse pass). Printed per variant: the
adstack heap of the launch (`launch.heap_estimate`, at full parallelism) and the heaps the
backend allocated, the min time of `--reps` backward launches, and the largest difference
between the two gradients (the same arithmetic: equal up to the order of float atomics).
"""
import argparse
import time

import numpy as np

import spirad as sd
from spirad.runtime import launch, sizing_cache
from spirad.runtime import state as _state
from target_info import print_target  # benchmarks/target_info.py

ND = sd.types.ndarray()


@sd.kernel
def chain(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        w = 0.5 * x[i]
        for j in range(n):
            v = sd.sin(v) * 0.9 + 0.1 * w
            w = sd.tanh(w + v * 0.05)
        y[i] = v + w


def run(arch, threads, trips, reps, budget):
    sd.init(arch=arch, default_fp=sd.f32, ad_stack_memory=budget)
    x = sd.ndarray(sd.f32, threads, needs_grad=True)
    y = sd.ndarray(sd.f32, threads, needs_grad=True)
    x.from_numpy(np.linspace(0.1, 0.9, threads).astype(np.float32))
    chain(x, y, trips)
    times = []
    sizing_cache.stats.reset()
    for _ in range(reps + 1):
        y.grad.fill(1.0)
        x.grad.fill(0.0)
        sd.sync()
        t0 = time.perf_counter()
        chain.grad(x, y, trips)
        sd.sync()
        times.append(time.perf_counter() - t0)
    be = _state.backend()
    adj = chain.compile_adjoint((x, y, trips))
    p = launch.plan(adj, (x, y, trips), 0)
    est = launch.heap_estimate(adj, p, sizing_cache.evaluate(adj.sizing, p.args,
                                                               measure=launch.measure), be)
    if sizing_cache.stats.checkpointed:
        alt = launch._budgeted(p, sizing_cache.evaluate(adj.sizing, p.args,
                                                       measure=launch.measure), be)
        est = launch.heap_estimate(alt.compiled, alt, sizing_cache.evaluate(
            alt.compiled.sizing, alt.args, measure=launch.measure), be)
    return x.grad.to_numpy(), est, sum(be.heap_bytes()), min(times[1:]), \
        sizing_cache.stats.checkpointed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="cpu")
    ap.add_argument("--threads", type=int, default=256)
    ap.add_argument("--trips", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    print_target()
    g0, est0, heap0, t0, _ = run(a.arch, a.threads, a.trips, a.reps, None)
    g1, est1, heap1, t1, n = run(a.arch, a.threads, a.trips, a.reps, max(est0 // 10, 1))
    print(f"{a.arch}: {a.threads} threads x {a.trips} trips")
    print(f"  stored : heap {est0 / 2**20:9.2f} MiB (allocated {heap0 / 2**20:9.2f} MiB)  "
          f"grad {t0 * 1e3:8.1f} ms")
    print(f"  ckpt   : heap {est1 / 2**20:9.2f} MiB (allocated {heap1 / 2**20:9.2f} MiB)  "
          f"grad {t1 * 1e3:8.1f} ms  ({n} checkpointed launches)")
    print(f"  memory {est0 / max(est1, 1):.1f}x smaller, time {t1 / t0:.2f}x; largest gradient "
          f"difference {np.max(np.abs(g0 - g1)):.3g} (relative "
          f"{np.max(np.abs(g0 - g1) / np.maximum(np.abs(g0), 1e-30)):.3g})")


if __name__ == "__main__":
    main()
