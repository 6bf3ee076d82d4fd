#!/usr/bin/env bash
# Run spirad's suite natively on Apple silicon (arch=metal on the real GPU, no emulation), then
# probe the two known unknowns of Metal that lavapipe cannot show:
#   1. Metal compiles with fast math by default: NaN / Inf results and NaN-aware min/max must
#      still come out as on Vulkan (spirad makes NaN/Inf by bitcast and tests with OpIsNan).
#   2. Metal's default storage-buffer binding limit (256 MiB on small machines): a larger field
#      is bound as windows of one buffer (docs/metal.md, "Fields larger than one binding") and
#      must run and read back fully, or be a clear SpiradError, never a crash or truncation.
# SPIRAD_REQUIRE_ARCHS=metal below on purpose: a Mac has no CUDA / AMDGPU device and no lavapipe;
# CI (scripts/test.sh) requires all five archs, with metal, cuda and amdgpu emulated.
# Usage (macOS, from the repository root): bash scripts/check_metal_mac.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(uname -s)" != "Darwin" ]; then
    echo "check_metal_mac.sh runs on macOS with Apple silicon (elsewhere use SPIRAD_METAL_EMULATE=1 scripts/test.sh)" >&2
    exit 2
fi
python3 -m pip install -q -e '.[metal,test]'
unset SPIRAD_METAL_EMULATE
export SPIRAD_REQUIRE_ARCHS=metal
python3 - <<'PY'
import spirad as sd
from spirad.backends import resolve_arch
sd.init(arch=sd.metal)
import spirad.state as st
be = st.backend()
print("metal device:", be.caps.name, "| emulated:", be.caps.emulated,
      "| storage buffers/stage:", be.caps.max_per_stage_storage_buffers,
      "| max binding bytes:", be.caps.max_storage_buffer_range, "| sd.gpu ->", resolve_arch("gpu"))
assert not be.caps.emulated, "not the real Metal GPU"
PY
# the whole suite, metal cases only (f64 cases assert the clear compile error)
python3 -m pytest -n auto -q -p no:cacheprovider tests -k "metal" "$@"
# known unknowns
python3 - <<'PY'
import math
import numpy as np
import spirad as sd
sd.init(arch=sd.metal)
x = sd.field(sd.f32, 8)

@sd.kernel
def specials():
    z = x[7]                       # 0.0, unknown to the compiler
    x[0] = sd.log(z)               # -inf
    x[1] = sd.sqrt(z - 1.0)        # NaN
    x[2] = 1.0 / z                 # +inf
    x[3] = sd.min(sd.sqrt(z - 1.0), 2.0)  # NaN-aware min: 2
    x[4] = sd.max(-1.0 / z, 3.0)   # 3
    x[5] = sd.select(x[1] != x[1], 1.0, 0.0)  # NaN != NaN: 1 (fast math may fold it to 0)

specials()
v = x.to_numpy()
print("fast-math probe:", v[:6])
assert v[0] == -np.inf and math.isnan(v[1]) and v[2] == np.inf, "NaN/Inf lost under fast math"
assert v[3] == 2.0 and v[4] == 3.0, "NaN-aware min/max broken under fast math"
assert v[5] == 1.0, "NaN comparison folded by fast math"

import spirad.state as st
limit = st.backend().caps.max_storage_buffer_range
big = limit // 4 + 1024            # one f32 field just past the binding limit
try:
    y = sd.field(sd.f32, big)

    @sd.kernel
    def touch():
        for i in y:
            y[i] = 1.0
    touch()
    sd.sync()
    print(f"buffer-limit probe: a field of {big * 4} bytes ran; check it fully:",
          float(y.to_numpy()[-1]))
except sd.SpiradError as e:
    print("buffer-limit probe: clear error:", type(e).__name__, str(e)[:200])
print("check_metal_mac: OK")
PY
