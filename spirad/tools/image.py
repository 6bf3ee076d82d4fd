"""Taichi's image helpers (`ti.tools.imwrite / imread / imresize / imshow`) over spirad's own
PNG coder (`spirad/gui/image_io.py`). Images are Taichi-layout: `img[x, y]`, y up."""
from __future__ import annotations

import numpy as np

from kernel_ir.errors import SpiradValueError

from ..gui.image_io import from_rows, read_image, to_rows, write_image


def _host(img):
    from ..data.field import _HostArray
    return img.to_numpy() if isinstance(img, _HostArray) else np.asarray(img)


def imwrite(img, filename) -> None:
    """Write `img` ((w, h) grey or (w, h, 3 | 4); floats in [0, 1] or unsigned integers scaled
    from their range; a numpy array or a spirad field / ndarray) to `filename` (.png; .jpg /
    .bmp need Pillow)."""
    write_image(str(filename), to_rows(_host(img)))


def imread(filename, channels=0) -> np.ndarray:
    """A uint8 image (w, h, c) indexed [x, y] with y up; `channels` 1, 3 or 4 converts."""
    rows = read_image(str(filename))
    if channels and channels != rows.shape[2]:
        c = rows.shape[2]
        if channels == 1:
            rows = rows[:, :, :1] if c <= 2 else np.round(rows[:, :, :3].astype(np.float64)
                                                          @ [0.299, 0.587, 0.114])[..., None]
        elif channels in (3, 4):
            rgb = np.repeat(rows[:, :, :1], 3, 2) if c <= 2 else rows[:, :, :3]
            if channels == 4:
                alpha = rows[:, :, 3:] if c == 4 else np.full(rgb.shape[:2] + (1,), 255)
                rgb = np.concatenate([rgb, alpha], 2)
            rows = rgb
        else:
            raise SpiradValueError(f"imread: channels must be 0, 1, 3 or 4, got {channels}")
        rows = rows.astype(np.uint8)
    return from_rows(rows)


def imresize(img, w, h=None) -> np.ndarray:
    """Nearest-neighbour resize of a (width, height, ...) image to (w, h) (h defaults to w)."""
    img = _host(img)
    h = w if h is None else h
    if (w, h) == img.shape[:2]:
        return img
    x = np.clip((np.arange(w) * (img.shape[0] / w)).astype(np.int64), 0, img.shape[0] - 1)
    y = np.clip((np.arange(h) * (img.shape[1] / h)).astype(np.int64), 0, img.shape[1] - 1)
    return img[x[:, None], y[None, :]]


def imshow(img, title="imshow") -> None:
    """Show `img` in a window until it is closed or Escape is pressed (needs a display)."""
    from ..gui import GUI
    img = _host(img)
    with GUI(title, res=img.shape[:2]) as gui:
        if not gui.show_gui:
            return
        cooked = gui.cook_image(img)
        while gui.running:
            if gui.get_event(GUI.ESCAPE):
                gui.running = False
            gui.set_image(cooked)
            gui.show()
