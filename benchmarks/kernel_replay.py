"""One launch of a Genesis kernel on the CPU, saved and replayed without Genesis: for timing
a kernel's code alone and for instruction-level profiles (callgrind) of it.

    # save: the scene built and stepped --warm times, then every buffer, the argument bytes and
    # ranges of the named kernels' next launch, their task list and ABI and the compiled object
    PYTHONPATH=$PWD:$PWD/spirad/compat/quadrants_shim:$PWD/benchmarks GS_ENABLE_NDARRAY=1 \\
        python benchmarks/kernel_replay.py save box --n-envs 256 --warm 60 --out /tmp/cap \\
        --kernels kernel_detection kernel_substep_post [--qd-init check_bounds=false] \\
        [--lanes-at forward_dynamics.py:1827 ...] [--ranges]
    # replay: the saved object (or --recompile: the saved task list compiled by this checkout's
    # code generator, with this process' checks), the buffers restored before every launch
    PYTHONPATH=$PWD python benchmarks/kernel_replay.py run /tmp/cap/kernel_detection.pkl \\
        --repeat 200 [--recompile] [--check-bounds 0] [--blob-out FILE] [--blob FILE] [--threads 1] \\
        [--lanes kernel_detection_t7]

`run` prints the fastest and median launch (µs, perf_counter around the backend's launch) and
a digest of every buffer after the last launch, so two code generators can be compared for the
same results. Under callgrind (`valgrind --tool=callgrind --dump-instr=yes`) the host's
AVX-512 code cannot run: save with SPIRAD_CPU_TARGET=x86-64-v3 (or --recompile with it and
--blob-out natively first, then `run --blob` under valgrind: compiling inside valgrind is
slow). `--toggle` starts callgrind's instrumentation only around the timed launches
(`callgrind_control`-free: a client request from a tiny C library built with gcc).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import statistics
import sys
import time

import numpy as np


def _pick_loops(a):
    """`save --lanes-at` / `--ranges`: the forward programs' loop choice wrapped (the
    offline cache off, since it does not key on this): loops at the given `file:line`s made lane
    tasks besides `work_estimate.worth_lanes`' own; with `--ranges` every provably independent
    loop of at least `fewest_lane_trips` known trips a scalar range task instead (for `run
    --lanes TASK`, one loop at a time)."""
    if not (a.lanes_at or a.ranges):
        return
    os.environ["SPIRAD_OFFLINE_CACHE"] = "0"
    from llvm_codegen.codegen import fewest_lane_trips
    from spirad import options
    from spirad.backends.work_estimate import _known_trips
    from spirad.compile import driver
    parallelise, at = driver.parallelise, set(a.lanes_at)

    def where(loop):
        loc = loop.loc
        return f"{os.path.basename(loc.filename)}:{loc.lineno}" if loc else "?"

    def picked(k, worth=None, lanes=False, aliases=None):
        if a.ranges:
            least = fewest_lane_trips(options.llvm_codegen_options())
            return parallelise(k, lambda loop: (_known_trips(loop) or 0) >= least,
                               lanes=False, aliases=aliases)
        return parallelise(k, lambda loop: where(loop) in at or worth(loop), lanes=lanes,
                           aliases=aliases)
    driver.parallelise = picked


def save(a):
    import genesis as gs
    import quadrants as qd
    from genesis_scene import add_init_keywords, built_stepping_scene
    from spirad.backends import cpu
    _pick_loops(a)
    add_init_keywords(qd, a.qd_init)
    built = {}
    orig_build = cpu.CpuBackend._build

    def build(self, tl, abi, blob):
        program = orig_build(self, tl, abi, blob)
        built[id(program)] = (tl, abi, blob)
        return program
    cpu.CpuBackend._build = build
    armed, saved = [False], set()

    def keep(program, storages, argbuf, ranges):
        name = program.name
        if not armed[0] or name not in a.kernels or name in saved:
            return
        tl, abi, blob = built[id(program)]
        bufs = [None if s is None else np.array(s, copy=True) for s in storages]
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, name + ".pkl"), "wb") as f:
            pickle.dump({"tl": tl, "abi": abi, "blob": tuple(blob), "storages": bufs,
                         "argbuf": bytes(argbuf), "ranges": ranges,
                         "oob": program.oob}, f, protocol=5)
        saved.add(name)
        print(f"saved {name}: {sum(b.nbytes for b in bufs if b is not None)} bytes of buffers")
    orig_launch, orig_eager = cpu.CpuBackend.launch, cpu.CpuBackend.eager_entry

    def launch(self, program, storages, argbuf, ranges, adstack=None):
        keep(program, storages, argbuf, ranges)
        return orig_launch(self, program, storages, argbuf, ranges, adstack)

    def eager_entry(self, program, storages, argbuf, ranges):
        run = orig_eager(self, program, storages, argbuf, ranges)
        if run is None:
            return None

        def kept():
            keep(program, storages, argbuf, ranges)
            run()
        kept.keep = run.keep
        return kept
    cpu.CpuBackend.launch, cpu.CpuBackend.eager_entry = launch, eager_entry
    gs.init(backend=gs.cpu, logging_level="warning", precision="32", seed=0)
    scene = built_stepping_scene(gs, qd, a.scene, a.n_envs)
    for _ in range(a.warm):
        scene.step()
    armed[0] = True
    scene.step()
    missing = set(a.kernels) - saved
    if missing:
        sys.exit(f"not launched in the step: {sorted(missing)}")


def _toggle_lib():
    """ctypes functions (start, stop) issuing callgrind's client requests, or None."""
    import ctypes
    import subprocess
    import tempfile
    src = ("#include <valgrind/callgrind.h>\nvoid cg_start(void){CALLGRIND_ZERO_STATS;"
           "CALLGRIND_START_INSTRUMENTATION;}\nvoid cg_stop(void){CALLGRIND_STOP_INSTRUMENTATION;"
           "CALLGRIND_DUMP_STATS;}\n")
    d = tempfile.mkdtemp()
    with open(os.path.join(d, "t.c"), "w") as f:
        f.write(src)
    so = os.path.join(d, "t.so")
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-o", so, os.path.join(d, "t.c")],
                   check=True)
    lib = ctypes.CDLL(so)
    return lib.cg_start, lib.cg_stop


