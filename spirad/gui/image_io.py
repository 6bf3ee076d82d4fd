"""Image files without extra packages: PNG written and read with zlib, animated GIF written with
our own LZW coder, all in numpy; JPEG and BMP through Pillow when it is installed.

Taichi's image convention is used at the edges (`sd.tools.imwrite(img, path)`): `img[x, y]`, y
up, floats in [0, 1] or integers (uint8 is 0..255), shape (w, h), (w, h, 1), (w, h, 3) or
(w, h, 4). Internally a picture is `rows`: a (height, width, channels) uint8 array, top row first,
which is how every file format stores it.
"""
from __future__ import annotations

import os
import struct
import zlib

import numpy as np

from kernel_ir.errors import SpiradValueError

_PNG_SIG = b"\x89PNG\r\n\x1a\n"
_COLOR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}     # channels -> PNG colour type
_CHANNELS = {v: k for k, v in _COLOR_TYPES.items()}


def to_rows(img) -> np.ndarray:
    """A Taichi-layout image ([x, y], y up; float in [0, 1] or integer) as uint8 rows."""
    a = np.asarray(img)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3 or a.shape[2] not in (1, 2, 3, 4):
        raise SpiradValueError(f"an image must have shape (w, h) or (w, h, 1 | 2 | 3 | 4), got {a.shape}")
    if a.shape[2] == 2:  # Taichi shows (r, g) images with blue 0
        a = np.concatenate([a, np.zeros(a.shape[:2] + (1,), a.dtype)], axis=2)
    if a.dtype == np.uint8:
        u8 = a
    elif a.dtype.kind == "u":       # Taichi: scaled down from the type's range
        u8 = (a // (np.iinfo(a.dtype).max // 256)).astype(np.uint8)
    elif a.dtype.kind == "f":
        u8 = (np.clip(np.nan_to_num(a.astype(np.float32)), 0.0, 1.0) * 255.0).astype(np.uint8)
    elif a.dtype == np.bool_:
        u8 = a.astype(np.uint8) * 255
    else:
        raise SpiradValueError(f"unsupported image dtype {a.dtype}: use floats in [0, 1] or unsigned "
                         f"integers")
    return np.ascontiguousarray(u8.transpose(1, 0, 2)[::-1])


def from_rows(rows: np.ndarray) -> np.ndarray:
    """uint8 rows (top row first) as a Taichi-layout uint8 image [x, y] (y up)."""
    return np.ascontiguousarray(rows[::-1].transpose(1, 0, 2))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bytes(rows: np.ndarray, level: int = 6) -> bytes:
    h, w, c = rows.shape
    raw = np.zeros((h, 1 + w * c), np.uint8)   # filter byte 0 (None) per row
    raw[:, 1:] = rows.reshape(h, w * c)
    ihdr = struct.pack(">IIBBBBB", w, h, 8, _COLOR_TYPES[c], 0, 0, 0)
    return (_PNG_SIG + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(raw.tobytes(), level))
            + _chunk(b"IEND", b""))


