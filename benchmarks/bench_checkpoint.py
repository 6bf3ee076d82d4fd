"""Checkpointed time stepping against the full tape: a 10,000-step mass-spring simulation.

    python benchmarks/bench_checkpoint.py [--arch cpu] [--steps 10000] [--side 16] [--snapshots 32]

A cloth of side x side particles joined by structural and shear springs falls under gravity for
`--steps` steps (three kernels a step: clear the forces, spring forces by atomic adds, a
symplectic Euler update; with `--substeps m` the update runs m drag substeps per particle, a
dynamic loop whose values live on the adstack). The loss reads the final positions and
velocities; the gradient is taken with respect to every spring's rest length and stiffness and
every initial position.

  full   DiffTaichi's form: positions, velocities and forces indexed by time step (x[t, i],
         v[t, i]: shape (steps + 1, particles); f[t, i]), every launch on one `sd.ad.Tape`
  ckpt   the same arithmetic on fields of one step's size (x[i], v[i], f[i]) updated in place,
         the steps run by `sd.ad.checkpointed(step, state=[x, v], steps=n, snapshots=k)`

Each runs in its own process (so its peak RSS is its own): one untimed Tape (compiles), then
`--reps` timed Tapes (forward and backward); `--rounds` processes per variant, alternating; the
min wall time and the min process CPU time are printed (on a busy machine, CPU time is the
steadier ratio). Printed per variant: time, the bytes
of the state fields with their gradients, the checkpoint copies at their peak (k snapshots,
one step's saved values, the final values), the adstack heaps, and the process' peak RSS and
its growth over the process before any field was made. The gradients of both are compared: the
largest relative difference and whether they are bit-equal (one worker thread makes the atomic
adds' order, and so every float, the same: `--threads 1`, the default), and each variant's
gradients against its own other rounds. Where float atomic adds land in an order that changes
from launch to launch (lavapipe, GPUs), a recomputed step can differ from the first run in the
last bit, and 10,000 stiff steps amplify that to ~1e-3 relative: the same spread as between two
archs (cpu and vulkan full tapes differ by as much).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
from target_info import print_target  # benchmarks/target_info.py


def rss_now_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def springs(side):
    """(a, b, rest, stiffness) of structural and shear springs of a side x side lattice."""
    idx = lambda r, c: r * side + c  # noqa: E731
    out = []
    for r in range(side):
        for c in range(side):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                r2, c2 = r + dr, c + dc
                if 0 <= r2 < side and 0 <= c2 < side:
                    rest = 0.1 * np.hypot(dr, dc)
                    out.append((idx(r, c), idx(r2, c2), rest, 3000.0 if dr * dc == 0 else 1000.0))
    return np.array(out, np.float32)


def worker(variant, arch, n, side, k, reps, threads, out, m):
    import spirad as sd
    kw = {"cpu_max_num_threads": threads} if arch == "cpu" and threads else {}
    sd.init(arch=getattr(sd, arch), **kw)
    rss0 = rss_now_mb()
    P = side * side
    SP = springs(side)
    S = len(SP)
    X0 = np.stack(np.meshgrid(np.arange(side), np.arange(side), indexing="ij"), -1)
    X0 = (X0.reshape(P, 2) * 0.1 + np.array([0.3, 0.6])).astype(np.float32)
    dt, damp = 2e-4, 0.9999
    timed = variant == "full"
    x = sd.Vector.field(2, sd.f32, shape=(n + 1, P) if timed else P, needs_grad=True)
    v = sd.Vector.field(2, sd.f32, shape=(n + 1, P) if timed else P, needs_grad=True)
    # forces: read non-linearly with --substeps, so a full tape must keep every step's too
    f = sd.Vector.field(2, sd.f32, shape=(n, P) if timed else P, needs_grad=True)
    xn = sd.Vector.field(2, sd.f32, shape=P, needs_grad=True)  # --substeps, in place: next x, v
    vn = sd.Vector.field(2, sd.f32, shape=P, needs_grad=True)
    sp = sd.Vector.field(4, sd.f32, shape=S, needs_grad=True)
    x0 = sd.Vector.field(2, sd.f32, shape=P, needs_grad=True)
    loss = sd.field(sd.f32, (), needs_grad=True)
    sp.from_numpy(SP)
    x0.from_numpy(X0)

    @sd.func
    def substeps(xv, vv, fv, m: sd.i32):
        """--substeps m: m drag substeps, a dynamic loop (its values on the adstack)."""
        vv = vv + dt * fv
        h = dt / m
        for _ in range(m):
            vv = vv - h * 0.5 * vv * vv.norm()
            xv = xv + h * vv
        return xv, vv

    if timed:
        @sd.kernel
        def init():
            for i in x0:
                x[0, i] = x0[i]
                v[0, i] = sd.Vector([0.0, 0.0])

        @sd.kernel
        def clear(t: sd.i32):
            for i in x0:
                f[t, i] = sd.Vector([0.0, -9.8])

        @sd.kernel
        def force(t: sd.i32):
            for s in sp:
                a, b = sd.cast(sp[s][0], sd.i32), sd.cast(sp[s][1], sd.i32)
                d = x[t, b] - x[t, a]
                le = d.norm()
                fs = sp[s][3] * (le - sp[s][2]) / le * d
                f[t, a] += fs
                f[t, b] -= fs

        @sd.kernel
        def advance(t: sd.i32):
            for i in x0:
                v[t + 1, i] = v[t, i] * damp + dt * f[t, i]
                x[t + 1, i] = x[t, i] + dt * v[t + 1, i]

        @sd.kernel
        def advance_sub(t: sd.i32, m: sd.i32):
            for i in x0:
                x[t + 1, i], v[t + 1, i] = substeps(x[t, i], v[t, i], f[t, i], m)

        @sd.kernel
        def compute_loss():
            for i in x0:
                loss[None] += x[n, i][1] * x[n, i][0] + 0.1 * v[n, i][0]

        def run():
            init()
            for t in range(n):
                clear(t)
                force(t)
                if m:
                    advance_sub(t, m)
                else:
                    advance(t)
            compute_loss()
            return None
    else:
        @sd.kernel
        def init():
            for i in x0:
                x[i] = x0[i]
                v[i] = sd.Vector([0.0, 0.0])

        @sd.kernel
        def clear():
            for i in f:
                f[i] = sd.Vector([0.0, -9.8])

        @sd.kernel
        def force():
            for s in sp:
                a, b = sd.cast(sp[s][0], sd.i32), sd.cast(sp[s][1], sd.i32)
                d = x[b] - x[a]
                le = d.norm()
                fs = sp[s][3] * (le - sp[s][2]) / le * d
                f[a] += fs
                f[b] -= fs

        @sd.kernel
        def advance():
            for i in f:
                v[i] = v[i] * damp + dt * f[i]
                x[i] = x[i] + dt * v[i]

        @sd.kernel
        def advance_sub(m: sd.i32):
            for i in f:
                xn[i], vn[i] = substeps(x[i], v[i], f[i], m)

        @sd.kernel
        def commit():  # advance_sub reads x and v non-linearly: the new values come after
            for i in f:
                x[i] = xn[i]
                v[i] = vn[i]

        @sd.kernel
        def compute_loss():
            for i in f:
                loss[None] += x[i][1] * x[i][0] + 0.1 * v[i][0]

        def step():
            clear()
            force()
            if m:
                advance_sub(m)
                commit()
            else:
                advance()

        def run():
            init()
            region = sd.ad.checkpointed(step, state=[x, v], steps=n, snapshots=k)
            compute_loss()
            return region

    times, cpu_times = [], []
    region = None
    for r in range(reps + 1):
        sd.sync()
        t0, c0 = time.perf_counter(), time.process_time()
        with sd.ad.Tape(loss=loss):
            region = run()
        sd.sync()
        sp.grad.to_numpy()
        if r:
            times.append(time.perf_counter() - t0)
            cpu_times.append(time.process_time() - c0)
    from spirad.runtime import state as _state
    be = _state.backend()
    field_bytes = sum(int(np.prod(a.shape)) * 2 * 4 * 2 for a in (x, v, f) + ((xn, vn) if m and
                                                                               not timed else ()))
    res = {
        "variant": variant, "time_s": min(times), "cpu_s": min(cpu_times),
        "loss": float(loss[None]),
        "state_bytes": field_bytes, "heap_bytes": list(be.heap_bytes()),
        "rss_start_mb": rss0, "rss_peak_mb": peak_rss_mb(),
    }
    if region is not None:
        st = region.stats
        res.update(copies_peak_bytes=st.peak_bytes, snapshot_bytes=st.snapshot_bytes,
                   max_held=st.max_held, forward_steps=st.forward_steps,
                   recomputed=st.recomputed_steps, taped_steps=st.taped_steps, copies=st.copies)
    np.savez(out, sp=sp.grad.to_numpy(), x0=x0.grad.to_numpy())
    print(json.dumps(res))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="cpu")
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--side", type=int, default=16)
    ap.add_argument("--snapshots", type=int, default=32)
    ap.add_argument("--reps", type=int, default=2, help="timed Tapes per process")
    ap.add_argument("--rounds", type=int, default=2, help="processes per variant, alternating")
    ap.add_argument("--threads", type=int, default=1, help="CPU worker threads (0: default)")
    ap.add_argument("--substeps", type=int, default=0, help="m > 0: the update runs m drag "
                    "substeps per particle (a dynamic loop: the adstack)")
    ap.add_argument("--worker", default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if a.worker:
        worker(a.worker, a.arch, a.steps, a.side, a.snapshots, a.reps, a.threads, a.out,
               a.substeps)
        return
    print_target()  # the parent only (a child's output is read)
    import tempfile
    results, grads, rounds = {}, {}, {"full": [], "ckpt": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.rounds):  # alternating, so that a busy machine slows both alike
            for variant in ("full", "ckpt"):
                out = os.path.join(tmp, variant + ".npz")
                cmd = [sys.executable, os.path.abspath(__file__), "--worker", variant, "--arch",
                       a.arch, "--steps", str(a.steps), "--side", str(a.side), "--snapshots",
                       str(a.snapshots), "--reps", str(a.reps), "--threads", str(a.threads),
                       "--substeps", str(a.substeps), "--out", out]
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode:
                    print(r.stdout[-2000:], r.stderr[-4000:])
                    sys.exit(f"{variant} failed")
                res = json.loads(r.stdout.strip().splitlines()[-1])
                best = results.get(variant)
                if best is not None:
                    res["time_s"] = min(res["time_s"], best["time_s"])
                    res["cpu_s"] = min(res["cpu_s"], best["cpu_s"])
                results[variant] = res
                grads[variant] = dict(np.load(out))
                rounds[variant].append(grads[variant])
    full, ck = results["full"], results["ckpt"]
    P = a.side * a.side
    print(f"mass-spring: {P} particles, {len(springs(a.side))} springs, {a.steps} steps, "
          f"arch {a.arch}, {a.threads or 'default'} worker thread(s); k = {a.snapshots}"
          + (f"; {a.substeps} drag substeps a step (adstack)" if a.substeps else ""))
    mb = 2**20
    for name, r in (("full tape", full), ("checkpointed", ck)):
        extra = ""
        if "copies_peak_bytes" in r:
            extra = (f", copies at peak {r['copies_peak_bytes'] / mb:.3f} MiB (snapshot "
                     f"{r['snapshot_bytes'] / 1024:.1f} KiB, {r['max_held']} held)")
        print(f"  {name:13s} time {r['time_s']:7.2f} s (cpu {r['cpu_s']:6.2f} s)   fields + grads "
              f"{r['state_bytes'] / mb:8.2f} MiB{extra}, adstack heaps "
              f"{sum(r['heap_bytes']) / 1024:.1f} KiB, peak RSS {r['rss_peak_mb']:.0f} MiB "
              f"(+{r['rss_peak_mb'] - r['rss_start_mb']:.0f} MiB over start)")
    print(f"  time ratio checkpointed / full: {ck['time_s'] / full['time_s']:.2f} (cpu time "
          f"{ck['cpu_s'] / full['cpu_s']:.2f})  "
          f"(forward steps {ck['forward_steps']} = {a.steps} + {ck['recomputed']} recomputed, "
          f"{ck['taped_steps']} taped; {ck['copies']} array copies)")
    mem_full = full["state_bytes"]
    mem_ck = ck["state_bytes"] + ck["copies_peak_bytes"]
    print(f"  memory ratio (fields + copies) full / checkpointed: {mem_full / mem_ck:.1f}x")
    for key in ("sp", "x0"):
        g1, g2 = grads["full"][key], grads["ckpt"][key]
        rel = np.abs(g1 - g2).max() / max(np.abs(g1).max(), 1e-30)
        print(f"  d loss / d {key}: max |diff| / max |grad| = {rel:.2e}, bit-equal: "
              f"{bool(np.array_equal(g1, g2))}")
    for variant in ("full", "ckpt"):  # the same program twice: float atomics' order
        runs = rounds[variant]
        if len(runs) > 1:
            rel = max(np.abs(runs[0][k] - r[k]).max() / max(np.abs(runs[0][k]).max(), 1e-30)
                      for r in runs[1:] for k in ("sp", "x0"))
            print(f"  {variant} run to run: max |diff| / max |grad| = {rel:.2e}")
    print(f"  loss: full {full['loss']!r}, checkpointed {ck['loss']!r}")


if __name__ == "__main__":
    main()
