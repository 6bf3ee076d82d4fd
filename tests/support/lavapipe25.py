"""Where Mesa 25's lavapipe is, for tests that need an adapter offering binding arrays of storage
buffers (docs/metal.md, "Binding arrays").

scripts/install_lavapipe25.sh (run by scripts/install.sh, so by CI) unpacks it beside the
system's lavapipe, which stays the default: a test runs its probe in a subprocess with `env()`.
Without it the test is skipped, except where emulated Metal is a required arch
(SPIRAD_REQUIRE_ARCHS holds `metal`, as in CI) on Linux: then it fails, so a broken install
step cannot pass as a skip. A Mac (scripts/check_metal_mac.sh) has no Vulkan: always a skip.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from .archs import required_archs


def directory() -> Path:
    """The directory install_lavapipe25.sh unpacks into (SPIRAD_LAVAPIPE25, else the cache)."""
    d = os.environ.get("SPIRAD_LAVAPIPE25")
    if d:
        return Path(d)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "spirad" / "lavapipe25"


def env() -> dict | None:
    """This process's environment with Vulkan loading Mesa 25's lavapipe only, or None when it
    is not unpacked."""
    d = directory()
    icd, lib = d / "lvp25.json", d / "root" / "usr" / "lib" / "x86_64-linux-gnu"
    if not (icd.is_file() and (lib / "libvulkan_lvp.so").is_file() and (d / ".complete").is_file()):
        return None
    e = dict(os.environ)
    e.pop("VK_DRIVER_FILES", None)  # newer loaders prefer it to VK_ICD_FILENAMES
    e["VK_ICD_FILENAMES"] = str(icd)
    e["LD_LIBRARY_PATH"] = os.pathsep.join([str(lib)] + [p for p in [e.get("LD_LIBRARY_PATH")] if p])
    e.setdefault("XDG_RUNTIME_DIR", "/tmp")
    return e


def env_or_skip() -> dict:
    """`env()`, else a skip, or a failure where emulated Metal is required on Linux (CI)."""
    e = env()
    if e is not None:
        return e
    why = (f"Mesa 25's lavapipe is not unpacked in {directory()} "
           f"(bash scripts/install_lavapipe25.sh)")
    if sys.platform.startswith("linux") and "metal" in required_archs():
        pytest.fail(why + "; required: SPIRAD_REQUIRE_ARCHS holds metal")
    pytest.skip(why)
