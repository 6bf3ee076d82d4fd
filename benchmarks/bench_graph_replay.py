"""A step of 30 small kernel launches, eager vs replayed from an `sd.Graph`, paired.

    python benchmarks/bench_graph_replay.py [--arch vulkan] [--rounds 4] [--steps 300] [--n 256]

The workload is shaped like a Genesis step (docs/performance.md): 30 launches of ten kinds of
small kernels (`--n` elements each) over six fields and two ndarrays, a scalar `dt` in half of
them, a serial task and an atomic reduction. Modes: `eager` launches the step's kernels;
`graph` captures one step in an `sd.Graph` and replays it with `dt` rebound at every step (on
Vulkan one recorded command buffer re-submitted: spirad/backends/spirv_replay.py). Rows:
`loop` = `--steps` steps then one sync (the host's cost per step while the device keeps up),
`loop host` = the calling thread's CPU time in `loop` (the host's own work: lavapipe runs the
kernels on threads of its own), `synced` = a sync after every step (latency per step). Each child prints the minimum over
`--reps` timings; the modes run in alternating processes (benchmarks/paired.py), and the load
average before and after is printed (a shared 2-core machine)."""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import paired  # noqa: E402  (benchmarks/paired.py)

ROWS = ("loop", "loop host", "synced")


def build(sd, n):
    """The 30 launches of one step: step(dt)."""
    fs = [sd.field(sd.f32, shape=n) for _ in range(6)]
    nds = [sd.ndarray(sd.f32, n) for _ in range(2)]
    acc = sd.field(sd.f32, shape=())
    calls = []
    for j in range(3):
        a, b, c = fs[j], fs[j + 1], fs[j + 2]

        @sd.kernel
        def k_axpy(dt: sd.f32):
            for i in range(n):
                a[i] += b[i] * dt

        @sd.kernel
        def k_to_nd(arr: sd.types.ndarray()):
            for i in range(n):
                arr[i] = a[i] * 0.5 + c[i]

        @sd.kernel
        def k_from_nd(arr: sd.types.ndarray(), dt: sd.f32):
            for i in range(n):
                b[i] = b[i] * 0.99 + arr[(i + 1) % n] * dt

        @sd.kernel
        def k_clamp():
            for i in range(n):
                c[i] = sd.min(sd.max(c[i], -10.0), 10.0)

        @sd.kernel
        def k_sin(dt: sd.f32):
            for i in range(n):
                c[i] += sd.sin(a[i]) * dt

        @sd.kernel
        def k_reduce():
            acc[None] = 0.0
            for i in range(n):
                acc[None] += a[i] * a[i]

        @sd.kernel
        def k_serial(arr: sd.types.ndarray()):
            arr[0] = arr[0] * 0.5 + arr[n - 1] * 1e-3

        @sd.kernel
        def k_swap(x: sd.types.ndarray(), y: sd.types.ndarray()):
            for i in range(n):
                y[i] = x[n - 1 - i]

        @sd.kernel
        def k_damp(dt: sd.f32):
            for i in range(n):
                a[i] *= 1.0 - 0.1 * dt

        @sd.kernel
        def k_mix():
            for i in range(n):
                b[i] = 0.5 * (b[i] + c[i])

        p, q = nds[j % 2], nds[1 - j % 2]
        calls += [(k_axpy, (), True), (k_to_nd, (p,), False), (k_from_nd, (p,), True),
                  (k_clamp, (), False), (k_sin, (), True), (k_reduce, (), False),
                  (k_serial, (p,), False), (k_swap, (p, q), False), (k_damp, (), True),
                  (k_mix, (), False)]
    for k, f in enumerate(fs):
        f.fill(0.01 * (k + 1))

    def step(dt):
        for kern, args, takes_dt in calls:
            kern(*args, dt) if takes_dt else kern(*args)
    return step, fs


def child(args):
    sys.path[:0] = [os.path.dirname(HERE)]  # this checkout's spirad, not another one
    import spirad as sd
    sd.init(arch=args.arch, offline_cache=False)
    step, fs = build(sd, args.n)
    dts = [0.001 * (1 + k % 7) for k in range(args.steps)]
    if args.child == "graph":
        g = sd.Graph()
        with g.capture():
            step(dts[0])
        run = lambda dt: g.replay(dt=dt)  # noqa: E731
        warm = dts[1:20]  # (the capture ran the first step)
    else:
        run, warm = step, dts[:20]
    for dt in warm:  # compile, warm up, record: the same 20 steps in both modes
        run(dt)
    sd.sync()
    out = {"loop": [], "loop host": [], "synced": []}
    for _ in range(args.reps):
        t, c = time.perf_counter(), time.thread_time()
        for dt in dts:
            run(dt)
        sd.sync()
        out["loop"].append((time.perf_counter() - t) / args.steps * 1e6)
        out["loop host"].append((time.thread_time() - c) / args.steps * 1e6)
        t = time.perf_counter()
        for dt in dts:
            run(dt)
            sd.sync()
        out["synced"].append((time.perf_counter() - t) / args.steps * 1e6)
    res = {k: {"us_per_step": min(v)} for k, v in out.items()}
    res["checksum"] = float(sum(float(f.to_numpy().sum()) for f in fs))
    print("RESULT " + json.dumps(res))


def run_one(args, mode):
    return paired.child_result([sys.executable, __file__, "--child", mode, "--arch", args.arch,
                                "--steps", str(args.steps), "--n", str(args.n),
                                "--reps", str(args.reps)])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="vulkan")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--n", type=int, default=256)
    p.add_argument("--child")
    args = p.parse_args()
    if args.child:
        return child(args)
    print(f"load average before: {os.getloadavg()}", flush=True)
    runs = paired.alternate(args.rounds, "graph", "eager", lambda m: run_one(args, m))
    print(f"load average after: {os.getloadavg()}", flush=True)
    sums = {m: {r["checksum"] for r in runs[m]} for m in runs}
    print(f"checksums (the same work in both modes): {sums}")
    paired.print_ratios(args.arch, ROWS, ("us_per_step",), runs, "graph", "eager")


if __name__ == "__main__":
    main()