def run(a):
    import spirad as sd
    from spirad.runtime import state
    with open(a.capture, "rb") as f:
        cap = pickle.load(f)
    check = cap["oob"] if a.check_bounds is None else bool(a.check_bounds)
    sd.init(arch=sd.cpu, check_bounds=check, offline_cache=False,
            cpu_max_num_threads=a.threads)
    be = state.backend()
    tl, abi = cap["tl"], cap["abi"]
    if a.lanes:  # serialised loops made parallel, compiled in SIMD lanes (Task.lanes)
        from dataclasses import replace
        tl = replace(tl, tasks=tuple(replace(t, lanes=True) if t.name in a.lanes else t
                                     for t in tl.tasks))
    t0 = time.process_time()
    if a.blob:
        with open(a.blob, "rb") as f:
            program = be.import_program(tl, abi, pickle.load(f))
    elif a.recompile:
        from spirad.compile import gc_pause
        with gc_pause.paused():  # as the driver compiles: the collector cost ~1.5 s here
            program = be.compile(tl, abi)
        print(f"compiled in {time.process_time() - t0:.1f} s of CPU "
              f"(checks {'on' if check else 'off'})")
    else:
        program = be.import_program(tl, abi, cap["blob"])
    if a.blob_out:
        with open(a.blob_out, "wb") as f:
            pickle.dump(be.export_program(program), f, protocol=5)
    if a.ir_out:
        with open(a.ir_out, "w") as f:
            f.write(program.blob.optimized)
    import ctypes
    for sym, fn in zip(program.blob.symbols, program.fns):
        print(f"task {sym} at {ctypes.cast(fn, ctypes.c_void_p).value:#x}")
    saved = cap["storages"]
    storages = [None if s is None else s.copy() for s in saved]
    argbuf, ranges = cap["argbuf"], cap["ranges"]
    toggle = _toggle_lib() if a.toggle else None
    times = []
    for k in range(a.repeat):
        for dst, src in zip(storages, saved):
            if dst is not None:
                np.copyto(dst, src)
        if toggle and k == a.repeat - 1:
            toggle[0]()
        t = time.perf_counter()
        be.launch(program, storages, argbuf, ranges)
        times.append(time.perf_counter() - t)
        if toggle and k == a.repeat - 1:
            toggle[1]()
    be.sync()
    h = hashlib.sha256()
    for s in storages:
        if s is not None:
            h.update(s.tobytes())
    us = [1e6 * t for t in times]
    print(f"{tl.name}: {a.repeat} launches, fastest {min(us):.1f} us, median "
          f"{statistics.median(us):.1f} us; buffers after: {h.hexdigest()[:16]}; load "
          f"{open('/proc/loadavg').read().split()[0]}")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save")
    s.add_argument("scene")
    s.add_argument("--n-envs", type=int, default=0)
    s.add_argument("--warm", type=int, default=60)
    s.add_argument("--kernels", nargs="+", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--qd-init", nargs="*", metavar="KEY=JSON", default=[])
    s.add_argument("--lanes-at", nargs="+", metavar="FILE:LINE", default=[],
                   help="the provably independent loops at these source lines as lane tasks")
    s.add_argument("--ranges", action="store_true",
                   help="every provably independent loop a scalar range task (for run --lanes)")
    r = sub.add_parser("run")
    r.add_argument("capture")
    r.add_argument("--repeat", type=int, default=100)
    r.add_argument("--recompile", action="store_true")
    r.add_argument("--check-bounds", type=int, choices=(0, 1), default=None,
                   help="with --recompile: the default checks on / off (default: as saved)")
    r.add_argument("--blob", help="load this compiled program (from --blob-out)")
    r.add_argument("--blob-out", help="write the compiled program here")
    r.add_argument("--ir-out", help="write the optimized LLVM IR here")
    r.add_argument("--threads", type=int, default=None,
                   help="worker threads (Genesis on the CPU: 1; default: one per core)")
    r.add_argument("--lanes", nargs="+", metavar="TASK", default=[],
                   help="with --recompile: these range tasks in SIMD lanes (Task.lanes)")
    r.add_argument("--toggle", action="store_true",
                   help="callgrind: instrument only the last launch")
    a = ap.parse_args()
    (save if a.cmd == "save" else run)(a)


if __name__ == "__main__":
    main()
