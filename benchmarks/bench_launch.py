"""Launch overhead of DiffTaichi-style time stepping, on spirad and (given its Python) Taichi.

    python benchmarks/bench_launch.py [--arch cpu] [--n 64] [--steps 2000] [--rounds 3]
                                      [--taichi-python PY]

DiffTaichi's programs launch thousands of tiny kernels per iteration, each taking the time step
`t` as a scalar argument that changes at every launch (`step(t)` forward, `step.grad(t)`
backward, recorded by a `Tape`). The program below runs unchanged under both systems (it
imports `taichi`: spirad through spirad.compat.taichi_alias, or the real Taichi) and prints,
per launch in microseconds, wall time and CPU time (all threads; the fair number on a loaded
machine) for:

    same        step(0) again and again (the same arguments)
    changing    step(t) for t = 0, 1, ... (a new scalar at every launch)
    grad        step.grad(t) for t = ..., 1, 0
    tape        with Tape(loss): step(t) for every t; total()  (forward, record and backward)

Each case runs `--rounds` times alternating between the systems, best round kept. The goal
(issue #23): no slower than Taichi 1.7.4 per launch.
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
x = ti.field(ti.f32, shape=(steps + 1, n), needs_grad=True)
loss = ti.field(ti.f32, shape=(), needs_grad=True)

@ti.kernel
def init():
    for i in range(n):
        x[0, i] = 0.01 * i

@ti.kernel
def step(t: ti.i32):
    for i in range(n):
        x[t + 1, i] = ti.sin(x[t, i]) * 0.9 + 0.1

@ti.kernel
def total():
    for i in range(n):
        loss[None] += x[steps, i]

def timed(fn, count):
    ti.sync()
    w, c = time.perf_counter(), time.process_time()
    fn()
    ti.sync()
    return (time.perf_counter() - w) / count * 1e6, (time.process_time() - c) / count * 1e6

def same():
    for _ in range(steps):
        step(0)

def changing():
    for t in range(steps):
        step(t)

def grad():
    for t in reversed(range(steps)):
        step.grad(t)

def tape():
    with ti.ad.Tape(loss=loss):
        for t in range(steps):
            step(t)
        total()

init()
for fn in (same, changing, grad, tape):  # compile everything, warm up
    fn()
out = []
for name, fn, count in (("same", same, steps), ("changing", changing, steps),
                        ("grad", grad, steps), ("tape", tape, 2 * steps + 2)):
    wall, cpu = timed(fn, count)
    out.append(f"{name}={wall:.2f},{cpu:.2f}")
print("RESULT", " ".join(out), f"{loss[None]:.6f}")
'''


def run(python, arch, n, steps, alias):
    """The program in a fresh process: {case: (wall us, cpu us) per launch}, loss."""
    pre = "from spirad.compat import taichi_alias; taichi_alias.install()\n" if alias else ""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "launch_program.py")
        with open(path, "w") as f:
            f.write(pre + PROGRAM)
        out = subprocess.run([python, path, arch, str(n), str(steps)], capture_output=True,
                             text=True, check=True,
                             env=dict(os.environ, TI_OFFLINE_CACHE="0",
                                      SPIRAD_CACHE_DIR=os.path.join(d, "cache"))).stdout
    fields = out.split("RESULT")[-1].split()
    cases = {}
    for item in fields[:-1]:
        name, v = item.split("=")
        wall, cpu = v.split(",")
        cases[name] = (float(wall), float(cpu))
    return cases, float(fields[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="cpu")
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--taichi-python", help="a Python with Taichi installed")
    a = p.parse_args()
    print_target()
    systems = [("spirad", sys.executable, True)]
    if a.taichi_python:
        systems.append(("taichi", a.taichi_python, False))
    best = {}
    for _ in range(a.rounds):  # alternate, keep the best round of each case
        for name, python, alias in systems:
            cases, loss = run(python, a.arch, a.n, a.steps, alias)
            b = best.setdefault(name, {"loss": loss})
            for case, (wall, cpu) in cases.items():
                old = b.get(case)
                b[case] = (min(wall, old[0]), min(cpu, old[1])) if old else (wall, cpu)
    print(f"launch overhead, arch={a.arch}, n={a.n}, {a.steps} steps: us per launch, "
          f"wall / cpu (best of {a.rounds})")
    cases = ("same", "changing", "grad", "tape")
    print("  " + " " * 8 + "".join(f"{c:>18s}" for c in cases) + "      loss")
    for name, _, _ in systems:
        b = best[name]
        print(f"  {name:8s}" + "".join(f"{b[c][0]:8.1f} /{b[c][1]:7.1f} " for c in cases) +
              f"  {b['loss']:.6f}")
    if len(systems) == 2:
        s, t = best["spirad"], best["taichi"]
        print("  spirad / taichi (cpu time): " +
              ", ".join(f"{c} {s[c][1] / t[c][1]:.2f}x" for c in cases))


if __name__ == "__main__":
    main()
