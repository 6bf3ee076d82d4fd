"""Forward / grad times and binding counts on vulkan and metal, this tree against a git ref.

    SPIRAD_METAL_EMULATE=1 python benchmarks/bench_bindings.py [--ref 24fe992] [--rounds 3]

(24fe992: the last commit before root buffers; docs/metal.md has the table it gave.)

Why: fields moved from one storage buffer each into shared root buffers (issue 22); a kernel's
binding count no longer grows with its fields, and its launches must not get slower. Each
workload runs in a fresh subprocess, alternating between this tree ("after") and `--ref`
extracted with `git archive` ("before"), `--rounds` times each; per arch and workload the table
shows the median time per launch (forward, grad: its adjoint) of both sides, after/before, and the
storage buffers each task of the kernel binds (forward / adjoint, the largest task; "refused"
where the compile was refused). Two times per launch: wall (the launch with the device: on a
shared machine it follows the load of other processes) and cpu (the CPU time of the launching
thread: the launch path itself, steady under load). Without `--ref` only this tree runs.

Workloads (every one differentiable, float32):
  axpy      y[i] += a * x[i] over 1M elements (2 fields + gradients)
  fields8   one loss over 8 fields of 64K elements (16 arrays with gradients)
  cloth     the mass-spring cloth step of tests/autodiff/test_cloth.py (8x8, 161 springs),
            20 steps of compute_forces + step per launch group
  tiny      a one-element kernel, batched launches (launch overhead)
  nd_tiny   the same over two ndarrays (with gradients): the ndarray launch path
  nd_swap   nd_tiny with its two ndarrays swapped at every launch (a new plan each launch)
  nd8       a gradient over 8 ndarrays with a run-time loop (an autodiff stack)

A workload the `--ref` tree's copy of this script lacks runs with this script against that
tree's packages (the ndarray workloads were added with ndarray arenas, issue 38).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from target_info import print_target  # benchmarks/target_info.py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKLOADS = ("axpy", "fields8", "cloth", "tiny", "nd_tiny", "nd_swap", "nd8")


# -- one side, in a subprocess ---------------------------------------------------------------------
def _bindings(kernel, mode):
    """Storage buffers of the largest task of the kernel's last program (mode 0 forward, 1
    adjoint); None off the SPIR-V backends."""
    try:
        prog = kernel._plans[mode].compiled.program
        return max(m.num_bindings - len(getattr(m, "uniform_bindings", ())) for m in prog.tasks)
    except (AttributeError, TypeError, ValueError, IndexError):
        return None


def _time(fn, reps):
    """(median wall time of `fn` + sync, median CPU time of this thread in `fn`): the second is
    the launch path's own cost (recording, binding), which other processes on a shared machine
    do not inflate; the first includes the device (lavapipe's threads)."""
    import spirad as sd
    fn()
    sd.sync()
    ts, cs = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.thread_time()
        fn()
        c1 = time.thread_time()
        sd.sync()
        ts.append(time.perf_counter() - t0)
        cs.append(c1 - c0)
    return statistics.median(ts), statistics.median(cs)


def work_axpy(sd, reps):
    n = 1 << 20
    x = sd.field(sd.f32, shape=n, needs_grad=True)
    y = sd.field(sd.f32, shape=n, needs_grad=True)
    x.fill(0.5)

    @sd.kernel
    def axpy(a: sd.f32):
        for i in x:
            y[i] += a * x[i]
    fwd = _time(lambda: axpy(2.0), reps)
    y.grad.fill(1.0)
    grad = _time(lambda: axpy.grad(2.0), reps)
    return fwd, grad, axpy


def work_fields8(sd, reps):
    n = 1 << 16
    fs = [sd.field(sd.f32, shape=n, needs_grad=True) for _ in range(8)]
    loss = sd.field(sd.f32, shape=(), needs_grad=True)
    for j, f in enumerate(fs):
        f.fill(0.1 * j)

    @sd.kernel
    def k():
        for i in range(n):
            loss[None] += (fs[0][i] * fs[1][i] + fs[2][i] * fs[3][i]
                           + sd.sin(fs[4][i]) * fs[5][i] + fs[6][i] * fs[7][i])
    fwd = _time(k, reps)
    loss.grad[None] = 1.0
    grad = _time(k.grad, reps)
    return fwd, grad, k


def work_cloth(sd, reps):
    import importlib.util

    import numpy as np
    spec = importlib.util.spec_from_file_location(  # this tree's cloth, whichever spirad runs
        "bench_cloth", os.path.join(ROOT, "tests", "autodiff", "test_cloth.py"))
    tc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tc)
    x0, v0, rest_np, ab = tc.initial_state()
    ns, steps = len(ab), 20
    x = sd.Vector.field(3, sd.f32, shape=(steps + 1, tc.NP), needs_grad=True)
    v = sd.Vector.field(3, sd.f32, shape=(steps + 1, tc.NP), needs_grad=True)
    force = sd.Vector.field(3, sd.f32, shape=(steps, tc.NP), needs_grad=True)
    sa, sb = sd.field(sd.i32, shape=ns), sd.field(sd.i32, shape=ns)
    rest = sd.field(sd.f32, shape=ns, needs_grad=True)
    stiff = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def compute_forces(t: sd.i32):
        for s in range(ns):
            a, b = sa[s], sb[s]
            d = x[t, a] - x[t, b]
            ln = d.norm()
            fs = stiff[None] * (ln - rest[s]) / ln * d
            force[t, a] += -fs
            force[t, b] += fs

    @sd.kernel
    def step(t: sd.i32):
        for p in range(tc.NP):
            nv = v[t, p] * tc.DAMP + tc.DT * (force[t, p] + sd.Vector([0.0, tc.GRAVITY, 0.0]))
            if p < tc.SIDE:
                nv = sd.Vector([0.0, 0.0, 0.0])
            v[t + 1, p] = nv
            x[t + 1, p] = x[t, p] + tc.DT * nv

    xs = np.zeros((steps + 1, tc.NP, 3), np.float32)
    xs[0] = x0
    x.from_numpy(xs)
    sa.from_numpy(ab[:, 0].copy())
    sb.from_numpy(ab[:, 1].copy())
    rest.from_numpy(rest_np.astype(np.float32))
    stiff[None] = tc.K0

    def fwd():
        for t in range(steps):
            compute_forces(t)
            step(t)

    def grad():
        for t in reversed(range(steps)):
            step.grad(t)
            compute_forces.grad(t)
    f = [t / (2 * steps) for t in _time(fwd, reps)]
    g = [t / (2 * steps) for t in _time(grad, reps)]
    return f, g, compute_forces


