#!/usr/bin/env bash
# Install everything, then run the demo on every available backend.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
python3 examples/demo.py
