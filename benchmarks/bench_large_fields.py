"""The cost of binding a field larger than one storage binding as windows (issue 23).

    python benchmarks/bench_large_fields.py [--arch vulkan] [--n 8388608] [--rounds 3]

Why: a field past the device's largest binding (lavapipe: 128 MiB) is bound as several windows,
and every access branches on its window (`spirad/backends/root_buffers.py`); ordinary fields are
untouched (the same SPIR-V). This measures what the branches cost: the same program with the
binding limit as the device has it (each field in one binding) and lowered so that each field
spans 2 or 4 windows (`roots.limit`, as tests/backends/test_large_fields.py does). Each setting
runs in a fresh subprocess, alternating, `--rounds` times; the table shows the median time per
launch (wall, with the device) of

  axpy      y[i] += a * x[i] over n float32 elements (loads and a store)
  gather    y[i] += x[(i * 7919) % n] (loads from all windows in one task)
  grad      the adjoint of gather: x.grad[(i * 7919) % n] += y.grad[i] (atomic adds)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from target_info import print_target  # benchmarks/target_info.py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _side(arch: str, n: int, windows: int) -> dict:
    import spirad as sd
    import spirad.runtime.state as st
    sd.init(arch=getattr(sd, arch), offline_cache=False)
    if windows > 1:
        st.backend().roots.limit = -(-4 * n // windows // 256) * 256
    x = sd.field(sd.f32, shape=n, needs_grad=True)
    y = sd.field(sd.f32, shape=n, needs_grad=True)

    @sd.kernel
    def axpy(a: sd.f32):
        for i in x:
            y[i] += a * x[i]

    @sd.kernel
    def gather():
        for i in y:
            y[i] += x[(i * 7919) % n]

    x.fill(1.0)
    y.grad.fill(1.0)
    got = {}
    for name, fn in (("axpy", lambda: axpy(0.5)), ("gather", gather), ("grad", gather.grad)):
        fn()
        sd.sync()
        times = []
        for _ in range(7):
            t = time.perf_counter()
            fn()
            sd.sync()
            times.append(time.perf_counter() - t)
        got[name] = statistics.median(times)
    roots = getattr(st.backend(), "roots", None)
    got["windows"] = len(roots.by_key[x.id].chunk.windows) if roots is not None else 0
    return got


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="vulkan")
    p.add_argument("--n", type=int, default=1 << 23)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--side", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.side:
        print(json.dumps(_side(a.arch, a.n, a.side)))
        return
    print_target()  # the parent only (a child's output is read)
    settings = (1, 2, 4)
    runs = {w: [] for w in settings}
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for _ in range(a.rounds):
        for w in settings:
            out = subprocess.run([sys.executable, __file__, "--arch", a.arch, "--n", str(a.n),
                                  "--side", str(w)], env=env, capture_output=True, text=True,
                                 check=True).stdout
            runs[w].append(json.loads(out.strip().splitlines()[-1]))
    print(f"{a.arch}, n = {a.n:,} f32 per field ({4 * a.n / 2**20:.0f} MiB), median ms per launch "
          f"over {a.rounds} rounds x 7")
    print("| windows per field | axpy | gather | grad (atomic scatter) |")
    print("|---|---|---|---|")
    for w in settings:
        med = {k: statistics.median(r[k] for r in runs[w]) * 1e3 for k in ("axpy", "gather", "grad")}
        print(f"| {runs[w][0]['windows'] or 1} | {med['axpy']:.1f} | {med['gather']:.1f} | "
              f"{med['grad']:.1f} |")


if __name__ == "__main__":
    main()