def work_tiny(sd, reps):
    x = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def tiny(v: sd.f32):
        x[None] = v * v
    launches = 500
    x.grad[None] = 1.0

    def fwd():
        for _ in range(launches):
            tiny(1.0)

    def grad():
        for _ in range(launches):
            tiny.grad(1.0)
    return ([t / launches for t in _time(fwd, reps)], [t / launches for t in _time(grad, reps)],
            tiny)


def work_nd_tiny(sd, reps):
    """A one-element kernel over two ndarrays (with gradients), batched launches with the same
    arguments: the launch path of ndarray kernels (arena offsets in the argument block)."""
    a = sd.ndarray(sd.f32, 4, needs_grad=True)
    b = sd.ndarray(sd.f32, 4, needs_grad=True)

    @sd.kernel
    def nd_tiny(x: sd.types.ndarray(), y: sd.types.ndarray(), v: sd.f32):
        y[0] = x[0] * v
    launches = 500
    b.grad.fill(1.0)

    def fwd():
        for _ in range(launches):
            nd_tiny(a, b, 1.0)

    def grad():
        for _ in range(launches):
            nd_tiny.grad(a, b, 1.0)
    return ([t / launches for t in _time(fwd, reps)], [t / launches for t in _time(grad, reps)],
            nd_tiny)


def work_nd_swap(sd, reps):
    """`nd_tiny` launched with alternating ndarrays (a, b), (b, a): a new launch plan at every
    launch (argument block, storages, and with arenas the offsets and the variant check)."""
    a = sd.ndarray(sd.f32, 4, needs_grad=True)
    b = sd.ndarray(sd.f32, 4, needs_grad=True)

    @sd.kernel
    def nd_swap(x: sd.types.ndarray(), y: sd.types.ndarray(), v: sd.f32):
        y[0] = x[0] * v
    launches = 500
    a.grad.fill(1.0)
    b.grad.fill(1.0)

    def fwd():
        for i in range(launches):
            nd_swap(a, b, 1.0) if i & 1 else nd_swap(b, a, 1.0)

    def grad():
        for i in range(launches):
            nd_swap.grad(a, b, 1.0) if i & 1 else nd_swap.grad(b, a, 1.0)
    return ([t / launches for t in _time(fwd, reps)], [t / launches for t in _time(grad, reps)],
            nd_swap)


