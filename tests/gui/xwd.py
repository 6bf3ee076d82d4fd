"""Read an X Window Dump (what `xwd` writes): the screenshot format of the window tests.

Layout (X11's XWDFile.h): a big-endian header of 25 CARD32s (header_size first), the window
name up to header_size, `ncolors` 12-byte colour entries, then the pixels, `bytes_per_line`
per row; each pixel is `bits_per_pixel` bits in `byte_order`, channels picked by the masks."""
import struct

import numpy as np

_FIELDS = ("header_size file_version pixmap_format pixmap_depth pixmap_width pixmap_height "
           "xoffset byte_order bitmap_unit bitmap_bit_order bitmap_pad bits_per_pixel "
           "bytes_per_line visual_class red_mask green_mask blue_mask bits_per_rgb "
           "colormap_entries ncolors window_width window_height window_x window_y "
           "window_bdrwidth").split()


def read_xwd(path: str) -> np.ndarray:
    """The dump as uint8 RGB rows (height, width, 3), top row first (24 / 32-bit TrueColor)."""
    with open(path, "rb") as f:
        data = f.read()
    h = dict(zip(_FIELDS, struct.unpack(">25I", data[:100])))
    if h["file_version"] != 7 or h["bits_per_pixel"] not in (24, 32):
        raise ValueError(f"unsupported XWD file: version {h['file_version']}, "
                         f"{h['bits_per_pixel']} bits per pixel")
    start = h["header_size"] + 12 * h["ncolors"]
    w, ht, bpl, bpp = h["pixmap_width"], h["pixmap_height"], h["bytes_per_line"], h["bits_per_pixel"] // 8
    raw = np.frombuffer(data[start:start + bpl * ht], np.uint8).reshape(ht, bpl)[:, :w * bpp]
    raw = raw.reshape(ht, w, bpp).astype(np.uint32)
    if h["byte_order"] == 0:   # LSBFirst
        pix = sum(raw[:, :, k] << (8 * k) for k in range(bpp))
    else:
        pix = sum(raw[:, :, k] << (8 * (bpp - 1 - k)) for k in range(bpp))
    out = []
    for mask in (h["red_mask"], h["green_mask"], h["blue_mask"]):
        shift = (mask & -mask).bit_length() - 1
        out.append(((pix & mask) >> shift).astype(np.uint8))
    return np.stack(out, axis=2)
