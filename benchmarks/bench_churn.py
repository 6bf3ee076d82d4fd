"""Soak: memory and time per round of creating, launching on and dropping arrays (issue #42).

    python benchmarks/bench_churn.py [--arch cpu vulkan metal cuda amdgpu] [--rounds 2000]
                                     [--what ndarray fields fields_kernel] [--n 65536]
                                     [--block 100]
                                     [--sync-every 0]

A round of `ndarray`: `a = sd.ndarray(sd.f32, n)`, a kernel launched on it, `del a` — never
synced unless `--sync-every k` (the case that used to keep every dropped buffer on Vulkan). A
round of `fields`: a `sd.FieldsBuilder` tree with one f32 field of n elements, finalized,
written from numpy, filled, one element read back, `tree.destroy()`. `fields_kernel`: the same
with a kernel launched on the field (`sd.template()`) instead of the host writes — compiled
again for each new field, as in Taichi, so it measures a compile per round too (on the CPU the
LLVM JIT keeps ~90 KB of each compiled module for the process's life: docs/reliability.md).

Printed per arch: resident memory (RSS, from /proc/self/statm) after the warm-up (the first
fifth of the rounds) and at the end, the bytes per round in between, and the wall and process
CPU milliseconds per block of `--block` rounds: the first blocks after warm-up and the last,
and their ratio (level: ~1). Process CPU time includes the driver's threads (lavapipe) and is
less disturbed by other programs on a shared machine than wall time. Metal, CUDA and AMDGPU run
emulated where `SPIRAD_METAL_EMULATE` / `SPIRAD_CUDA_EMULATE` / `SPIRAD_AMDGPU_EMULATE` are set
(docs/gpu.md). Each (arch, what) runs in a process of its own so one's memory does not count
against the next.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(arch: str, what: str, rounds: int, n: int, block: int, sync_every: int) -> dict:
    sys.path.insert(0, os.path.dirname(HERE))  # this checkout's spirad
    import spirad as sd
    sd.init(arch=getattr(sd, arch))

    @sd.kernel
    def inc(a: sd.types.ndarray()):
        for i in a:
            a[i] += 1.0

    @sd.kernel
    def inc_field(x: sd.template()):
        for i in x:
            x[i] += 1.0

    def ndarray_round(r):
        a = sd.ndarray(sd.f32, n)
        inc(a)
        del a
        if sync_every and r % sync_every == 0:
            sd.sync()

    ones = np.ones(n, np.float32)

    def fields_round(r):
        fb = sd.FieldsBuilder()
        x = sd.field(sd.f32)
        fb.dense(sd.i, n).place(x)
        tree = fb.finalize()
        if what == "fields":
            x.from_numpy(ones)
            x.fill(1.0)
        else:
            inc_field(x)
        assert x[n - 1] == 1.0
        tree.destroy()

    step = ndarray_round if what == "ndarray" else fields_round
    warm = max(block, rounds // 5 // block * block)
    wall, cpu = [], []
    t0, c0 = time.perf_counter(), time.process_time()
    rss_warm = None
    for r in range(rounds):
        step(r)
        if (r + 1) % block == 0:
            t, c = time.perf_counter(), time.process_time()
            wall.append((t - t0) * 1e3)
            cpu.append((c - c0) * 1e3)
            t0, c0 = t, c
            if r + 1 == warm:
                sd.sync()
                rss_warm = rss()
    sd.sync()
    end = rss()
    return {"rss_warm": rss_warm, "rss_end": end, "warm": warm, "rounds": rounds,
            "wall": wall, "cpu": cpu, "block": block}


def report(arch, what, res):
    nb = res["warm"] // res["block"]
    wall, cpu = res["wall"][nb:], res["cpu"][nb:]
    if not wall:
        print(f"[{arch:6s} {what:13s}] too few rounds after the warm-up")
        return
    k = max(1, len(wall) // 5)  # first and last fifths of the blocks after warm-up

    def mean(v):
        return sum(v) / len(v)
    per_round = (res["rss_end"] - res["rss_warm"]) / (res["rounds"] - res["warm"])
    print(f"[{arch:6s} {what:13s}] RSS {res['rss_warm'] / 2**20:7.1f} -> {res['rss_end'] / 2**20:7.1f} MiB"
          f" after warm-up ({res['warm']} rounds): {per_round:8.0f} bytes/round; "
          f"ms per {res['block']} rounds, first / last blocks: wall {mean(wall[:k]):7.1f} / "
          f"{mean(wall[-k:]):7.1f} ({mean(wall[-k:]) / mean(wall[:k]):4.2f}x), cpu "
          f"{mean(cpu[:k]):7.1f} / {mean(cpu[-k:]):7.1f} ({mean(cpu[-k:]) / mean(cpu[:k]):4.2f}x)",
          flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", nargs="*", default=["cpu", "vulkan", "metal", "cuda", "amdgpu"])
    p.add_argument("--what", nargs="*", default=["ndarray", "fields", "fields_kernel"],
                   choices=["ndarray", "fields", "fields_kernel"])
    p.add_argument("--rounds", type=int, default=2000)
    p.add_argument("--n", type=int, default=65536)
    p.add_argument("--block", type=int, default=100)
    p.add_argument("--sync-every", type=int, default=0)
    p.add_argument("--child", action="store_true")
    args = p.parse_args()
    if args.child:
        res = child(args.arch[0], args.what[0], args.rounds, args.n, args.block, args.sync_every)
        print("RESULT " + json.dumps(res), flush=True)
        return
    sys.path.insert(0, os.path.dirname(HERE))
    from spirad.backends import arch_available
    print(f"{args.rounds} rounds of {args.n} f32 elements, blocks of {args.block}")
    for arch in args.arch:
        if not arch_available(arch):
            print(f"{arch}: not available, skipped")
            continue
        for what in args.what:
            cmd = [sys.executable, __file__, "--child", "--arch", arch, "--what", what,
                   "--rounds", str(args.rounds), "--n", str(args.n), "--block", str(args.block),
                   "--sync-every", str(args.sync_every)]
            out = subprocess.run(cmd, capture_output=True, text=True)
            line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if out.returncode or line is None:
                print(f"[{arch:6s} {what:13s}] failed: {(out.stderr or out.stdout).strip()[-400:]}")
                continue
            report(arch, what, json.loads(line[len("RESULT "):]))


if __name__ == "__main__":
    main()
