#!/usr/bin/env bash
# Install everything, then run the whole test suite on the CPU, on lavapipe (Vulkan), on Metal
# emulated on lavapipe and on CUDA / AMDGPU emulated on the CPU (device code assembled), with the
# Khronos validation layer on. A missing arch is a failure here, never a skip.
#
# Then the CPU suites whose choices depend on the vector width (SPMD lanes, the lane lowering
# with masks and per-lane stacks, the adjoints on lanes, privatised scatters, vector math,
# one-thread variants of tasks with atomics, the random gradient programs) run again at the
# widths users have (issue #43): 4 and 8 lanes forced (SPIRAD_CPU_SPMD_LANES), and an AVX2-only
# target (SPIRAD_CPU_TARGET=x86-64-v3: 16 lanes, a Zen 3 / Haswell user's code) where this CPU
# can run it. The default run covers this machine's own ISA (AVX-512 on CI: 32 lanes); aarch64
# (NEON) is compiled, not run, by tests/llvm_codegen/test_cross_targets.py. On 2 cores the
# reruns cost about 2 minutes each (docs/cpu_spmd.md).
#
# Last, the arch tests of the language, autodiff, linalg, sparse and interop suites run again on
# every arch in release (SPIRAD_TEST_RELEASE: `sd.init(debug=False)`, what `sd.init()` gives a
# user: SIMD lanes, loop versioning, the default bounds checks); the normal run inits them with
# debug=True, whose paths differ. Tests whose expectation is debug-only run in debug there too
# (tests/support/archs.py). About 1,430 CPU seconds, ~12 minutes on 2 cores; cpu and vulkan
# alone 580 (docs/engineering.md, "The release run").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export SPIRAD_REQUIRE_ARCHS=cpu,vulkan,metal,cuda,amdgpu
export SPIRAD_METAL_EMULATE=1  # the Metal backend on lavapipe, M1 limits
# no GPU in CI: cuda / amdgpu run their GPU lowering on the CPU, device code still assembled
export SPIRAD_CUDA_EMULATE=1 SPIRAD_AMDGPU_EMULATE=1
export SPIRAD_VALIDATION=1
export SPIRAD_REQUIRE_PYTHONS=1  # the wheel runs under every Python of the classifiers
python3 -m pytest -n 2 -q -p no:cacheprovider tests "$@"

CPU_WIDTH_SUITES=(
    tests/llvm_codegen/test_llvm_spmd.py tests/llvm_codegen/test_llvm_spmd_masks.py
    tests/llvm_codegen/test_llvm_spmd_adstack.py tests/llvm_codegen/test_spmd_width.py
    tests/llvm_codegen/test_llvm_vecmath_lowering.py tests/llvm_codegen/test_vecmath.py
    tests/autodiff/test_spmd_grad.py tests/autodiff/test_spmd_grad_masks.py
    tests/autodiff/test_random_grad.py
    tests/backends/test_private_scatter.py tests/passes/test_demote_atomics.py
)
cpu_width_run() {  # env assignments...: the suites again, CPU cases only
    echo "== CPU suites again with $*"
    env "$@" python3 -m pytest -n 2 -q -p no:cacheprovider "${CPU_WIDTH_SUITES[@]}" \
        -k "not vulkan and not metal and not cuda and not amdgpu"
}
cpu_width_run SPIRAD_CPU_SPMD_LANES=4
cpu_width_run SPIRAD_CPU_SPMD_LANES=8
host_isa=$(python3 -c "from llvm_codegen.cpu_target import host_isa; print(host_isa().name)")
case "$host_isa" in
    AVX2|AVX-512) cpu_width_run SPIRAD_CPU_TARGET=x86-64-v3 ;;
    *) echo "== no AVX2-only rerun: this CPU's ISA is $host_isa" ;;
esac

RELEASE_SUITES=(tests/language tests/autodiff tests/linalg tests/sparse tests/interop)
echo "== arch tests again in release (SPIRAD_TEST_RELEASE=$SPIRAD_REQUIRE_ARCHS: sd.init(debug=False))"
SPIRAD_TEST_RELEASE=$SPIRAD_REQUIRE_ARCHS python3 -m pytest -n 2 -q -p no:cacheprovider \
    "${RELEASE_SUITES[@]}"
