"""The arch-parametrizing test decorator.

    from tests.support.archs import test_archs

    @test_archs()                       # every arch: cpu, vulkan, metal, cuda, amdgpu
    def test_axpy(arch): ...

    @test_archs(require=("f64",), default_fp=sd.f64)
    def test_f64(arch): ...

    @test_archs(SPIRV_ARCHS)            # vulkan and metal (one SPIR-V glue)
    @test_archs(LLVM_ARCHS)             # cpu, cuda, amdgpu (one LLVM lowering)
    @test_archs(exactly("cpu"))         # these archs and no others
    @test_archs(exactly("interp") | EVERY_ARCH)   # sets combine

The decorator parametrizes the test over the archs it is given, as given (ids `arch=cpu`,
`arch=vulkan`, ...; cuda and amdgpu run emulated in CI: docs/gpu.md). It takes only an `Archs`,
one of the named sets above or `exactly(...)`: a bare list is refused, because it cannot say
whether it means "these and no others" or "these and the archs that share their code" (lists
used to be widened silently: vulkan gained metal, cpu + vulkan gained cuda and amdgpu). It calls
`sd.init(arch=..., debug=True, **init_kwargs)` before the body (`debug=False` in the release
run, below), and turns a missing arch or a
missing capability into a skip with the reason — unless the arch is listed in the environment
variable SPIRAD_REQUIRE_ARCHS (CI sets all five), where a missing arch is a failure, so a
broken install can never pass as green. On Vulkan the validation layer is on (SPIRAD_VALIDATION=1
set by conftest) and any validation message fails the test.

Metal has no f64, no 64-bit atomics, no f32 atomic min / max of ndarray elements and (on spirad's
path through naga) no 8- / 16-bit integers and no f16 atomics. A test runs on metal where its
kernels use none (f32 parametrisations, folded literals); where they do, the backend must refuse
at compile time with its clear error (`METAL_REFUSALS`), and the case is reported as an xfail
with that reason — never as a pass (engineering 18). Any other error fails as usual. conftest's
terminal summary lists every refused metal case, grouped by reason.

The release run. With SPIRAD_TEST_RELEASE=ARCHS (`cpu,vulkan`) the arch tests of those archs
are the only tests that run (conftest deselects the rest), and each inits with `debug=False`,
the build a user gets from `sd.init()`: SIMD lanes on the CPU, loop versioning (`passes/bounds_versioning`),
the default bounds checks instead of the named ones, no IR verifier, no overflow checks, no
`assert`s, launches that do not wait. The debug build takes other paths, and a wrong result in
the release path alone once lived days under a green suite (docs/engineering.md, "The release
run"); scripts/test.sh runs some directories so. A test whose *expectation* is a debug-only
behaviour says which with `debug_only="..."` (a named bounds error, a kernel `assert`, an
overflow message, ...): it runs in debug in both runs, never skipped. `debug=` given in
`init_kwargs` wins over both.

This is the one spelling of the arch decorator: import it as `test_archs`
(tests/architecture/test_test_hygiene.py checks).
"""
from __future__ import annotations

import functools
import os

import pytest

# the messages of spirad/backends/metal.py's compile-time refusals -> the reason reported
METAL_REFUSALS = {"Metal has no 64-bit floats": "f64 (Metal has no 64-bit floats)",
                  "atomic_mul is not available on Metal": "atomic_mul (no compare-and-swap on Metal)",
                  "into a quantized field (bit-packed storage) is not available on Metal":
                      "stores into quantized fields (no compare-and-swap on Metal)",
                  "is not available on Metal": "64-bit atomics, or f32 atomic min / max of an ndarray (not on Metal)",
                  "has no 8- or 16-bit integers":
                      "u8 / i8 / u16 / i16 (naga has no 8- / 16-bit integers)",
                  "which naga rejects; an f16 field's gradient":
                      "atomics on f16 and f16 gradients (no compare-and-swap through naga)"}
REFUSED_PREFIX = "refused on metal: "


class Archs(tuple):
    """Archs to run a test on, with a name that says what the set means (`test_archs`)."""

    def __new__(cls, name: str, archs):
        self = super().__new__(cls, archs)
        self.name = name
        return self

    def __or__(self, other: "Archs") -> "Archs":
        return Archs(f"{self.name} | {other.name}", tuple(self) + tuple(a for a in other
                                                                        if a not in self))

    def __repr__(self):
        return f"Archs({self.name!r})"