def read_png(path: str) -> np.ndarray:
    """8-bit non-interlaced PNG (grey, grey+alpha, RGB, RGBA) as uint8 rows (h, w, channels)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != _PNG_SIG:
        raise SpiradValueError(f"{path} is not a PNG file")
    pos, idat, hdr = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in _CHANNELS or interlace:
        raise SpiradValueError(f"{path}: only 8-bit non-interlaced grey / RGB(A) PNGs are read here "
                         f"(depth {depth}, colour type {ctype}, interlace {interlace})")
    c = _CHANNELS[ctype]
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(h, 1 + w * c)
    return _unfilter(raw[:, 0], raw[:, 1:].astype(np.int32), c).reshape(h, w, c)


def _unfilter(kinds: np.ndarray, rows: np.ndarray, bpp: int) -> np.ndarray:
    out = np.zeros_like(rows)
    prev = np.zeros(rows.shape[1], np.int32)
    for y, kind in enumerate(kinds):
        r = rows[y]
        if kind == 0:
            cur = r
        elif kind == 1:   # Sub: a running sum per channel
            cur = np.cumsum(r.reshape(-1, bpp), axis=0).reshape(-1) & 255
        elif kind == 2:   # Up
            cur = (r + prev) & 255
        elif kind in (3, 4):   # Average, Paeth: sequential along the row
            cur = r.copy()
            for x in range(len(cur)):
                left = cur[x - bpp] if x >= bpp else 0
                up = prev[x]
                if kind == 3:
                    cur[x] = (cur[x] + (left + up) // 2) & 255
                else:
                    ul = prev[x - bpp] if x >= bpp else 0
                    p = left + up - ul
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                    pred = left if pa <= pb and pa <= pc else (up if pb <= pc else ul)
                    cur[x] = (cur[x] + pred) & 255
        else:
            raise SpiradValueError(f"bad PNG filter type {kind}")
        out[y] = cur
        prev = cur
    return out.astype(np.uint8)


def write_image(path: str, rows: np.ndarray) -> None:
    """Write uint8 rows to `path`; the suffix picks the format (.png here; .jpg / .bmp: Pillow)."""
    ext = os.path.splitext(path)[1].lower()
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    if ext == ".png":
        with open(path, "wb") as f:
            f.write(png_bytes(rows))
        return
    if ext in (".jpg", ".jpeg", ".bmp"):
        try:
            from PIL import Image
        except ImportError:
            raise SpiradValueError(f"writing {ext} files needs Pillow (pip install pillow); "
                             f".png needs nothing") from None
        Image.fromarray(rows[:, :, 0] if rows.shape[2] == 1 else rows).save(path)
        return
    raise SpiradValueError(f"cannot write {path!r}: use a .png, .jpg or .bmp file name")


def read_image(path: str) -> np.ndarray:
    """uint8 rows of a PNG (here) or any format Pillow reads."""
    if path.lower().endswith(".png"):
        try:
            return read_png(path)
        except ValueError:
            pass   # 16-bit, palette or interlaced: Pillow, when there is one
    try:
        from PIL import Image
    except ImportError:
        raise SpiradValueError(f"reading {path!r} needs Pillow (pip install pillow); "
                         f"8-bit PNGs need nothing") from None
    a = np.asarray(Image.open(path).convert("RGBA"))
    return a if (a[:, :, 3] < 255).any() else a[:, :, :3]


# -- animated GIF -----------------------------------------------------------------------------

def _palette(frame: np.ndarray) -> tuple:
    """A palette of at most 256 colours for one RGB frame (every colour when there are at most
    256, else median cut) and the frame as palette indices."""
    flat = frame.reshape(-1, 3)
    key = (flat[:, 0].astype(np.int64) << 16) | (flat[:, 1].astype(np.int64) << 8) | flat[:, 2]
    colors, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    rgb = np.stack([colors >> 16, (colors >> 8) & 255, colors & 255], 1).astype(np.float64)
    if len(colors) <= 256:
        return rgb.astype(np.uint8), inverse.reshape(-1).astype(np.uint8)
    def span(b):
        return np.ptp(rgb[b], axis=0).max() if len(b) > 1 else -1.0

    boxes = [np.arange(len(colors))]
    spans = [span(boxes[0])]
    while len(boxes) < 256:   # split the box with the widest channel at its weighted median
        k = int(np.argmax(spans))
        if spans[k] <= 0:
            break
        b = boxes.pop(k)
        spans.pop(k)
        ch = int(np.argmax(np.ptp(rgb[b], axis=0)))
        b = b[np.argsort(rgb[b, ch], kind="stable")]
        cum = np.cumsum(counts[b])
        cut = int(np.clip(np.searchsorted(cum, cum[-1] / 2), 1, len(b) - 1))
        boxes += [b[:cut], b[cut:]]
        spans += [span(b[:cut]), span(b[cut:])]
    pal = np.array([np.average(rgb[b], axis=0, weights=counts[b]) for b in boxes])
    of_color = np.empty(len(colors), np.int64)
    for k, b in enumerate(boxes):
        of_color[b] = k
    return np.round(pal).astype(np.uint8), of_color[inverse.reshape(-1)].astype(np.uint8)


def _lzw(indices: np.ndarray, min_size: int = 8) -> bytes:
    """GIF's variable-width LZW code stream of a byte sequence, as data sub-blocks."""
    clear, eoi = 1 << min_size, (1 << min_size) + 1
    codes, widths = [clear], [min_size + 1]
    table, nxt, width = {}, eoi + 1, min_size + 1
    data = indices.tobytes()
    prefix = data[0]
    for ch in data[1:]:
        key = (prefix << 8) | ch
        code = table.get(key)
        if code is not None:
            prefix = code
            continue
        codes.append(prefix)
        widths.append(width)
        if nxt < 4096:
            table[key] = nxt
            nxt += 1
            if nxt > (1 << width) and width < 12:
                width += 1
        else:   # table full: start again
            codes.append(clear)
            widths.append(width)
            table, nxt, width = {}, eoi + 1, min_size + 1
        prefix = ch
    codes += [prefix, eoi]
    widths += [width, width]
    # pack LSB-first with numpy: every code's bits, then 8 bits per byte
    c, wd = np.array(codes, np.int64), np.array(widths, np.int64)
    bit = np.arange(12)
    bits = ((c[:, None] >> bit) & 1)[bit[None, :] < wd[:, None]]
    bits = np.concatenate([bits, np.zeros(-len(bits) % 8, np.int64)]).reshape(-1, 8)
    packed = (bits << np.arange(8)).sum(1).astype(np.uint8).tobytes()
    blocks = b"".join(bytes([len(packed[i:i + 255])]) + packed[i:i + 255]
                      for i in range(0, len(packed), 255))
    return bytes([min_size]) + blocks + b"\x00"


def gif_bytes(frames: list, fps: float = 24.0, loop: bool = True) -> bytes:
    """An animated GIF of uint8 rows (all of one size; grey, RGB or RGBA: alpha dropped), each
    frame with its own palette."""
    if not frames:
        raise SpiradValueError("a GIF needs at least one frame")
    frames = [f[:, :, :3] if f.shape[2] >= 3 else np.repeat(f[:, :, :1], 3, 2) for f in frames]
    h, w = frames[0].shape[:2]
    if any(f.shape[:2] != (h, w) for f in frames):
        raise SpiradValueError("every GIF frame must have the same size")
    out = [b"GIF89a", struct.pack("<HHBBB", w, h, 0, 0, 0)]   # no global colour table
    if loop and len(frames) > 1:
        out.append(b"\x21\xFF\x0BNETSCAPE2.0\x03\x01\x00\x00\x00")
    delay = max(2, int(round(100.0 / fps)))
    for f in frames:
        pal, idx = _palette(f)
        table = np.zeros((256, 3), np.uint8)
        table[:len(pal)] = pal
        out.append(b"\x21\xF9\x04\x00" + struct.pack("<H", delay) + b"\x00\x00")
        out.append(b"\x2C" + struct.pack("<HHHHB", 0, 0, w, h, 0x87) + table.tobytes())
        out.append(_lzw(idx))
    out.append(b"\x3B")
    return b"".join(out)
