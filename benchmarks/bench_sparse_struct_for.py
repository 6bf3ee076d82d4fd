"""What the launch-time snapshot of a sparse struct-for costs (frontend/sparse_ops.py).

    python benchmarks/bench_sparse_struct_for.py [--arch cpu] [--n 512] [--block 16]
                                                 [--launches 50] [--rounds 5]

A struct-for visits the cells active when it starts. Where its body writes the masks of the
node it iterates, a step before the loop copies them (one small parallel loop per sparse level)
and the loop tests the copy; a body that writes no such mask reads the masks directly. Two
kernels of Taichi's test_bls scatter shape over an n x n grid of `block` x `block` blocks under
a pointer node, a quarter of the blocks active, each element adding into its 4 neighbours:

  same      the targets y share x's pointer node: the body activates cells of the node it
            iterates, so the loop runs after the copy (n/block x n/block mask words)
  other     the targets live under a pointer node of their own: the same work and the same
            number of activations, no copy

Each kernel is launched `--launches` times per round (targets deactivated before each launch,
so every launch activates; not timed), alternating over `--rounds`; the table shows the median
time per launch (wall, synchronised; the first launches compile) and the difference.
"""
import argparse
import statistics
import time

from target_info import print_target  # benchmarks/target_info.py


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="cpu")
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--launches", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    import numpy as np
    import spirad as sd
    sd.init(arch=getattr(sd, a.arch), offline_cache=False)
    print_target()
    n, bs = a.n, a.block
    g = n // bs
    x, y, y_other = sd.field(sd.f32), sd.field(sd.f32), sd.field(sd.f32)
    blocks = sd.root.pointer(sd.ij, (g, g))
    blocks.dense(sd.ij, (bs, bs)).place(x)
    blocks.dense(sd.ij, (bs, bs)).place(y)
    other = sd.root.pointer(sd.ij, (g, g))
    other.dense(sd.ij, (bs, bs)).place(y_other)
    stencil = [(0, 1), (0, -1), (1, 0), (-1, 0)]

    @sd.kernel
    def populate():
        for i, j in sd.ndrange(n, n):
            bi, bj = i // bs, j // bs  # blocks off the border: the neighbours are in range
            if (bi + bj) % 4 == 0 and 0 < bi < g - 1 and 0 < bj < g - 1:
                x[i, j] = 1.0

    @sd.kernel
    def same():
        for I in sd.grouped(x):
            for d in sd.static(stencil):
                y[I + sd.Vector(d)] += x[I]

    @sd.kernel
    def other_node():
        for I in sd.grouped(x):
            for d in sd.static(stencil):
                y_other[I + sd.Vector(d)] += x[I]

    def reset():  # the same active cells before every launch, so every launch activates
        blocks.deactivate_all()
        other.deactivate_all()
        populate()

    times = {"same": [], "other": []}
    for _ in range(a.rounds):
        for name, k in (("same", same), ("other", other_node)):
            for _ in range(a.launches):
                reset()
                sd.sync()
                t0 = time.perf_counter()
                k()
                sd.sync()
                times[name].append(time.perf_counter() - t0)
    reset()
    same()
    want = 4.0 * x.to_numpy().sum()  # every element's 4 adds, once: the launch-time cells only
    assert y.to_numpy().sum() == want, (y.to_numpy().sum(), want)
    reset()
    other_node()
    assert y_other.to_numpy().sum() == want
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    print(f"arch {a.arch}, grid {n} x {n}, blocks {bs} x {bs}, {g * g} mask words")
    print("| kernel | median ms / launch |")
    print("|---|---|")
    for k, v in med.items():
        print(f"| {k} | {v:.3f} |")
    print(f"| snapshot (same - other) | {med['same'] - med['other']:+.3f} |")


if __name__ == "__main__":
    main()
