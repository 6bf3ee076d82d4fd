"""Taichi's textures: `sd.Texture(fmt, shape)`, kernel parameters `sd.types.texture(num_dimensions)`
(sampled: `fetch`, `sample_lod`) and `sd.types.rw_texture(num_dimensions, fmt, lod)` (storage:
`load`, `store`, struct-for over its texels), `sd.Format`.

A texture is an image of 1 to 3 dimensions whose texels hold 1, 2 or 4 channels of a format
(8- / 16-bit unsigned normalized, 16- / 32-bit float). spirad stores the texels in an ndarray (one
f32 vector of the format's channels per texel, values already rounded to the format: a store of
`0.1` into an `rgba8` texel keeps 26 / 255) and computes the texture operations in the kernel
language, with Vulkan's rules as Taichi 1.7.4 sets its sampler (linear filtering, repeat
addressing, normalized coordinates, one mip level) and its robust image access (a texel
outside the image reads 0, missing channels read (g, b, a) = (0, 0, 1)). So textures run on every
arch, the CPU included (Taichi has them on Vulkan and OpenGL only), with the same results; they
are not hardware images (no texture cache, no filtering units): a texture argument is a dataclass
argument whose ndarray is a hidden launch argument (`spirad.data.struct_args`), and a kernel
compiles once per format and dimension count, not per size.
"""
from __future__ import annotations

import dataclasses
import enum

import numpy as np

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradNotSupportedError, SpiradRuntimeError, SpiradTypeError
from . import lang
from .data.matrix import Vector
from .func import func
from . import types as _types
from .types import VectorType, template


class Format(enum.Enum):
    """Taichi's texel formats (`ti.Format`). spirad stores the unsigned normalized (`r8` ...
    `rgba16`) and float (`r16f` ... `rgba32f`) ones; the others are refused by `Texture`."""
    unknown = 0
    r8 = 1
    rg8 = 2
    rgba8 = 3
    rgba8srgb = 4
    bgra8 = 5
    bgra8srgb = 6
    r8u = 7
    rg8u = 8
    rgba8u = 9
    r8i = 10
    rg8i = 11
    rgba8i = 12
    r16 = 13
    rg16 = 14
    rgb16 = 15
    rgba16 = 16
    r16u = 17
    rg16u = 18
    rgb16u = 19
    rgba16u = 20
    r16i = 21
    rg16i = 22
    rgb16i = 23
    rgba16i = 24
    r16f = 25
    rg16f = 26
    rgb16f = 27
    rgba16f = 28
    r32u = 29
    rg32u = 30
    rgb32u = 31
    rgba32u = 32
    r32i = 33
    rg32i = 34
    rgb32i = 35
    rgba32i = 36
    r32f = 37
    rg32f = 38
    rgb32f = 39
    rgba32f = 40
    depth16 = 41
    depth24stencil8 = 42
    depth32f = 43


# format -> (channels, how a stored value is rounded: ("unorm", bits) or ("float", bits))
_STORED = {
    Format.r8: (1, ("unorm", 8)), Format.rg8: (2, ("unorm", 8)), Format.rgba8: (4, ("unorm", 8)),
    Format.r16: (1, ("unorm", 16)), Format.rg16: (2, ("unorm", 16)),
    Format.rgba16: (4, ("unorm", 16)),
    Format.r16f: (1, ("float", 16)), Format.rg16f: (2, ("float", 16)),
    Format.rgba16f: (4, ("float", 16)),
    Format.r32f: (1, ("float", 32)), Format.rg32f: (2, ("float", 32)),
    Format.rgba32f: (4, ("float", 32)),
}


def _check_format(fmt) -> None:
    if fmt not in _STORED:
        names = ", ".join(f.name for f in _STORED)
        raise SpiradNotSupportedError(f"texture format {fmt}: spirad stores the formats {names} "
                                      f"(unsigned normalized and float texels)")


