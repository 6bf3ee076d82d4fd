"""Scattered adds on the CPU: privatised (per-worker slab copies) against the atomic / one-thread
code, per launch.

    python benchmarks/bench_scatter.py [--threads 2] [--launches 300] [--rounds 3]
                                       [--particles 20000]

Two DiffTaichi-shaped kernels (`spirad/backends/private_scatter.py`):

    p2g       particles add into the 3 x 3 grid cells around them (`grid[f, base + offset] +=`),
              a forward scatter with data-dependent targets (`diffmpm_simple`'s P2G;
              `--particles`, 20,000 by default)
    relax     `smoke_taichi`'s pressure adjoint: 128 rows, an inner loop over 128 columns whose
              wrapped neighbour indices sit on adstacks, adds into the neighbours of row a

each launched `--launches` times three ways: as programs run (`auto`: the estimate decides),
privatised whenever the slabs allow (`force`), never privatised (`off`: atomics or the
one-thread variant), alternating `--rounds` times in fresh processes. Prints per launch: the
best and the median wall time, and CPU time of all threads (the fair number on a machine shared
with other jobs), and the sums each way computed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from target_info import print_target  # benchmarks/target_info.py

PROGRAM = r'''
import json, sys, time
import numpy as np
import spirad as sd
import spirad.backends.cpu as cpu
mode, threads, launches, N = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if mode != "auto":
    cpu.worth = lambda *a: mode == "force"
sd.init(arch=sd.cpu, offline_cache=False, cpu_max_num_threads=threads)
F, G, NG = 4, 120, 128
x = sd.Vector.field(2, sd.f32, shape=(F, N))
grid = sd.Vector.field(2, sd.f32, shape=(F, G, G))
p = sd.field(sd.f32, shape=(F + 1, NG, NG), needs_grad=True)


@sd.kernel
def p2g(f: sd.i32):
    for i in range(N):
        base = sd.cast(x[f, i] * (G - 3), sd.i32)
        fx = x[f, i] * (G - 3) - base
        for a in sd.static(range(3)):
            for b in sd.static(range(3)):
                grid[f, base + sd.Vector([a, b])] += (0.5 + a * b) * fx


@sd.func
def dec(i):
    j = i - 1
    if j < 0:
        j = NG - 1
    return j


@sd.func
def inc(i):
    j = i + 1
    if j >= NG:
        j = 0
    return j


@sd.kernel
def relax(a: sd.i32):
    for y in range(NG):
        for c in range(NG):
            p[a + 1, y, c] = (p[a, dec(y), c] + p[a, inc(y), c] + p[a, y, dec(c)] +
                              p[a, y, inc(c)]) / 4.0


rng = np.random.default_rng(0)
x.from_numpy(rng.uniform(0, 1, (F, N, 2)).astype(np.float32))
p.grad.from_numpy(rng.uniform(-1, 1, (F + 1, NG, NG)).astype(np.float32))
out = {}
for name, fn in (("p2g", lambda k: p2g(k % F)), ("relax", lambda k: relax.grad(k % F))):
    fn(0)
    sd.sync()
    walls = []
    c0 = time.process_time()
    for k in range(launches):
        t = time.perf_counter()
        fn(k)
        sd.sync()
        walls.append(time.perf_counter() - t)
    out[name] = (min(walls) * 1e6, float(np.median(walls)) * 1e6,
                 (time.process_time() - c0) / launches * 1e6)
grid.fill(0)
p2g(1)
p.grad.from_numpy(rng.uniform(-1, 1, (F + 1, NG, NG)).astype(np.float32))
relax.grad(1)
out["check"] = [float(grid.to_numpy()[1].astype(np.float64).sum()),
                float(p.grad.to_numpy()[1].astype(np.float64).sum())]
import spirad.runtime.state as st
out["privatised"] = st.backend().private.launches
print("RESULT", json.dumps(out))
'''


def run(mode, threads, launches, particles):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=here + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory() as d:  # a file: spirad reads kernels' source
        path = os.path.join(d, "scatter_program.py")
        with open(path, "w") as f:
            f.write(PROGRAM)
        out = subprocess.run([sys.executable, path, mode, str(threads), str(launches),
                              str(particles)],
                             capture_output=True, text=True, check=True, env=env).stdout
    return json.loads(out.split("RESULT", 1)[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--launches", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--particles", type=int, default=20000)
    a = ap.parse_args()
    print_target()
    modes = ("auto", "force", "off")
    rows = {m: [] for m in modes}
    for _ in range(a.rounds):
        for mode in modes:
            rows[mode].append(run(mode, a.threads, a.launches, a.particles))
    print(f"scattered adds, {a.particles} particles, {a.threads} threads, {a.launches} launches "
          f"x {a.rounds} rounds "
          f"(alternating): us per launch, best wall / median wall / CPU (all threads)")
    for kernel in ("p2g", "relax"):
        for mode, label in (("auto", "auto (as programs run)"), ("force", "privatised"),
                            ("off", "atomics / one thread")):
            best = min(r[kernel][0] for r in rows[mode])
            median = sorted(r[kernel][1] for r in rows[mode])[len(rows[mode]) // 2]
            cpu = min(r[kernel][2] for r in rows[mode])
            print(f"  {kernel:6s} {label:22s} {best:8.1f} / {median:8.1f} / {cpu:8.1f}")
    print("  sums (p2g grid, relax gradient) auto / privatised / not: " + ", ".join(
        " / ".join(f"{rows[m][-1]['check'][k]:.7g}" for m in modes) for k in range(2)))
    print("  privatised launches (last round): " +
          ", ".join(f"{m} {rows[m][-1]['privatised']}" for m in modes))


if __name__ == "__main__":
    main()
