"""Straight-line locals cost nothing in reverse mode (issue 22, architecture §4).

    python benchmarks/bench_straight_line.py [--arch cpu] [--n 2097152] [--reps 7]
    SPIRAD_METAL_EMULATE=1 python benchmarks/bench_straight_line.py --arch vulkan metal --n 262144

`t = a[i] * x[i]; y[i] = sin(t) + b[i]` (a local) and `y[i] = sin(a[i] * x[i]) + b[i]` (inline)
must compile to the same adjoint: no adstack, no heap, the same time. Prints per arch the
forward and grad times (min and median of `--reps`, after a warm-up), the grad ratio
local / inline (target 1.0 within noise), the adstacks each adjoint allocates and, on
vulkan / metal, the storage buffers each grad task binds. Run it with PYTHONPATH pointing at an
older checkout for the numbers before the change.
"""
import argparse
import statistics
import time

import numpy as np

import spirad as sd
from kernel_ir.abi import adstack_allocas
from target_info import print_target  # benchmarks/target_info.py

ND = sd.types.ndarray()


@sd.kernel
def k_local(a: ND, x: ND, b: ND, y: ND):
    for i in x:
        t = a[i] * x[i]
        y[i] = sd.sin(t) + b[i]


@sd.kernel
def k_inline(a: ND, x: ND, b: ND, y: ND):
    for i in x:
        y[i] = sd.sin(a[i] * x[i]) + b[i]


def _time(fn, reps):
    fn()
    sd.sync()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sd.sync()
        ts.append(time.perf_counter() - t0)
    return min(ts) * 1e3, statistics.median(ts) * 1e3


def _bindings(arch, compiled):
    """Storage buffers per task module of a SPIR-V program (None on the LLVM backends)."""
    if arch not in ("vulkan", "metal"):
        return None
    return [m.num_bindings - len(m.uniform_bindings) for m in compiled.program.blob[0]]


def run(arch, n, reps):
    sd.init(arch=arch, offline_cache=False)
    rng = np.random.default_rng(0)
    arrs = []
    for k in range(4):
        a = sd.ndarray(sd.f32, n, needs_grad=True)
        a.from_numpy(rng.uniform(-1, 1, n).astype(np.float32))
        arrs.append(a)
    out = {}
    for name, k in (("local", k_local), ("inline", k_inline)):
        fwd = _time(lambda: k(*arrs), reps)

        def grad():
            arrs[3].grad.fill(1.0)
            k.grad(*arrs)
        g = _time(grad, reps)
        c = k.compile_adjoint(arrs)
        stacks = [a.arg.name for t in c.tl.tasks for a in adstack_allocas(t)]
        out[name] = (fwd, g, stacks, _bindings(arch, c))
        print(f"[{arch:6s}] {name:6s} n={n}  forward {fwd[0]:8.2f} ms (median {fwd[1]:8.2f})  "
              f"grad {g[0]:8.2f} ms (median {g[1]:8.2f})  adstacks {stacks}"
              + (f"  grad bindings per task {out[name][3]}" if out[name][3] is not None else ""))
    ratio = out["local"][1][0] / out["inline"][1][0]
    print(f"[{arch:6s}] grad local/inline (min): {ratio:.2f}x (target 1.0)")
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", nargs="+", default=["cpu"])
    p.add_argument("--n", type=int, default=2 * 1024 * 1024)
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args()
    print_target()
    for arch in args.arch:
        run(arch, args.n, args.reps)


if __name__ == "__main__":
    main()
