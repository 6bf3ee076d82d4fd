"""`python -m spirad`: what this installation is and what this machine can run.

    python -m spirad               version, Python packages, every arch (available, or why not),
                                   the arch `sd.gpu` picks, the CPU backend's target (CPU, ISA,
                                   vector width, SPMD lanes), the offline cache's directory and size
    python -m spirad cache         the offline cache's directory and size
    python -m spirad cache clear   delete every entry of the offline cache

Why: "which backends do I have, and why is Vulkan missing?" is the first question after an
install; the answer needs the same checks `sd.init` makes, without writing a script. Nothing
here creates a device: availability is what `sd.init(arch=...)` would decide, and the reasons
are the ones its error would give.
"""
from __future__ import annotations

import os
import platform
import sys


def _package_versions() -> str:
    from importlib import metadata
    out = []
    for name in ("numpy", "llvmlite", "vulkan", "wgpu", "torch"):
        try:
            out.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(f"{name} -")
    return ", ".join(out)


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _cache_line() -> str:
    from .compile import offline_cache
    size, n = offline_cache.size()
    from . import options
    off = "" if options.get("SPIRAD_OFFLINE_CACHE") else \
        " (off: SPIRAD_OFFLINE_CACHE=0)"
    return (f"offline cache: {offline_cache.cache_dir()} ({n} entries, {_bytes(size)}; "
            f"cap {_bytes(offline_cache.max_bytes())}){off}")


def _cpu_target() -> str:
    """The CPU backend's target: CPU, ISA, vector width and SPMD lanes (or why not readable)."""
    from .backends.cpu import target_summary
    try:
        return target_summary()
    except Exception as e:  # a SPIRAD_CPU_TARGET this CPU cannot run: say so, do not stop
        return f"invalid: {e}"


def info() -> str:
    import spirad
    from .backends import BACKENDS, GPU_ORDER, arch_status
    lines = [f"spirad {spirad.__version__} ({os.path.dirname(os.path.abspath(spirad.__file__))})",
             f"python {platform.python_version()} ({sys.executable}), {platform.machine()}, "
             f"{os.cpu_count()} CPUs",
             f"packages: {_package_versions()}",
             "archs:"]
    for arch in BACKENDS:
        if arch == "interp":
            continue
        ok, why = arch_status(arch)
        lines.append(f"  {arch:7s} {'available' if ok else 'not available: ' + why}")
    picks = next((a for a in GPU_ORDER if arch_status(a, for_gpu=True)[0]), None)
    lines.append(f"  sd.gpu picks: {picks or 'nothing (no GPU backend available; use sd.cpu)'}")
    if arch_status("cpu")[0]:
        lines.append(f"cpu target: {_cpu_target()}")
    lines.append(_cache_line())
    return "\n".join(lines)


USAGE = """usage: python -m spirad [cache [clear]]
  (no argument)   version, packages, every arch and why it is not available, the offline cache
  cache           the offline cache's directory and size
  cache clear     delete every entry of the offline cache"""


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv == ["info"]:
        print(info())
        return 0
    if argv == ["cache"]:
        print(_cache_line())
        return 0
    if argv == ["cache", "clear"]:
        from .compile import offline_cache
        size, _ = offline_cache.size()
        n = offline_cache.clear()
        print(f"cleared the offline cache {offline_cache.cache_dir()}: {n} entries, {_bytes(size)}")
        return 0
    if argv in (["-h"], ["--help"], ["help"]):
        print(USAGE)
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
