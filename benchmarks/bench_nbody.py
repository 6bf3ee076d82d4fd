"""An O(N^2) gravity step written the Taichi way (`force[i] += f` inside `for j in range(N)`),
timed on spirad and, when a Taichi interpreter is given, on Taichi with the same file.

    python benchmarks/bench_nbody.py [--arch cpu] [--n 3000] [--steps 20] [--taichi-python PY]

The program below runs unchanged under both: it imports `taichi` (spirad through
spirad.compat.taichi_alias here; the real Taichi in `--taichi-python`). Prints compile time
(first step) and the steady time per step. Why it is here: such accumulating loops made Taichi's
nbody example 2-4x slower on spirad's CPU until passes/promote_accumulators and the SIMD lowering
of per-element vector atomics (llvm_codegen/spmd.py); the goal is "no slower than Taichi".
"""
import argparse
import os
import subprocess
import sys
import tempfile
from target_info import print_target  # benchmarks/target_info.py

PROGRAM = r'''
import sys, time
import taichi as ti
arch, n, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ti.init(arch=getattr(ti, arch))
pos = ti.Vector.field(2, ti.f32, n)
vel = ti.Vector.field(2, ti.f32, n)
acc = ti.Vector.field(2, ti.f32, n)

@ti.kernel
def setup():
    for i in range(n):
        a = i * 2.399963
        r = 0.1 + 0.3 * (i % 97) / 97.0
        pos[i] = [0.5 + r * ti.cos(a), 0.5 + r * ti.sin(a)]
        vel[i] = [-ti.sin(a), ti.cos(a)]

@ti.kernel
def forces():
    for i in range(n):
        acc[i] = [0.0, 0.0]
    for i in range(n):
        p = pos[i]
        for j in range(n):
            if i != j:
                d = p - pos[j]
                r = d.norm(1e-5)
                acc[i] += -(1.0 / r) ** 3 * d

@ti.kernel
def advance(dt: ti.f32):
    for i in range(n):
        vel[i] += dt * acc[i]
        pos[i] += dt * vel[i]

setup()
t0 = time.perf_counter()
forces(); advance(1e-6); ti.sync()
t1 = time.perf_counter()
for _ in range(steps):
    forces(); advance(1e-6)
ti.sync()
t2 = time.perf_counter()
print(f"RESULT {t1 - t0:.3f} {(t2 - t1) / steps:.5f} {pos[0][0]:.6f}")
'''


def run(python, arch, n, steps, alias):
    """The program in a fresh process (kernels need a source file; no offline cache)."""
    pre = "from spirad.compat import taichi_alias; taichi_alias.install()\n" if alias else ""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "nbody_program.py")
        with open(path, "w") as f:
            f.write(pre + PROGRAM)
        out = subprocess.run([python, path, arch, str(n), str(steps)], capture_output=True,
                             text=True, check=True,
                             env=dict(os.environ, TI_OFFLINE_CACHE="0",
                                      SPIRAD_CACHE_DIR=os.path.join(d, "cache"))).stdout
    first, step, x = out.split("RESULT")[-1].split()
    return float(first), float(step), float(x)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="cpu")
    p.add_argument("--n", type=int, default=3000)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--taichi-python", help="a Python with Taichi installed")
    a = p.parse_args()
    print_target()
    rows = [("spirad", run(sys.executable, a.arch, a.n, a.steps, True))]
    if a.taichi_python:
        rows.append(("taichi", run(a.taichi_python, a.arch, a.n, a.steps, False)))
    print(f"nbody n={a.n} arch={a.arch}: first step (compile) / steady step / pos[0].x")
    for name, (first, step, x) in rows:
        print(f"  {name:7s} {first:8.3f} s {step * 1e3:9.2f} ms  {x:.6f}")
    if len(rows) == 2:
        print(f"  spirad / taichi steady: {rows[0][1][1] / rows[1][1][1]:.2f}x")


if __name__ == "__main__":
    main()
