"""Metal (emulated on this adapter) next to Vulkan on the same lavapipe, in one run.

    SPIRAD_METAL_EMULATE=1 python benchmarks/bench_metal.py [--launches 2000]

Prints per arch the batched launch overhead of a tiny kernel (one sync per batch of launches,
median over batches), and the adstack launch benchmark (`bench_adstack_launch.py`: forward vs
grad of a tiny kernel with a field-sized dynamic loop, sizing cache on), then the ratios the
issue asks for: metal / vulkan batched launch (target <= 2x) and grad / forward on metal
(target <= 1.5x). On a Mac run it without the variable: metal is then the real GPU.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("SPIRAD_METAL_EMULATE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import spirad as sd  # noqa: E402
from bench_adstack_launch import run as adstack_run  # noqa: E402
from target_info import print_target  # benchmarks/target_info.py


def batched_launch_us(arch, launches, reps=7):
    sd.init(arch=arch)
    x = sd.field(sd.f32, shape=())

    @sd.kernel
    def tiny(v: sd.f32):
        x[None] = v

    tiny(1.0)
    sd.sync()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(launches):
            tiny(1.0)
        sd.sync()
        ts.append((time.perf_counter() - t0) / launches)
    return statistics.median(ts) * 1e6


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--launches", type=int, default=2000)
    args = p.parse_args()
    print_target()
    from spirad.backends import arch_available
    res = {}
    for arch in ("vulkan", "metal"):
        if not arch_available(arch):
            print(f"{arch}: not available, skipped")
            continue
        launch = batched_launch_us(arch, args.launches)
        fwd, grad = adstack_run(arch, True)
        res[arch] = (launch, fwd, grad)
        print(f"[{arch:6s}] batched launch {launch:6.1f} us   adstack forward {fwd:6.1f} us  "
              f"grad {grad:6.1f} us  grad/fwd {grad / fwd:4.2f}")
    if len(res) == 2:
        print(f"metal/vulkan batched launch: {res['metal'][0] / res['vulkan'][0]:.2f}x (target <= 2)")
        print(f"metal grad/forward (cache on): {res['metal'][2] / res['metal'][1]:.2f}x (target <= 1.5)")


if __name__ == "__main__":
    main()
