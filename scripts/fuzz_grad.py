"""A standing fuzz run of reverse mode: random programs (tests/support/random_grad_programs.py)
differentiated on each arch and checked against the float64 oracle
(tests/support/random_grad_check.py); every failure shrunk (tests/support/shrink_grad.py) and
printed with its seed and arch.

    python scripts/fuzz_grad.py --archs cpu,vulkan --seeds 0:2000 --jobs 2
    python scripts/fuzz_grad.py --archs metal,cuda,amdgpu --seeds 0:300 --features jumps
    python scripts/fuzz_grad.py --archs cpu --seeds 0:24 --features ""    # the plain generator

Archs: cpu, vulkan, metal (f32 programs; emulated on lavapipe: SPIRAD_METAL_EMULATE=1, set here),
cuda, amdgpu (emulated unless a device is there: SPIRAD_CUDA_EMULATE=1 / SPIRAD_AMDGPU_EMULATE=1,
set here), interp. Work goes out in chunks of seeds of one arch; each chunk runs in a fresh
worker process (spawned: one `sd.init` per program, and the fields, kernels and heaps of a chunk
die with its process), `--jobs` at a time, the archs interleaved. A worker that crashes, or runs
one seed past `--timeout` seconds, is reported as a failure of that seed ("crash" / "hang") and its
chunk goes on in a new process from the next seed. As in the tests: the offline cache off (every
program compiles afresh), short CPU ranges on SIMD lanes (SPIRAD_CPU_SPMD_MIN_TRIPS=0), `debug=True`
(`--no-debug`: the release pipeline, with the passes debug mode turns off, such as
passes/bounds_versioning; the shrinker then runs without debug too);
`--validation` turns the Vulkan validation layer on, and a message fails the seed.

Exit status: 0 when every seed passed, 1 otherwise.
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import os
import queue
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # this checkout's spirad and tests.support, not an installed copy
    sys.path.insert(0, ROOT)

EMULATE = {"metal": "SPIRAD_METAL_EMULATE", "cuda": "SPIRAD_CUDA_EMULATE",
           "amdgpu": "SPIRAD_AMDGPU_EMULATE"}
ARCHS = ("cpu", "vulkan", "metal", "cuda", "amdgpu", "interp")


def _env(archs, validation):
    for a in archs:
        if a in EMULATE:
            os.environ.setdefault(EMULATE[a], "1")
    os.environ.setdefault("SPIRAD_CPU_SPMD_MIN_TRIPS", "0")
    os.environ.setdefault("SPIRAD_OFFLINE_CACHE", "0")
    if validation:
        os.environ["SPIRAD_VALIDATION"] = "1"


def shrinkable(o: str) -> bool:
    """A failure of spirad on the program (not: passed, a validation message, a harness or
    generator fault such as a loss that is not smooth at the data)."""
    return o in ("grad", "forward") or o.startswith("error")


def worker(arch, seeds, features, opts, out):
    """Run `seeds` on `arch`, one message per event on `out`."""
    import warnings
    warnings.simplefilter("ignore")
    import spirad as sd
    import spirad.runtime.state as st
    from spirad.backends import arch_available
    from tests.support.random_grad_check import arch_fp, init_kwargs, outcome, set_debug
    from tests.support.random_grad_programs import generate
    from tests.support.shrink_grad import report, shrink

    set_debug(opts["debug"])
    if not arch_available(arch):
        out.put(("unavailable", arch, None, None, None))
        return
    for seed in seeds:
        out.put(("start", arch, seed, None, None))
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            prog = generate(seed, arch_fp(arch), features)
            sd.init(**init_kwargs(arch))
            o = outcome(prog, smooth_check=True)  # "nonsmooth": the generator's fault
            be = st.current().backend
            msgs = be.take_validation_messages() if be is not None and opts["validation"] else []
            if msgs and o == "ok":
                o = "validation: " + msgs[0].splitlines()[0]
        except Exception as e:  # noqa: BLE001 - the generator or the oracle broke: report it
            o = f"harness: {type(e).__name__}: {e}\n{traceback.format_exc()}"
        dt = (time.perf_counter() - t0, time.process_time() - c0)  # wall, CPU (all threads)
        out.put(("done", arch, seed, o, dt))
        if shrinkable(o) and opts["shrink"]:
            out.put(("shrinking", arch, seed, None, None))
            try:
                small = shrink(prog, arch, max_checks=opts["shrink_checks"],
                               max_seconds=opts["shrink_seconds"])
                text = report(small, arch)
            except Exception as e:  # noqa: BLE001 - keep the unshrunk program
                text = f"# (not shrunk: {type(e).__name__}: {e})\n" + report(prog, arch)
            out.put(("shrunk", arch, seed, text, None))


class Pool:
    """`jobs` worker processes over a queue of (arch, seeds) chunks; crashes and hangs are
    failures of the seed that was running, and the chunk goes on from the next seed."""

    def __init__(self, jobs, features, opts, timeout):
        self.ctx = mp.get_context("spawn")
        self.out = self.ctx.Queue()
        self.jobs, self.features, self.opts, self.timeout = jobs, features, opts, timeout
        self.running = {}  # (arch, first seed) -> [process, remaining seeds, current, deadline]

    def start(self, arch, seeds):
        p = self.ctx.Process(target=worker, args=(arch, seeds, self.features, self.opts, self.out),
                             daemon=True)
        p.start()
        self.running[(arch, seeds[0])] = [p, list(seeds), None, None]

    def _slot(self, arch, seed):
        for k, v in self.running.items():
            if k[0] == arch and seed in v[1]:
                return k, v
        return None, None

    def events(self, chunks):
        """Yield (kind, arch, seed, payload, seconds) until every chunk is done."""
        chunks = collections.deque(chunks)
        reaped = time.time()
        while chunks or self.running:
            while chunks and len(self.running) < self.jobs:
                self.start(*chunks.popleft())
            if time.time() - reaped > 5:  # also while others keep talking
                yield from self._reap(chunks, quiet=False)
                reaped = time.time()
            try:
                kind, arch, seed, payload, dt = self.out.get(timeout=1.0)
            except queue.Empty:
                yield from self._reap(chunks)
                reaped = time.time()
                continue
            key, slot = self._slot(arch, seed) if seed is not None else (None, None)
            if kind == "unavailable":
                for k in [k for k in self.running if k[0] == arch]:
                    for s in self.running[k][1]:
                        yield ("unavailable", arch, s, None, None)
                    self.running.pop(k)[0].kill()
                chunks = collections.deque(c for c in chunks if c[0] != arch)
                continue
            if slot is None:
                continue
            if kind == "start":
                slot[2], slot[3] = seed, time.time() + self.timeout
            elif kind == "shrinking":
                slot[3] = time.time() + self.timeout + self.opts["shrink_seconds"] * 2
            elif kind == "done":
                yield (kind, arch, seed, payload, dt)
                if not shrinkable(payload) or not self.opts["shrink"]:
                    self._finished(key, slot, seed)
            elif kind == "shrunk":
                yield (kind, arch, seed, payload, None)
                self._finished(key, slot, seed)

    def _finished(self, key, slot, seed):
        slot[1].remove(seed)
        slot[2] = slot[3] = None
        if not slot[1]:
            slot[0].join(timeout=30)
            self.running.pop(key, None)

    def _reap(self, chunks, quiet=True):
        """Workers that hang, or died (`quiet`: nothing came for a second, so whatever they sent
        is handled): the seed that ran fails, the rest of the chunk goes back to the queue."""
        for key, (p, rest, cur, deadline) in list(self.running.items()):
            hung = deadline is not None and time.time() > deadline
            if (p.is_alive() or not quiet) and not hung:
                continue
            if p.is_alive():
                p.kill()
            p.join(timeout=10)
            self.running.pop(key)
            blame = cur if cur is not None else rest[0]  # died before its first seed: that one
            what = "hang" if hung else f"crash (exit code {p.exitcode})"
            yield ("done", key[0], blame, what, None)
            rest.remove(blame)
            if rest:
                chunks.appendleft((key[0], rest))


def parse_seeds(text):
    a, _, b = text.partition(":")
    return range(int(a), int(b)) if b else range(int(a), int(a) + 1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archs", default="cpu,vulkan", help=f"comma-separated, of {ARCHS}")
    ap.add_argument("--seeds", default="0:200", help="a:b (b excluded), or one seed")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes at a time")
    ap.add_argument("--features", default="jumps",
                    help="generator features, comma-separated ('' for the plain programs)")
    ap.add_argument("--chunk", type=int, default=25, help="seeds per worker process")
    ap.add_argument("--timeout", type=float, default=300, help="seconds one seed may take")
    ap.add_argument("--no-shrink", dest="shrink", action="store_false")
    ap.add_argument("--shrink-checks", type=int, default=400, help="candidates per failure")
    ap.add_argument("--shrink-seconds", type=float, default=600, help="time per failure")
    ap.add_argument("--validation", action="store_true", help="Vulkan validation layer on")
    ap.add_argument("--no-debug", dest="debug", action="store_false",
                    help="init(debug=False): the release pipeline (bounds versioning included)")
    a = ap.parse_args(argv)
    archs = [x.strip() for x in a.archs.split(",") if x.strip()]
    bad = [x for x in archs if x not in ARCHS]
    if bad:
        ap.error(f"unknown archs {bad}; known: {ARCHS}")
    features = tuple(f for f in a.features.split(",") if f)
    seeds = list(parse_seeds(a.seeds))
    _env(archs, a.validation)
    opts = {"shrink": a.shrink, "shrink_checks": a.shrink_checks,
            "shrink_seconds": a.shrink_seconds, "validation": a.validation,
            "debug": a.debug}
    per_arch = [[(arch, seeds[i:i + a.chunk]) for i in range(0, len(seeds), a.chunk)]
                for arch in archs]
    chunks = [c for group in zip(*per_arch) for c in group]  # interleaved: every arch advances
    print(f"fuzz_grad: archs {','.join(archs)}, seeds {a.seeds}, features {features or '()'}, "
          f"{a.jobs} jobs{'' if a.debug else ', debug off'}", flush=True)

    t0 = time.time()
    stats = {arch: collections.Counter() for arch in archs}
    seconds = collections.defaultdict(float)  # wall time of the checks, per arch
    cpu = collections.defaultdict(float)      # their CPU time (load-independent)
    failures = []
    for kind, arch, seed, payload, dt in Pool(a.jobs, features, opts, a.timeout).events(chunks):
        if kind == "unavailable":
            stats[arch]["unavailable"] += 1
        elif kind == "done":
            stats[arch]["seeds"] += 1
            seconds[arch] += dt[0] if dt else 0.0
            cpu[arch] += dt[1] if dt else 0.0
            if payload != "ok":
                stats[arch]["failed"] += 1
                failures.append((arch, seed, payload.splitlines()[0]))
                print(f"FAIL seed {seed} arch {arch}: {payload.splitlines()[0]}", flush=True)
                if payload.startswith("harness"):
                    print(payload, flush=True)
        elif kind == "shrunk":
            print(f"--- seed {seed} arch {arch}, shrunk "
                  f"(python -m tests.support.shrink_grad --arch {arch} --seed {seed} "
                  f"--features '{','.join(features)}') ---\n{payload}\n---", flush=True)
        done = sum(s["seeds"] for s in stats.values())
        if kind == "done" and done % 25 == 0:
            per = ", ".join(f"{x} {stats[x]['seeds']} ({seconds[x] / stats[x]['seeds']:.1f} s, "
                            f"CPU {cpu[x] / stats[x]['seeds']:.1f} s)"
                            for x in archs if stats[x]["seeds"])
            print(f"... {done} seeds, {len(failures)} failures, {time.time() - t0:.0f} s: {per}",
                  flush=True)

    print(f"\n== summary ({time.time() - t0:.0f} s wall, {a.jobs} jobs) ==")
    for arch in archs:
        s = stats[arch]
        if s["unavailable"]:
            print(f"{arch:7s} unavailable ({s['unavailable']} seeds not run)")
            continue
        per = seconds[arch] / s["seeds"] if s["seeds"] else 0.0
        print(f"{arch:7s} {s['seeds']:5d} seeds  {s['failed']:4d} failed  {per:.2f} s/seed "
              f"(CPU {cpu[arch] / max(s['seeds'], 1):.2f} s/seed)")
    for arch, seed, what in failures:
        print(f"  seed {seed} arch {arch}: {what}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
