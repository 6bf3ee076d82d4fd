"""Two variants of one workload timed in *alternating processes*, the way the paired benchmarks
(bench_bounds_cost, bench_deterministic) compare them on a shared, noisy machine: round r runs
A then B, round r + 1 runs B then A, each child prints one `RESULT {json}` line of per-row
minima, and the summary is the median over rounds of each variant's minimum, their ratio and
the spread of the per-round ratios (engineering: ratios measured side by side in one run)."""
import json
import statistics
import subprocess
import sys


def child_result(cmd):
    """Run one child process and return the dict of its `RESULT` line."""
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    line = next(ln for ln in text.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def alternate(rounds, a, b, run):
    """{a: [...], b: [...]}: `run(variant)` called in alternating order, `rounds` times each."""
    runs = {a: [], b: []}
    for r in range(rounds):
        for v in ((a, b) if r % 2 == 0 else (b, a)):
            runs[v].append(run(v))
        print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    return runs


def print_ratios(tag, rows, keys, runs, a, b):
    """One line per (row, key): the medians of `a` and `b`, ratio a / b and the per-round spread."""
    for name in rows:
        for k in keys:
            va = [run[name][k] for run in runs[a]]
            vb = [run[name][k] for run in runs[b]]
            ratios = sorted(x / y for x, y in zip(va, vb))
            print(f"[{tag:6s} {name:12s} {k:8s}] {b} {statistics.median(vb):9.2f}  {a} "
                  f"{statistics.median(va):9.2f}  ratio {statistics.median(va) / statistics.median(vb):6.3f}"
                  f"  per-round ratios {ratios[0]:.2f}..{ratios[-1]:.2f}", flush=True)
