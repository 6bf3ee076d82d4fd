"""The workload of the determinism tests and benchmark (`sd.init(deterministic=True)`): a
forward reduction into a local, a scatter-add, an adjoint that scatters into `.grad`, and an
adjoint with an adstack that scatters (`interop_kernels.gather_loop`). The values span twenty
binary orders of magnitude, so a float sum in another order rounds differently
(`order_matters` checks that premise).

    python -m tests.support.determinism ARCH DETERMINISTIC THREADS REPS [N]

runs it in this process and prints one JSON line: per run, the SHA-1 of each result's bytes
(the thread-count tests run it in child processes: lavapipe's thread count is per process)."""
import hashlib
import json
import sys

import numpy as np

import spirad as sd
from tests.support.interop_kernels import gather_loop

N = 100_000      # more than one lavapipe ordered chunk (passes/deterministic)
BINS = 61


@sd.kernel
def total_of(x: sd.template(), out: sd.template()):
    s = 0.0
    for i in x:
        s += x[i]                   # a reduction into a local
    out[None] = s


@sd.kernel
def scatter_add(x: sd.template(), idx: sd.template(), bins: sd.template()):
    for i in x:
        bins[idx[i]] += x[i] * x[i]


@sd.kernel
def weighted(x: sd.template(), idx: sd.template(), bins: sd.template(), loss: sd.template()):
    for i in x:
        loss[None] += sd.sin(x[i]) * bins[idx[i]]   # adjoint: bins.grad[idx[i]] += ...


def values(n: int = N, seed: int = 1):
    """(values, bin indices): float32 over twenty binary orders of magnitude, signs mixed."""
    rng = np.random.default_rng(seed)
    vals = (rng.standard_normal(n) * np.exp2(rng.uniform(-10, 10, n))).astype(np.float32)
    return vals, rng.integers(0, BINS, n).astype(np.int32)


def sequential_sum(vals) -> np.float32:
    """The float32 sum in index order, one addition at a time (what a serial loop computes)."""
    return np.add.accumulate(vals, dtype=np.float32)[-1]


def sequential_scatter(vals, idx):
    """`bins[idx[i]] += vals[i] * vals[i]` in index order, in float32 (np.add.at is
    unbuffered: one addition at a time, in order)."""
    bins = np.zeros(BINS, np.float32)
    np.add.at(bins, idx, vals * vals)
    return bins


def order_matters(vals) -> bool:
    """The premise: summing `vals` in another order gives other bits."""
    return sequential_sum(vals) != sequential_sum(vals[::-1]) and \
        sequential_sum(vals) != np.float32(np.sum(vals, dtype=np.float32))


class Workload:
    """The fields and ndarrays of one `sd.init`, filled with `values()`."""

    def __init__(self, n: int = N):
        vals, idx = values(n)
        self.vals, self.idx = vals, idx
        self.x = sd.field(sd.f32, n, needs_grad=True)
        self.ix = sd.field(sd.i32, n)
        self.out = sd.field(sd.f32, (), needs_grad=True)
        self.bins = sd.field(sd.f32, BINS, needs_grad=True)
        self.x.from_numpy(vals)
        self.ix.from_numpy(idx)
        m = min(n, 4096)  # the adstack kernel: a run-time trip count per iteration
        self.gx = sd.ndarray(sd.f32, BINS, needs_grad=True)
        self.gx.from_numpy(np.sin(np.arange(BINS, dtype=np.float32)))
        self.gidx = sd.ndarray(sd.i32, m)
        self.gidx.from_numpy(idx[:m])
        self.gout = sd.ndarray(sd.f32, m, needs_grad=True)
        self.gtotal = sd.ndarray(sd.f32, 1, needs_grad=True)

    def forward_sum(self) -> np.ndarray:
        total_of(self.x, self.out)
        return self.out.to_numpy()

    def scatter(self) -> np.ndarray:
        self.bins.fill(0)
        scatter_add(self.x, self.ix, self.bins)
        return self.bins.to_numpy()

    def gradient(self) -> np.ndarray:
        self.out.fill(0)
        self.out.grad.fill(1)
        self.x.grad.fill(0)
        self.bins.grad.fill(0)
        weighted.grad(self.x, self.ix, self.bins, self.out)
        return np.concatenate([self.x.grad.to_numpy(), self.bins.grad.to_numpy()])

    def adstack_gradient(self) -> np.ndarray:
        self.gx.grad.fill(0)
        self.gout.grad.fill(1)
        self.gtotal.grad.fill(1)
        self.gtotal.fill(0)
        gather_loop(self.gx, self.gidx, 3, self.gout, self.gtotal)
        gather_loop.grad(self.gx, self.gidx, 3, self.gout, self.gtotal)
        return np.concatenate([self.gtotal.to_numpy(), self.gx.grad.to_numpy()])

    def run(self) -> tuple:
        """One run: (forward sum, scatter, gradient, adstack gradient) arrays."""
        return (self.forward_sum(), self.scatter(), self.gradient(), self.adstack_gradient())


def digests(results) -> list:
    return [hashlib.sha1(np.ascontiguousarray(r).tobytes()).hexdigest() for r in results]


def main(argv) -> None:
    arch, det, threads, reps = argv[0], argv[1] == "1", int(argv[2]), int(argv[3])
    n = int(argv[4]) if len(argv) > 4 else N
    kw = {"cpu_max_num_threads": threads} if arch == "cpu" else {}
    sd.init(arch=arch, deterministic=det, offline_cache=False, **kw)
    w = Workload(n)
    print(json.dumps([digests(w.run()) for _ in range(reps)]))


if __name__ == "__main__":
    main(sys.argv[1:])