@dataclasses.dataclass(frozen=True, eq=False, init=False)
class Texture:
    """A texture of `fmt` (`sd.Format`) and `shape` (1 to 3 extents; Taichi's `ti.Texture(fmt,
    arr_shape)`). Filled by kernels taking it as a `types.rw_texture`, or from a field, an
    ndarray or a PIL image; read by kernels taking it as a `types.texture` or `rw_texture`."""
    fmt: Format
    data: object  # the texels: an sd.Vector.ndarray(channels, f32) of the texture's shape

    def __init__(self, fmt, arr_shape):
        _check_format(fmt)
        shape = tuple(int(s) for s in (arr_shape if isinstance(arr_shape, (tuple, list))
                                       else (arr_shape,)))
        if not 1 <= len(shape) <= 3 or min(shape) < 1:
            raise SpiradTypeError(f"a texture has 1 to 3 positive extents, got {arr_shape!r}")
        from .data.ndarray import Ndarray
        object.__setattr__(self, "fmt", fmt)
        object.__setattr__(self, "data", Ndarray(VectorType(self.channels, T.f32), shape))

    @property
    def shape(self) -> tuple:
        """The extents (in a kernel: read `tex.data.shape`, the run-time ones)."""
        return tuple(self.data.shape)

    @property
    def num_dims(self) -> int:
        """Number of dimensions (1 to 3)."""
        return len(self.data.shape)

    @property
    def channels(self) -> int:
        """Channels each texel stores (1, 2 or 4)."""
        return _STORED[self.fmt][0]

    @property
    def _unorm_top(self) -> float:
        """2 ** bits - 1 of an unsigned normalized format, else 0."""
        kind, bits = _STORED[self.fmt][1]
        return float(2 ** bits - 1) if kind == "unorm" else 0.0

    @property
    def _half(self) -> bool:
        """Whether the format stores 16-bit floats."""
        return _STORED[self.fmt][1] == ("float", 16)

    def _rounded(self, values: np.ndarray) -> np.ndarray:
        """Host values rounded as the format stores them (the kernels' `_round_to_format`)."""
        kind, bits = _STORED[self.fmt][1]
        v = np.asarray(values, dtype=np.float64)
        if kind == "unorm":
            top = float(2 ** bits - 1)
            return (np.floor(np.clip(v, 0.0, 1.0) * top + 0.5) / top).astype(np.float32)
        return v.astype(np.float16 if bits == 16 else np.float32).astype(np.float32)

    def _from_numpy(self, arr: np.ndarray) -> None:
        arr = np.asarray(arr)
        if arr.shape[:self.num_dims] != self.shape:
            raise SpiradTypeError(f"a texture of shape {self.shape} cannot be loaded from an "
                                  f"array of shape {arr.shape[:self.num_dims]}")
        flat = arr.reshape(self.shape + (-1,)) if arr.ndim > self.num_dims else arr[..., None]
        out = np.zeros(self.shape + (self.channels,), np.float32)
        n = min(self.channels, flat.shape[-1])
        out[..., :n] = self._rounded(flat[..., :n])
        self.data.from_numpy(out)

    def from_ndarray(self, ndarray) -> None:
        """Loads the values of an ndarray of the texture's shape (scalar or vector elements:
        the first components fill the channels, the rest of the channels are 0)."""
        self._from_numpy(ndarray.to_numpy())

    def from_field(self, field) -> None:
        """Loads the values of a field of the texture's shape, as `from_ndarray`."""
        self._from_numpy(field.to_numpy())

    def to_numpy(self) -> np.ndarray:
        """The stored channels of every texel, an array of shape `shape + (channels,)`."""
        return self.data.to_numpy()

    def from_image(self, image) -> None:
        """Loads a PIL image (converted to RGB) into a 2-D `rgba8` texture of the image's size,
        as Taichi does: texel (i, j) is the pixel in column width - 1 - i, row j (the image
        turned a quarter counterclockwise), alpha 0."""
        from PIL import Image
        if not isinstance(image, Image.Image):
            raise SpiradTypeError(f"from_image takes a PIL image, got {type(image).__name__}")
        self._check_image()
        if image.mode != "RGB":
            image = image.convert("RGB")
        if image.size != self.shape:
            raise SpiradTypeError(f"an image of size {image.size} does not fit a texture of "
                                  f"shape {self.shape}")
        rgb = np.asarray(image.rotate(90, expand=True)).astype(np.float64) / 255.0
        rgba = np.concatenate([rgb, np.zeros(rgb.shape[:2] + (1,))], axis=-1)
        self._from_numpy(rgba)

    def to_image(self):
        """The texture as a PIL image in RGB mode (a 2-D `rgba8` texture), Taichi's orientation."""
        from PIL import Image
        self._check_image()
        rgb = np.round(self.to_numpy()[..., :3] * 255).astype(np.uint8)
        return Image.fromarray(rgb).rotate(270, expand=True)

    def _check_image(self) -> None:
        if self.num_dims != 2 or self.fmt is not Format.rgba8:
            raise SpiradTypeError(f"images load into / from a 2-D Format.rgba8 texture, not a "
                                  f"{self.num_dims}-D {self.fmt} one")

    # -- in kernels (the parameter is a dataclass view: `self.data` the hidden ndarray) --------
    @func
    def fetch(self, index, lod):
        """The texel at integer `index` of mip level `lod` as an f32 4-vector (0 outside the
        image, and at any level but 0: a texture has one level)."""
        return _texel(self, index, lod)

    @func
    def load(self, index):
        """The texel at integer `index` (an rw_texture's read), as `fetch` at level 0."""
        return _texel(self, index, 0)

    @func
    def store(self, index, value):
        """Writes the first channels of the 4-vector `value`, rounded to the format, to the
        texel at integer `index` (nothing outside the image)."""
        idx = _int_index(index, lang.static(self.num_dims))
        if _inside(self, idx):
            self.data[idx] = _round_to_format(self, _channels(value, lang.static(self.channels)))

    @func
    def sample_lod(self, uv, lod):
        """Bilinear (trilinear in 3-D) filtering at normalized coordinates `uv`, repeating
        outside [0, 1), as Taichi's sampler; with one mip level every `lod` samples level 0."""
        return _sample(self, uv, lang.static(self.num_dims))


