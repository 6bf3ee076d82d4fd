#!/usr/bin/env bash
# Install everything spirad needs on a fresh Debian/Ubuntu machine: lavapipe (Mesa's software
# Vulkan), the Khronos validation layer, SPIR-V tools, Tk, Xvfb and xwd (the GUI's window and its
# test), and the Python package with its extras.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
    mesa-vulkan-drivers vulkan-validationlayers libvulkan1 spirv-tools spirv-headers rocm-device-libs lld-22 \
    xvfb x11-apps python3-tk >/dev/null
# torch: the CPU wheel (a local wheel directory, when there is one, is searched first)
python3 -m pip install -q --find-links "${SPIRAD_WHEELS:-/opt/wheels}" -c scripts/ci-constraints.txt \
    -e '.[vulkan,metal,cuda,linalg,test,examples,gui,docs,taichi-suite]'
# Mesa 25's lavapipe unpacked beside the system's (no install): the adapter with binding arrays
# that tests/metal/test_binding_arrays.py probes (docs/metal.md, "Binding arrays")
bash scripts/install_lavapipe25.sh
