"""tests/metal: the Metal profile, its checker and the wgpu runtime. The backend runs emulated
(SPIRAD_METAL_EMULATE=1, Apple-silicon limits on lavapipe) unless a test says otherwise."""
import os

os.environ.setdefault("SPIRAD_METAL_EMULATE", "1")
