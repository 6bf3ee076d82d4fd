#!/usr/bin/env bash
# Install everything, then run the whole test suite on the CPU, on lavapipe (Vulkan), on Metal
# emulated on lavapipe and on CUDA / AMDGPU emulated on the CPU (device code assembled), with the
# Khronos validation layer on. A missing arch is a failure here, never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export SPIRAD_REQUIRE_ARCHS=cpu,vulkan,metal,cuda,amdgpu
export SPIRAD_METAL_EMULATE=1  # the Metal backend on lavapipe, M1 limits
# no GPU in CI: cuda / amdgpu run their GPU lowering on the CPU, device code still assembled
export SPIRAD_CUDA_EMULATE=1 SPIRAD_AMDGPU_EMULATE=1
export SPIRAD_VALIDATION=1
python3 -m pytest -n 2 -q -p no:cacheprovider tests "$@"
