"""`GUI(fast_gui=True)`: `gui.img` holds Taichi's packed words (spirad/gui/fast_image.py), checked
against an independent per-pixel transcription of Taichi's `vector_to_fast_image` rule."""
import numpy as np
import pytest

import spirad as sd
from spirad.gui import fast_image
from kernel_ir.errors import SpiradValueError
from tests.support.archs import test_archs


def taichi_words(img, osx):
    """Pixel by pixel, as Taichi's kernel loops: word j * w + i is pixel (i, h - 1 - j)."""
    w, h = img.shape[:2]
    out = np.zeros(w * h, np.uint32)
    for i in range(w):
        for j in range(h):
            c = img[i, h - 1 - j]
            if img.dtype.kind == "f":
                r, g, b = (min(255, max(0, int(img.dtype.type(v) * img.dtype.type(255))))
                           for v in c[:3])
            else:
                r, g, b = (int(v) for v in c[:3])
            out[j * w + i] = ((b << 16) + (g << 8) + r + 0xFF000000) if osx else \
                ((r << 16) + (g << 8) + b)
    return out


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float64])
@pytest.mark.parametrize("channels", [3, 4])
@pytest.mark.parametrize("osx", [False, True])
def test_packed_words_follow_taichis_rule(dtype, channels, osx, monkeypatch):
    monkeypatch.setattr(fast_image, "os_name", lambda: "osx" if osx else "linux")
    rng = np.random.default_rng(7)
    w, h = 5, 3
    if dtype is np.uint8:
        img = rng.integers(0, 256, (w, h, channels)).astype(np.uint8)
    else:   # out of range and exact multiples of 1/255 included
        img = rng.uniform(-0.2, 1.2, (w, h, channels)).astype(dtype)
        img[0, 0, :3] = np.array([32, 64, 255], dtype) / dtype(255)
    gui = sd.GUI("fast", (w, h), show_gui=False, fast_gui=True)
    gui.set_image(img)
    assert gui.img.dtype == np.uint32 and gui.img.shape == (w * h,)
    np.testing.assert_array_equal(gui.img, taichi_words(img, osx))


@test_archs()
def test_a_vector_field_with_an_offset(arch):
    n = 4
    img = sd.Vector.field(3, sd.u8, shape=(n, n), offset=(-2, 3))
    img.fill(0)
    img[-2, 3] = (10, 20, 30)          # pixel (0, 0): the bottom-left corner
    gui = sd.GUI("fast", (n, n), show_gui=False, fast_gui=True)
    gui.set_image(img)
    words = gui.img.reshape(n, n)      # [row from the top, x]
    assert words[n - 1, 0] == (10 << 16) + (20 << 8) + 30 or fast_image.os_name() == "osx"
    assert np.count_nonzero(words) == 1


def test_refusals_name_the_rule():
    gui = sd.GUI("fast", (2, 2), show_gui=False, fast_gui=True)
    with pytest.raises(SpiradValueError, match="3 or 4 channels"):
        gui.set_image(np.zeros((2, 2), np.float32))
    with pytest.raises(SpiradValueError, match="f32, f64 or u8"):
        gui.set_image(np.zeros((2, 2, 3), np.int32))
    with pytest.raises(SpiradValueError, match="resolution"):
        gui.set_image(np.zeros((3, 2, 3), np.float32))


def test_without_fast_gui_img_is_the_rgba_canvas():
    gui = sd.GUI("slow", (2, 3), show_gui=False)
    gui.set_image(np.full((2, 3, 3), 0.5, np.float32))
    assert gui.img.shape == (2, 3, 4) and np.all(gui.img[..., :3] == 0.5)