@func
def _int_index(index, n: template()):
    idx = Vector([0] * n)
    for k in lang.static(range(n)):
        idx[k] = lang.cast(index[k], T.i32)
    return idx


@func
def _inside(tex, idx):
    ok = idx[0] >= 0
    for k in lang.static(range(tex.num_dims)):
        ok = ok & (idx[k] >= 0) & (idx[k] < tex.data.shape[k])
    return ok


@func
def _channels(value, n: template()):
    out = Vector([0.0] * n)
    for k in lang.static(range(n)):
        out[k] = value[k]
    return out


@func
def _round_to_format(tex, v):
    out = v
    if lang.static(tex._unorm_top > 0):
        out = lang.floor(lang.min(lang.max(v, 0.0), 1.0) * tex._unorm_top + 0.5) / tex._unorm_top
    elif lang.static(tex._half):
        out = lang.cast(lang.cast(v, T.f16), T.f32)
    return out


@func
def _as_rgba(tex, stored):
    """Stored channels -> Vulkan's 4 components: missing g, b read 0, a missing alpha 1."""
    rgba = Vector([0.0, 0.0, 0.0, 1.0])
    for k in lang.static(range(tex.channels)):
        rgba[k] = stored[k]
    return rgba


@func
def _texel(tex, index, lod):
    idx = _int_index(index, lang.static(tex.num_dims))
    out = _outside(tex)
    if _inside(tex, idx) & (lod == 0):
        out = _as_rgba(tex, tex.data[idx])
    return out


@func
def _outside(tex):
    """Robust image access: 0, with alpha 1 where the format has no alpha."""
    a = 0.0 if lang.static(tex.channels == 4) else 1.0
    return Vector([0.0, 0.0, 0.0, a])


@func
def _wrapped(tex, idx):
    """Repeat addressing: every index taken modulo the extent."""
    out = idx
    for k in lang.static(range(tex.num_dims)):
        out[k] = idx[k] % tex.data.shape[k]
    return out


@func
def _sample(tex, uv, n: template()):
    # texel space: centre of texel i at i + 0.5; corners below and the weights above them
    base = Vector([0] * n)
    frac = Vector([0.0] * n)
    for k in lang.static(range(n)):
        x = uv[k] * tex.data.shape[k] - 0.5
        f = lang.floor(x)
        base[k] = lang.cast(f, T.i32)
        frac[k] = x - f
    acc = Vector([0.0, 0.0, 0.0, 0.0])
    for corner in lang.static(range(2 ** n)):
        w = 1.0
        idx = base
        for k in lang.static(range(n)):
            if lang.static((corner >> k) & 1):
                w *= frac[k]
                idx[k] += 1
            else:
                w *= 1.0 - frac[k]
        acc += w * _as_rgba(tex, tex.data[_wrapped(tex, idx)])
    return acc


@dataclasses.dataclass(frozen=True)
class TextureType:
    """`types.texture(num_dimensions)`: a sampled texture parameter (`fetch`, `sample_lod`)."""
    num_dimensions: int
    _texture_annotation = True

    def check(self, tex, name: str) -> None:
        """Taichi's checks of the argument at the launch."""
        if not isinstance(tex, Texture):
            raise SpiradTypeError(f"argument '{name}' must be an sd.Texture, got "
                                  f"{type(tex).__name__}")
        if tex.num_dims != self.num_dimensions:
            raise SpiradRuntimeError(f"{type(self).__name__} dimension mismatch for argument "
                                     f"{name}: expected {self.num_dimensions}, got "
                                     f"{tex.num_dims}")


@dataclasses.dataclass(frozen=True)
class RWTextureType(TextureType):
    """`types.rw_texture(num_dimensions, fmt, lod)`: a storage texture parameter (`load`,
    `store`, `for i, j in tex`); the argument's format must be `fmt`."""
    fmt: Format = Format.unknown
    lod: int = 0

    def check(self, tex, name: str) -> None:
        super().check(tex, name)
        if tex.fmt is not self.fmt:
            raise SpiradRuntimeError(f"RWTextureType format mismatch for argument {name}: "
                                     f"expected {self.fmt}, got {tex.fmt}")


def texture(num_dimensions: int) -> TextureType:
    """The annotation of a sampled texture parameter (Taichi's `ti.types.texture`)."""
    _check_dims(num_dimensions)
    return TextureType(num_dimensions)


def rw_texture(num_dimensions: int, fmt=None, lod: int = 0) -> RWTextureType:
    """The annotation of a storage texture parameter (Taichi's `ti.types.rw_texture`)."""
    _check_dims(num_dimensions)
    if fmt is None:
        raise SpiradTypeError("rw_texture needs fmt= (an sd.Format)")
    _check_format(fmt)
    if lod != 0:
        raise SpiradNotSupportedError(f"rw_texture(lod={lod}): spirad's textures have one mip "
                                      f"level (lod=0)")
    return RWTextureType(num_dimensions, fmt, lod)


_types._makers_texture[:] = [texture, rw_texture]


def _check_dims(n) -> None:
    if n not in (1, 2, 3):
        raise SpiradTypeError(f"a texture has 1 to 3 dimensions, got num_dimensions={n!r}")
