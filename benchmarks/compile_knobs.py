"""Compile-time experiment switches shared by the Genesis benchmarks (`genesis_build_profile.py`,
`genesis_kernel_profile.py`): for this process only, never in the library.

    --pin-build-id NAME   key the offline cache by NAME instead of spirad's source digest: after
                          an edit of the compiler the kernels still load from the cache a first
                          run filled (stale for every kernel but `--fresh`'s: use a private
                          SPIRAD_CACHE_DIR)
    --fresh KERNEL        compile KERNEL even where the offline cache has it
    --versioning G[:CAP]  loop versioning's budget (passes/bounds_versioning.py GROWTH, GROWTH_CAP)
    --no-checks           the CPU backend compiles without the default bounds checks (as
                          `init(check_bounds=False)`; measured only: what the checks cost)

With the three, one kernel's compile and its step time can be compared across compiler settings
without a cold build of the whole scene for each (~35 min at the shared machine's load).
"""
from __future__ import annotations


def add_arguments(ap):
    ap.add_argument("--pin-build-id", metavar="NAME", help="key the offline cache by NAME "
                    "(see benchmarks/compile_knobs.py)")
    ap.add_argument("--fresh", metavar="KERNEL", help="compile KERNEL even where the offline "
                    "cache has it")
    ap.add_argument("--versioning", metavar="GROWTH[:CAP]", help="loop versioning's budget "
                    "(passes/bounds_versioning.py GROWTH, GROWTH_CAP) for this run")
    ap.add_argument("--no-checks", action="store_true", help="the CPU backend without the "
                    "default bounds checks (init(check_bounds=False))")


def apply(a, current_kernel=None):
    """Install `a`'s switches. `current_kernel()`: the name of the kernel compiling now (a
    profiler that tracks it passes its own); by default `_compile_forward` is wrapped here."""
    from spirad.compile import driver, offline_cache
    if a.pin_build_id:
        from spirad import options
        if not options.get("SPIRAD_CACHE_DIR"):
            raise SystemExit("--pin-build-id needs a private SPIRAD_CACHE_DIR")
        offline_cache.build_id = lambda: "pinned:" + a.pin_build_id
    if a.versioning:
        from passes import bounds_versioning
        growth, _, cap = a.versioning.partition(":")
        bounds_versioning.GROWTH = float(growth)
        if cap:
            bounds_versioning.GROWTH_CAP = int(cap)
    if a.no_checks:
        from spirad.backends import cpu
        cpu.default_checks = lambda state: False
    if a.fresh:
        if current_kernel is None:
            now = []
            fwd = driver._compile_forward

            def compile_forward(kernel, specs, state, *rest):  # rest: shapes, aliases
                now.append(kernel.fn.__name__)
                try:
                    return fwd(kernel, specs, state, *rest)
                finally:
                    now.pop()
            driver._compile_forward = compile_forward

            def current_kernel():
                return now[-1] if now else None
        load = offline_cache.load

        def cache_load(key, state):
            return None if current_kernel() == a.fresh else load(key, state)
        offline_cache.load = cache_load


def use_build_id(build_id):
    """spirad's offline cache keyed by `build_id` (`offline_cache.build_id()` printed before an
    edit that changes no compiled code: the kernels load as compiled before it); None: as is."""
    if build_id:
        from spirad.compile import offline_cache
        offline_cache.build_id = lambda: build_id