EVERY_ARCH = Archs("every arch", ("cpu", "vulkan", "metal", "cuda", "amdgpu"))
SPIRV_ARCHS = Archs("the SPIR-V archs", ("vulkan", "metal"))  # one SPIR-V glue (spirv_backend)
LLVM_ARCHS = Archs("the LLVM archs", ("cpu", "cuda", "amdgpu"))  # one LLVM lowering (llvm_codegen)


def exactly(*archs: str) -> Archs:
    """These archs and no others."""
    return Archs("exactly " + ", ".join(archs), archs)

# metal: emulated on lavapipe with SPIRAD_METAL_EMULATE=1; cuda / amdgpu: a device, or
# SPIRAD_CUDA_EMULATE=1 / SPIRAD_AMDGPU_EMULATE=1 (docs/gpu.md)
# `interp` (the reference interpreter) is always available; tests opt into it explicitly.


def required_archs() -> set:
    return {a.strip() for a in os.environ.get("SPIRAD_REQUIRE_ARCHS", "").split(",") if a.strip()}


def arch_or_skip(arch: str):
    from spirad.backends import arch_available
    if arch_available(arch):
        return
    if arch in required_archs():
        pytest.fail(f"arch {arch} is required (SPIRAD_REQUIRE_ARCHS) but not available")
    pytest.skip(f"arch {arch} not available")


def release_archs() -> set:
    """The archs of SPIRAD_TEST_RELEASE: their arch tests init with `debug=False` (module
    docstring); empty: the usual debug run."""
    return {a.strip() for a in os.environ.get("SPIRAD_TEST_RELEASE", "").split(",") if a.strip()}


def release_run() -> bool:
    return bool(release_archs())


def is_arch_test(fn) -> bool:
    """Was the test function `fn` made by `test_archs` (conftest's release run keeps these)?"""
    return getattr(fn, "_arch_test", False)


def init_debug(debug_only: str = "") -> bool:
    """The `debug=` of an arch test's `sd.init`: on, unless this is the release run and the test's
    expectation holds in release too (`debug_only` empty)."""
    return bool(debug_only) or not release_run()


def has_capability(arch: str, cap: str) -> bool:
    import spirad.runtime.state as st
    be = st.backend()
    return bool(be.capabilities().get(cap, False))


def test_archs(archs: Archs = EVERY_ARCH, require=(), exclude=(), debug_only: str = "",
               **init_kwargs):
    """`debug_only`: the debug-only behaviour the test's expectation relies on (it then inits
    with `debug=True` in the release run too; module docstring)."""
    if not isinstance(archs, Archs):
        raise TypeError(f"test_archs({archs!r}): say what the list means: EVERY_ARCH, SPIRV_ARCHS, "
                        f"LLVM_ARCHS or exactly(...) (tests/support/archs.py)")
    archs = tuple(a for a in archs if a not in exclude)

    def deco(fn):
        @pytest.mark.parametrize("arch", archs, ids=[f"arch={a}" for a in archs])
        @functools.wraps(fn)
        def wrapper(arch, *args, **kwargs):
            import spirad as sd
            arch_or_skip(arch)
            sd.init(**{"arch": arch, "debug": init_debug(debug_only), **init_kwargs})
            for cap in require:
                if not (arch == "metal" and cap == "f64") and not has_capability(arch, cap):
                    pytest.skip(f"arch {arch} lacks capability {cap}")
            if arch == "metal":
                return run_refusable_on_metal(fn, arch, *args, **kwargs)
            return fn(arch, *args, **kwargs)
        wrapper._arch_test = True
        return wrapper
    return deco


def metal_refusal(e: BaseException):
    """The reason of a metal compile-time refusal `e`, else None."""
    from kernel_ir.errors import SpiradTypeError
    if not isinstance(e, SpiradTypeError):
        return None
    return next((r for m, r in METAL_REFUSALS.items() if m in str(e)), None)


def run_refusable_on_metal(test_fn, /, *args, **kwargs):
    """Run a test body on metal: a refusal of `METAL_REFUSALS` becomes an xfail naming it."""
    try:
        return test_fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - anything but a known refusal is re-raised
        reason = metal_refusal(e)
        if reason is None:
            raise
    pytest.xfail(REFUSED_PREFIX + reason)


test_archs.__test__ = False  # a decorator factory, not a test (pytest would collect the name)