def work_nd8(sd, reps):
    """A gradient kernel over 8 ndarrays of 4096 elements with a run-time loop (an autodiff
    stack); its adjoint bound 23 storage buffers with a buffer per ndarray."""
    import numpy as np
    n, m = 8, 4096
    arrs = [sd.ndarray(sd.f32, m, needs_grad=True) for _ in range(n)]
    for j, a in enumerate(arrs):
        a.fill(0.05 * j)
    nt = sd.ndarray(sd.i32, m)
    nt.from_numpy((np.arange(m) % 5 + 1).astype(np.int32))
    out = sd.ndarray(sd.f32, m, needs_grad=True)

    @sd.kernel
    def nd8(a0: sd.types.ndarray(), a1: sd.types.ndarray(), a2: sd.types.ndarray(),
            a3: sd.types.ndarray(), a4: sd.types.ndarray(), a5: sd.types.ndarray(),
            a6: sd.types.ndarray(), a7: sd.types.ndarray(), nt: sd.types.ndarray(),
            out: sd.types.ndarray()):
        for i in range(m):
            s = 0.0
            for t in range(nt[i]):
                s = sd.sin(s) * 0.9 + sd.cos(s) * (a0[i] + a1[i] * 0.5 + a2[i] * 0.25 + a3[i]
                                                    + a4[i] * 0.125 + a5[i] + a6[i] * 0.5 + a7[i])
            out[i] = s
    out.grad.fill(1.0)
    fwd = _time(lambda: nd8(*arrs, nt, out), reps)
    grad = _time(lambda: nd8.grad(*arrs, nt, out), reps)
    return fwd, grad, nd8


def run_side(arch, workload, reps):
    """Child process: one workload on one arch; prints one JSON line."""
    import spirad as sd
    try:
        sd.init(arch=getattr(sd, arch))
        fwd, grad, kernel = globals()["work_" + workload](sd, reps)
        out = {"fwd": fwd[0], "fwd_cpu": fwd[1], "grad": grad[0], "grad_cpu": grad[1],
               "b_fwd": _bindings(kernel, 0), "b_grad": _bindings(kernel, 1)}
    except Exception as e:  # noqa: BLE001 - a refused compile is a result of this benchmark
        out = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
    print(json.dumps(out))


# -- the driver ------------------------------------------------------------------------------------
def _checkout(ref: str) -> str:
    d = tempfile.mkdtemp(prefix="spirad-bench-ref-")
    tar = subprocess.run(["git", "-C", ROOT, "archive", "--format=tar", ref], check=True,
                         capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", d], input=tar, check=True)
    return d


def _child(tree, arch, workload, reps):
    env = dict(os.environ, PYTHONPATH=tree, SPIRAD_OFFLINE_CACHE="0")
    script = os.path.join(tree, "benchmarks", "bench_bindings.py")
    if not os.path.exists(script) or f"def work_{workload}(" not in open(script).read():
        script = os.path.abspath(__file__)  # an older tree: this script against its packages
    r = subprocess.run([sys.executable, script, "--child", arch, workload, str(reps)], env=env,
                       capture_output=True, text=True, cwd=tree, timeout=1200)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": (r.stderr.strip().splitlines() or
                                                          ["no output"])[-1][:120]}


def _fmt_t(t):
    return f"{t * 1e6:8.1f}" if t is not None else "       -"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ref", default=None, help="git ref to compare against (e.g. main)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--archs", default="vulkan,metal")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        run_side(a.child[0], a.child[1], int(a.child[2]))
        return
    print_target()  # the parent only (a child's output is read)
    os.environ.setdefault("SPIRAD_METAL_EMULATE", "1")
    sides = {"after": ROOT}
    if a.ref:
        sides["before"] = _checkout(a.ref)
    print(f"after = this tree ({ROOT}); before = {a.ref or '-'}; median of {a.rounds} fresh "
          f"processes per side, alternating; us per launch: wall (with the device) and cpu (this "
          f"thread: the launch path)")
    print(f"{'arch':7s}{'workload':9s}{'side':8s}{'fwd wall':>9s}{'fwd cpu':>9s}{'grad wall':>10s}"
          f"{'grad cpu':>9s}  bindings fwd/grad")
    for arch in a.archs.split(","):
        for w in a.workloads.split(","):
            runs = {s: [] for s in sides}
            for _ in range(a.rounds):
                for s, tree in sides.items():
                    runs[s].append(_child(tree, arch, w, a.reps))
            med = {}
            for s in sides:
                ok = [r for r in runs[s] if "error" not in r]
                if not ok:
                    print(f"{arch:7s}{w:9s}{s:8s}  refused / failed: {runs[s][0]['error']}")
                    continue
                m = [statistics.median(r[k] for r in ok)
                     for k in ("fwd", "fwd_cpu", "grad", "grad_cpu")]
                med[s] = m
                print(f"{arch:7s}{w:9s}{s:8s}{_fmt_t(m[0]):>9s}{_fmt_t(m[1]):>9s}"
                      f"{_fmt_t(m[2]):>10s}{_fmt_t(m[3]):>9s}  {ok[0]['b_fwd']}/{ok[0]['b_grad']}")
            if len(med) == 2:
                r = [a_ / b_ for a_, b_ in zip(med["after"], med["before"])]
                print(f"{'':16s}{'ratio':8s}{r[0]:8.2f}x{r[1]:8.2f}x{r[2]:9.2f}x{r[3]:8.2f}x"
                      f"  (after / before)")


if __name__ == "__main__":
    main()
