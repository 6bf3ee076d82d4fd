#!/usr/bin/env bash
# Run spirad's suite natively on Apple silicon (arch=metal on the real GPU, no emulation), then
# probe the two known unknowns of Metal that lavapipe cannot show:
#   1. Metal compiles with fast math by default: NaN / Inf results and NaN-aware min/max must
#      still come out as on Vulkan (spirad makes NaN/Inf by bitcast and tests with OpIsNan).
#   2. the storage-buffer binding limit the device reports (wgpu: the Mac's maxBufferLength, at
#      most 4 GiB - 1): a larger field is bound as windows of one buffer (docs/metal.md, "Fields
#      larger than one binding") and must run and read back fully, or be a clear SpiradError,
#      never a crash or truncation.
#   3. Metal's buffer argument table (31 entries; docs/metal.md, "Device limits"): a kernel at
#      exactly the storage buffers spirad allows (28) must run on the GPU, one past it must be
#      spirad's clear compile error (not wgpu-hal's opaque out-of-memory error).
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
# spirad compiles kernels from their source files (not from `python3 -`): the probes are files
probes="$(mktemp -d)"
trap 'rm -rf "$probes"' EXIT
cat > "$probes/device.py" <<'PY'
import spirad as sd
from spirad.backends import resolve_arch
sd.init(arch=sd.metal)
import spirad.runtime.state as st
be = st.backend()
lim = be.rt._device.limits
print("metal device:", be.caps.name, "| emulated:", be.caps.emulated,
      "| storage buffers/kernel task:", be.caps.max_per_stage_storage_buffers,
      "| Metal buffer table:", be.caps.buffer_slots,
      "| wgpu device max-storage-buffers-per-shader-stage:",
      lim["max-storage-buffers-per-shader-stage"],
      "| max binding bytes:", be.caps.max_storage_buffer_range,
      "| max buffer bytes:", be.caps.max_buffer_size, "| sd.gpu ->", resolve_arch("gpu"))
assert not be.caps.emulated, "not the real Metal GPU"
from gfx_runtime.wgpu.caps import find_adapter
arrays = sorted(f for f in find_adapter(False).features if "binding-array" in f)
print("binding arrays the adapter offers (docs/metal.md, 'Binding arrays'):", arrays or "none")
PY
python3 "$probes/device.py"
# the whole suite, metal cases only (f64 cases assert the clear compile error)
python3 -m pytest -n auto -q -p no:cacheprovider tests -k "metal" "$@"
# known unknowns
cat > "$probes/unknowns.py" <<'PY'
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

import spirad.runtime.state as st
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

# the buffer table: status + (limit - 1) ndarrays fill the storage buffers exactly
import importlib.util, os, sys
limit = st.backend().caps.max_per_stage_storage_buffers


