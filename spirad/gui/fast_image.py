"""Taichi's `fast_gui` image: one packed 32-bit word per pixel.

With `GUI(..., fast_gui=True)` Taichi hands its window a buffer of `w * h` uint32 words instead of
a float RGBA image, and exposes that buffer as `gui.img`; programs (and Taichi's tests) read it
back. Its rules, which this module follows so that such a read gives Taichi's words:

- only a vector field (or array) of 3 or 4 channels, of f32, f64 or u8, is accepted;
- floats are scaled by 255 in their own precision, truncated toward zero and clamped to [0, 255];
- rows run from the top of the image (y flipped) and x varies fastest: word `j * w + i` holds
  pixel (i, h - 1 - j);
- on macOS the word is ABGR with alpha 0xFF (its window's byte order), elsewhere 0x00RRGGBB.
"""
from __future__ import annotations

import platform

import numpy as np

from kernel_ir.errors import SpiradValueError


def os_name() -> str:
    """Taichi's name for this operating system: 'osx', 'win', 'linux' or 'unix'."""
    name = platform.platform().lower()
    if name.startswith(("darwin", "macos")):
        return "osx"
    if name.startswith("windows"):
        return "win"
    if name.startswith("linux"):
        return "linux"
    if "bsd" in name:
        return "unix"
    raise RuntimeError(f"unknown platform name {platform.platform()!r}")


def pack(img: np.ndarray, res: tuple) -> np.ndarray:
    """The (w * h,) uint32 words of the (w, h, 3 | 4) image `img` (see the module docstring)."""
    if img.ndim != 3 or img.shape[2] not in (3, 4):
        raise SpiradValueError("GUI.set_image with fast_gui=True takes an RGB or RGBA vector "
                               f"field of shape (w, h) with 3 or 4 channels, got shape {img.shape}")
    if img.dtype not in (np.float32, np.float64, np.uint8):
        raise SpiradValueError("GUI.set_image with fast_gui=True takes f32, f64 or u8 images, "
                               f"got {img.dtype}")
    if img.shape[:2] != tuple(res):
        raise SpiradValueError(f"GUI.set_image: image resolution {img.shape[:2]} does not match "
                               f"the GUI resolution {tuple(res)} (images are indexed [x, y])")
    rgb = img[:, ::-1, :3]                      # y flipped: the top row first
    if img.dtype.kind == "f":
        scaled = rgb * img.dtype.type(255)
        with np.errstate(invalid="ignore"):
            rgb = np.clip(np.trunc(np.nan_to_num(scaled, nan=0.0)), 0, 255)
    rgb = rgb.astype(np.uint32)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    if os_name() == "osx":
        words = (b << 16) + (g << 8) + r + np.uint32(0xFF000000)
    else:
        words = (r << 16) + (g << 8) + b
    return np.ascontiguousarray(words.T.reshape(-1))   # word j * w + i
