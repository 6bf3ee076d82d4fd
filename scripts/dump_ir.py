"""Digest of the SPIR-V and LLVM IR that the benchmark kernels compile to, for showing that a
change to spirad/ (a module move, a refactor) leaves the generated code as it was.

    SPIRAD_OFFLINE_CACHE=0 python scripts/dump_ir.py OUT.txt [--arch cpu vulkan ...]
    (same on the other checkout, then: diff OUT_before.txt OUT_after.txt)

Runs a few benchmarks of `benchmarks/` in this process with small sizes and records every module
the code generators return (`spirv_codegen.compile_tasks` / `compile_range_args`: the SPIR-V
words; `llvm_codegen.codegen.compile_tasks`: the LLVM IR text), one line each: arch, kernel,
task, sha256 and size, in compile order. It wraps the code generators' entry points only, so the
same script runs on any checkout whose spirad calls them. The offline cache must be off
(SPIRAD_OFFLINE_CACHE=0): a program loaded from it is not compiled.
"""
import argparse
import contextlib
import hashlib
import io
import os
import runpy
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (benchmark, its arguments for a short run: the kernels, not the timings, matter here)
BENCHES = (
    ("bench_autodiff.py", ["--n", "4096", "--reps", "1", "--settle", "0"]),
    ("bench_straight_line.py", ["--n", "4096", "--reps", "1"]),
    ("bench_core.py", ["--n", "4096"]),
    ("bench_adstack_launch.py", []),
    ("bench_vecmath.py", ["--n", "4096", "--reps", "1"]),
    ("bench_loop_checkpoint.py", ["--threads", "16", "--trips", "200", "--reps", "1"]),
)
CPU_ONLY = {"bench_vecmath.py"}


def _digest(data) -> tuple:
    raw = data if isinstance(data, (bytes, bytearray)) else str(data).encode()
    return hashlib.sha256(raw).hexdigest(), len(raw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--arch", nargs="+", default=["cpu", "vulkan", "metal", "cuda", "amdgpu"])
    a = ap.parse_args()
    import llvm_codegen.codegen as lc
    import spirv_codegen as sc
    records, where = [], {"arch": None}

    def spirv_tasks(f):
        def wrapped(tl, *args, **kw):
            mods = f(tl, *args, **kw)
            for i, m in enumerate(mods):
                records.append((where["arch"], tl.name, f"spirv task {i} {m.name}", *_digest(m.words)))
            return mods
        return wrapped

    def spirv_range(f):
        def wrapped(tl, i, *args, **kw):
            m = f(tl, i, *args, **kw)
            records.append((where["arch"], tl.name, f"spirv range args {i}", *_digest(m.words)))
            return m
        return wrapped

    def llvm_tasks(f):
        def wrapped(tl, *args, **kw):
            prog = f(tl, *args, **kw)
            records.append((where["arch"], tl.name, "llvm", *_digest(prog.llvm_ir)))
            return prog
        return wrapped

    sc.compile_tasks = spirv_tasks(sc.compile_tasks)
    sc.compile_range_args = spirv_range(sc.compile_range_args)
    lc.compile_tasks = llvm_tasks(lc.compile_tasks)
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    for arch in a.arch:
        where["arch"] = arch
        for bench, args in BENCHES:
            if bench in CPU_ONLY and arch != "cpu":
                continue
            argv = [bench] + args + ([] if bench in CPU_ONLY else ["--arch", arch])
            old = sys.argv
            sys.argv = argv
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    runpy.run_path(os.path.join(ROOT, "benchmarks", bench), run_name="__main__")
            except SystemExit:
                pass
            except Exception as e:  # noqa: BLE001 - recorded: the same failure must show on both sides
                records.append((arch, bench, "error", type(e).__name__, 0))
            finally:
                sys.argv = old
    with open(a.out, "w") as f:
        for r in records:
            f.write(" ".join(str(x) for x in r) + "\n")
    print(f"{len(records)} modules -> {a.out}")


if __name__ == "__main__":
    main()