def wide(n):
    args = ", ".join(f"a{k}: sd.types.ndarray()" for k in range(n))
    body = " + ".join(f"a{k}[i]" for k in range(1, n))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"wide{n}.py")
    with open(path, "w") as f:
        f.write(f"import spirad as sd\n\n\n@sd.kernel\ndef wide({args}):\n"
                f"    for i in a0:\n        a0[i] = {body}\n")
    spec = importlib.util.spec_from_file_location(f"wide{n}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.wide


# ndarrays in arenas share one binding (docs/metal.md, "The binding model"): only ndarrays bound
# directly (larger than an arena, or imported) take a storage buffer each, so the probe binds such
from spirad.ndarray import Ndarray
be = st.backend()
arrs = [Ndarray._alias(be.allocate(16), sd.f32, (4,)) for _ in range(limit)]
for a in arrs[1:]:
    a.fill(1.0)
wide(limit - 1)(*arrs[:limit - 1])
got = arrs[0].to_numpy()
print(f"buffer-table probe: a kernel with {limit} storage buffers ran:", got)
assert (got == limit - 2).all(), "wrong result at the storage-buffer limit"
try:
    wide(limit)(*arrs)
    raise SystemExit(f"a kernel with {limit + 1} storage buffers was not refused")
except sd.SpiradError as e:
    print("buffer-table probe: one past the limit, clear error:", str(e)[:160])
print("check_metal_mac: OK")
PY
python3 "$probes/unknowns.py"

# Issue #38's programs on the real GPU, where their inputs are given (each part skipped, saying so,
# when not): DIFFTAICHI_EXAMPLES (taichi-dev/difftaichi's examples/), TAICHI_PYTHON (a Python with
# taichi==1.7.4, whose Metal backend is the reference here), GENESIS_PYTHON (a Python with
# genesis-world==1.4.5; Genesis on its CPU device, its kernels on spirad's Metal backend through
# SPIRAD_QUADRANTS_ARCH). docs/metal.md has the rows these runs give emulated on Linux.
out="$probes/runs"
mkdir -p "$out"
if [ -n "${DIFFTAICHI_EXAMPLES:-}" ] && [ -n "${TAICHI_PYTHON:-}" ]; then
    # the 10 DiffTaichi programs (iterations as in the table of docs/coming_from_taichi.md)
    python3 scripts/difftaichi_table.py --examples "$DIFFTAICHI_EXAMPLES" \
        --taichi-python "$TAICHI_PYTHON" --archs metal --out "$out/difftaichi"
    # Taichi's own autodiff examples: regression (its 1000 Tape iterations) and jacobian (the
    # forward- and reverse-mode Jacobians compared element by element)
    tx="$("$TAICHI_PYTHON" -c 'import os, taichi; print(os.path.join(os.path.dirname(taichi.__file__), "examples", "autodiff"))')"
    python3 scripts/difftaichi_table.py --examples "$tx" --taichi-python "$TAICHI_PYTHON" \
        --archs metal --programs regression --iters 1000 --out "$out/taichi_examples"
    python3 scripts/difftaichi_run.py --impl spirad --arch metal --save jacobian_fwd,jacobian_rev \
        --out "$out/jac_spirad.json" --workdir "$out/w_jac_spirad" "$tx/jacobian.py"
    "$TAICHI_PYTHON" scripts/difftaichi_run.py --impl taichi --arch metal \
        --save jacobian_fwd,jacobian_rev --out "$out/jac_taichi.json" --workdir "$out/w_jac_taichi" \
        "$tx/jacobian.py"
    # Taichi's diff_sph (GGUI: sd.ui off screen): its interactive loop, 10 frames, and the first
    # training batch (5 steps under the Tape), stepped by its own kernels (scripts/diff_sph_compare.py;
    # bounds checks off on both sides: the example writes past its layers' outputs). Taichi's own
    # Metal backend is the reference; the infer positions must agree within 1e-3 of their largest
    # value (Taichi's own cpu and vulkan differ by 4.4e-4 after 10 frames: docs/metal.md)
    for mode in infer train; do
        python3 scripts/diff_sph_compare.py --impl spirad --arch metal --mode $mode \
            --out "$out/sph_${mode}_spirad.npz" "$tx/diff_sph/diff_sph.py"
        "$TAICHI_PYTHON" scripts/diff_sph_compare.py --impl taichi --arch metal --mode $mode \
            --out "$out/sph_${mode}_taichi.npz" "$tx/diff_sph/diff_sph.py"
        python3 scripts/diff_sph_compare.py --compare "$out/sph_${mode}_spirad.npz" \
            "$out/sph_${mode}_taichi.npz" | tee "$out/sph_${mode}.txt"
    done
    python3 -c "import sys; w = float(open(sys.argv[1]).read().split()[-1]); \
assert w <= 1e-3, w" "$out/sph_infer.txt"
    # the example itself, unchanged, off screen (sd.ui), 3 frames of its interactive loop
    (cd "$tx/diff_sph" && SPIRAD_GUI_FRAMES=3 python3 -m spirad.compat.run_as_taichi --arch metal \
        --init check_bounds=false diff_sph.py)
    python3 - "$out" <<'PY'
import sys, numpy as np
a, b = (np.load(f"{sys.argv[1]}/jac_{s}.npz") for s in ("spirad", "taichi"))
for k in ("jacobian_fwd", "jacobian_rev"):
    d = float(np.max(np.abs(a[k] - b[k])))
    print(f"jacobian.py {k}: largest difference from Taichi {d:.2e}")
    assert d <= 1e-5 * max(1.0, float(np.max(np.abs(b[k])))), k
PY
else
    echo "DiffTaichi / Taichi examples skipped: set DIFFTAICHI_EXAMPLES and TAICHI_PYTHON"
fi
if [ -n "${GENESIS_PYTHON:-}" ]; then
    # plane + box and plane + Franka, float32, fields and ndarrays, 50 steps: Metal vs CPU, 1e-4
    # (GS_PARA_LEVEL=1: the loops Genesis runs in parallel on a GPU for one env, as gs.metal
    # would; under gs.cpu it serializes them, and its init loops over Franka's mesh run past
    # lavapipe's 65,535 iterations per invocation when emulated)
    for scene in box franka; do
        for nd in 0 1; do
            for arch in cpu metal; do
                SPIRAD_QUADRANTS_ARCH=$arch GS_ENABLE_ZEROCOPY=0 GS_ENABLE_NDARRAY=$nd GS_PARA_LEVEL=1 \
                    PYTHONPATH="$PWD:$PWD/spirad/compat/quadrants_shim:$PWD/benchmarks" \
                    "$GENESIS_PYTHON" benchmarks/genesis_scene.py $scene --steps 50 \
                    --out "$out/genesis_${scene}_${nd}_$arch.json"
            done
            python3 benchmarks/genesis_scene.py --compare "$out/genesis_${scene}_${nd}_metal.json" \
                "$out/genesis_${scene}_${nd}_cpu.json" | tee "$out/genesis_${scene}_${nd}.txt"
            python3 -c "import json, sys; d = json.load(open(sys.argv[1])); \
assert d['max_abs_diff'] <= 1e-4, d" "$out/genesis_${scene}_${nd}.txt"
        done
    done
else
    echo "Genesis skipped: set GENESIS_PYTHON"
fi
echo "check_metal_mac: issue #38 runs done"
