"""Launches per second of a grad kernel with a data-dependent parallel bound and data-dependent
adstacks on CUDA / AMDGPU: sizing-cache hit vs miss, the host path (before: host sizing and a
host read of the bound, each a wait for the device) vs the device path (after: GPU sizer and
device-side bounds, no wait on a hit).

    python benchmarks/bench_gpu_launch.py [--arch cuda] [--n 64] [--launches 200]

Without a GPU the arch runs emulated (`SPIRAD_<ARCH>_EMULATE=1` is set here), so the numbers
count the launch path's host work and its waits, not device time. The kernel:

    for i in range(n[None]):           # parallel bound read from a field
        v = x[i]
        for j in range(m[i]):          # stack sizes read from a field
            v = sin(v) * 0.9 + 0.1
        y[i] = v

"hit": the adjoint launched again with nothing changed (the sizing cache hits); "miss": one
element of `m` written before each launch (its write generation changes: the sizes are
evaluated again). One `sd.sync()` per batch; median of alternating batches; "waits" is how
often the host waited for the device per launch (`rt.waits`).
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np
from target_info import print_target  # benchmarks/target_info.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

EMULATE = {"cuda": "SPIRAD_CUDA_EMULATE", "amdgpu": "SPIRAD_AMDGPU_EMULATE"}


def setup(arch, n):
    import spirad as sd
    sd.init(arch=arch)
    nf = sd.field(sd.i32, shape=())
    m = sd.field(sd.i32, shape=n)
    x = sd.field(sd.f32, shape=n, needs_grad=True)
    y = sd.field(sd.f32, shape=n, needs_grad=True)

    @sd.kernel
    def k():
        for i in range(nf[None]):
            v = x[i]
            for j in range(m[i]):
                v = sd.sin(v) * 0.9 + 0.1
            y[i] = v

    nf[None] = n
    m.from_numpy((np.arange(n) % 7 + 1).astype(np.int32))
    x.from_numpy(np.linspace(0.1, 0.9, n).astype(np.float32))
    k()
    y.grad.fill(1.0)
    k.grad()
    sd.sync()
    return k, m


def measure(arch, host_path: bool, n: int, launches: int, reps: int):
    import spirad as sd
    from spirad.backends import llvm_gpu
    if host_path:
        os.environ[llvm_gpu.HOST_PATH_ENV] = "1"
    else:
        os.environ.pop(llvm_gpu.HOST_PATH_ENV, None)
    k, m = setup(arch, n)
    rt = sd.runtime.state.backend().rt
    m_k = int(m[0])

    def hit():
        k.grad()

    def miss():
        m[0] = m_k      # same value, new write generation: the sizes are evaluated again
        k.grad()

    times = {"hit": [], "miss": []}
    waits = {"hit": 0, "miss": 0}
    for _ in range(reps):
        for name, fn in (("hit", hit), ("miss", miss)):
            w0 = rt.waits
            t0 = time.perf_counter()
            for _ in range(launches):
                fn()
            waits[name] += rt.waits - w0       # the batch's own sync() not counted
            sd.sync()
            times[name].append((time.perf_counter() - t0) / launches)
    os.environ.pop(llvm_gpu.HOST_PATH_ENV, None)
    return {name: (1.0 / statistics.median(t), waits[name] / (reps * launches))
            for name, t in times.items()}


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="cuda", choices=sorted(EMULATE))
    p.add_argument("--n", type=int, default=64, help="parallel range (and field size)")
    p.add_argument("--launches", type=int, default=200, help="launches per timed batch")
    p.add_argument("--reps", type=int, default=5)
    a = p.parse_args(argv)
    print_target()
    from spirad.backends import backend_class
    if not backend_class(a.arch).is_available() or backend_class(a.arch).emulated():
        os.environ[EMULATE[a.arch]] = "1"
    emulated = backend_class(a.arch).emulated()
    print(f"{a.arch}{' (emulated)' if emulated else ''}: grad launches of a data-dependent-bound "
          f"kernel, n={a.n}, {a.launches} launches per batch, median of {a.reps}")
    rows = {}
    for host_path, label in ((True, "before (host sizing, host-read bound)"),
                             (False, "after  (GPU sizer, device bound)    ")):
        r = rows[host_path] = measure(a.arch, host_path, a.n, a.launches, a.reps)
        print(f"  {label}  hit {r['hit'][0]:9.0f} launches/s ({r['hit'][1]:.1f} waits/launch)"
              f"   miss {r['miss'][0]:9.0f} launches/s ({r['miss'][1]:.1f} waits/launch)",
              flush=True)
    for case in ("hit", "miss"):
        print(f"  after / before, {case}: {rows[False][case][0] / rows[True][case][0]:.2f}x")
    return rows


if __name__ == "__main__":
    main()
