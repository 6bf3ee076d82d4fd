"""Textures (Taichi's `ti.Texture`, `types.texture` / `rw_texture`; spirad/texture.py): stores
rounded to the format, fetch / load, bilinear and trilinear sampling with repeat addressing,
robust reads outside the image, struct-for over a storage texture, the launch checks, host I/O
and compute-graph arguments. The expected values come from numpy models of Vulkan's rules
(the rules Taichi 1.7.4 sets its sampler to), not from spirad."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


def _bilinear_repeat(texels: np.ndarray, uv) -> np.ndarray:
    """Vulkan's linear filtering, normalized coordinates, REPEAT addressing, of `texels`
    (shape + (4,)) at `uv`, in float64."""
    shape = texels.shape[:-1]
    x = np.array(uv, np.float64) * np.array(shape) - 0.5
    base = np.floor(x).astype(int)
    frac = x - base
    acc = np.zeros(4)
    for corner in range(2 ** len(shape)):
        bits = [(corner >> k) & 1 for k in range(len(shape))]
        w = np.prod([frac[k] if b else 1 - frac[k] for k, b in enumerate(bits)])
        idx = tuple((base[k] + b) % shape[k] for k, b in enumerate(bits))
        acc += w * texels[idx]
    return acc


@sd.kernel
def fill_r32f(t: sd.types.rw_texture(num_dimensions=2, fmt=sd.Format.r32f, lod=0)):
    for i, j in t:
        t.store(sd.Vector([i, j]), sd.Vector([i * 10.0 + j, 7.0, 8.0, 9.0]))


@sd.kernel
def fill_rgba8(t: sd.types.rw_texture(num_dimensions=2, fmt=sd.Format.rgba8, lod=0)):
    for i, j in t:
        t.store(sd.Vector([i, j]), sd.Vector([i * 0.3 - 0.2, 0.5, 0.1234, 2.0]))


@sd.kernel
def reads(t: sd.types.texture(num_dimensions=2), at: sd.types.ndarray(), uv: sd.types.ndarray(),
          fetched: sd.types.ndarray(), sampled: sd.types.ndarray(), lod: sd.i32):
    for k in at:
        fetched[k] = t.fetch(at[k], lod)
    for k in uv:
        sampled[k] = t.sample_lod(uv[k], 0.0)


def _read(tex, at, uv, lod=0):
    a = sd.Vector.ndarray(2, sd.i32, len(at))
    a.from_numpy(np.array(at, np.int32))
    u = sd.Vector.ndarray(2, sd.f32, len(uv))
    u.from_numpy(np.array(uv, np.float32))
    f, s = sd.Vector.ndarray(4, sd.f32, len(at)), sd.Vector.ndarray(4, sd.f32, len(uv))
    reads(tex, a, u, f, s, lod)
    return f.to_numpy(), s.to_numpy()


AT = [(1, 2), (-1, 2), (1, 9), (3, 3), (0, 4)]
UV = [(0.375, 0.625), (0.5, 0.5), (0.0, 0.0), (1.1, -0.2), (0.3, 0.45), (0.93, 0.07)]


@test_archs()
def test_r32f_store_fetch_and_sample(arch):
    tex = sd.Texture(sd.Format.r32f, (4, 5))
    fill_r32f(tex)
    i, j = np.meshgrid(np.arange(4), np.arange(5), indexing="ij")
    np.testing.assert_array_equal(tex.to_numpy()[..., 0], i * 10.0 + j)  # only r is stored
    texels = np.zeros((4, 5, 4))
    texels[..., 0], texels[..., 3] = i * 10.0 + j, 1.0  # missing g, b read 0, alpha 1
    fetched, sampled = _read(tex, AT, UV)
    want = [texels[a] if 0 <= a[0] < 4 and 0 <= a[1] < 5 else [0, 0, 0, 1] for a in AT]
    np.testing.assert_array_equal(fetched, want)
    np.testing.assert_allclose(sampled, [_bilinear_repeat(texels, u) for u in UV], rtol=1e-5,
                               atol=1e-5)
    fetched, _ = _read(tex, AT, UV, lod=1)  # one mip level: level 1 is outside the image
    np.testing.assert_array_equal(fetched, [[0, 0, 0, 1]] * len(AT))


@test_archs()
def test_rgba8_rounds_and_clamps_stores(arch):
    tex = sd.Texture(sd.Format.rgba8, (4, 4))
    fill_rgba8(tex)
    f32 = np.float32  # the kernel's arithmetic: 1 * 0.3 - 0.2 is 0.1 + 1e-9 in f32 (-> 26 / 255)
    r = np.clip(np.arange(4, dtype=f32) * f32(0.3) - f32(0.2), 0, 1)
    want = np.stack(np.broadcast_arrays(r[:, None], f32(0.5), f32(0.1234), f32(1.0)), -1)
    want = np.floor(want * f32(255) + f32(0.5)) / f32(255) * np.ones((4, 4, 1), f32)
    np.testing.assert_allclose(tex.to_numpy(), want, rtol=0, atol=1e-7)
    fetched, sampled = _read(tex, AT, UV)
    np.testing.assert_allclose(fetched[0], want[1, 2], atol=1e-7)
    np.testing.assert_array_equal(fetched[1], [0, 0, 0, 0])  # the format has alpha: 0 outside
    np.testing.assert_allclose(sampled, [_bilinear_repeat(want, u) for u in UV], atol=1e-5)


@test_archs()
def test_1d_and_3d_textures_and_half_formats(arch):
    @sd.kernel
    def fill3(t: sd.types.rw_texture(num_dimensions=3, fmt=sd.Format.rg16f, lod=0)):
        for i, j, k in t:
            t.store(sd.Vector([i, j, k]), sd.Vector([i + 0.1 * j + 0.01 * k, -1.0 / 3, 0.0, 0.0]))

    @sd.kernel
    def fill1(t: sd.types.rw_texture(num_dimensions=1, fmt=sd.Format.r16, lod=0)):
        for i in t:
            t.store(sd.Vector([i]), sd.Vector([i / 7.0, 0.0, 0.0, 0.0]))

    @sd.kernel
    def sample(t3: sd.types.texture(num_dimensions=3), t1: sd.types.texture(num_dimensions=1),
               uvw: sd.types.ndarray(), out3: sd.types.ndarray(), out1: sd.types.ndarray()):
        for n in uvw:
            out3[n] = t3.sample_lod(uvw[n], 0.0)
            out1[n] = t1.sample_lod(sd.Vector([uvw[n][0]]), 0.0)

    t3, t1 = sd.Texture(sd.Format.rg16f, (3, 4, 2)), sd.Texture(sd.Format.r16, 8)
    fill3(t3)
    fill1(t1)
    i, j, k = np.meshgrid(np.arange(3), np.arange(4), np.arange(2), indexing="ij")
    r3 = (i + 0.1 * j + 0.01 * k).astype(np.float16).astype(np.float64)
    np.testing.assert_array_equal(t3.to_numpy()[..., 0], r3)
    assert (t3.to_numpy()[..., 1] == np.float16(-1.0 / 3)).all()
    r1 = np.floor(np.arange(8) / 7.0 * 65535 + 0.5) / 65535
    np.testing.assert_allclose(t1.to_numpy()[:, 0], r1, rtol=0, atol=1e-7)
    pts = np.array([[0.2, 0.7, 0.1], [0.95, 0.05, 0.6], [0.5, 0.5, 0.5]], np.float32)
    uvw = sd.Vector.ndarray(3, sd.f32, 3)
    uvw.from_numpy(pts)
    out3, out1 = sd.Vector.ndarray(4, sd.f32, 3), sd.Vector.ndarray(4, sd.f32, 3)
    sample(t3, t1, uvw, out3, out1)
    tex3 = np.zeros((3, 4, 2, 4))
    tex3[..., 0], tex3[..., 1], tex3[..., 3] = r3, np.float16(-1.0 / 3), 1.0
    tex1 = np.zeros((8, 4))
    tex1[:, 0], tex1[:, 3] = r1, 1.0
    for n, p in enumerate(pts):
        np.testing.assert_allclose(out3.to_numpy()[n], _bilinear_repeat(tex3, p), atol=2e-5)
        np.testing.assert_allclose(out1.to_numpy()[n], _bilinear_repeat(tex1, p[:1]), atol=2e-5)


@test_archs()
def test_texture_arguments_are_checked(arch):
    with pytest.raises(sd.SpiradRuntimeError, match="RWTextureType dimension mismatch for "
                                                    "argument t: expected 2, got 3"):
        fill_r32f(sd.Texture(sd.Format.r32f, (2, 2, 2)))
    with pytest.raises(sd.SpiradRuntimeError, match="RWTextureType format mismatch for argument "
                                                    "t: expected Format.r32f, got Format.rgba8"):
        fill_r32f(sd.Texture(sd.Format.rgba8, (2, 2)))
    with pytest.raises(sd.SpiradTypeError, match="must be an sd.Texture, got Ndarray"):
        fill_r32f(sd.ndarray(sd.f32, (2, 2)))
    with pytest.raises(sd.SpiradNotSupportedError, match="texture format Format.r32i"):
        sd.Texture(sd.Format.r32i, (2, 2))


@test_archs()
def test_host_io_and_images(arch):
    tex = sd.Texture(sd.Format.rg32f, (3, 2))
    nd = sd.Vector.ndarray(3, sd.f32, (3, 2))
    nd.from_numpy(np.arange(18, dtype=np.float32).reshape(3, 2, 3))
    tex.from_ndarray(nd)  # the first components fill the channels
    np.testing.assert_array_equal(tex.to_numpy(), np.arange(18).reshape(3, 2, 3)[..., :2])
    f = sd.field(sd.f32, (3, 2))
    f.fill(0.25)
    tex.from_field(f)  # a scalar fills r, g is 0
    np.testing.assert_array_equal(tex.to_numpy(), np.stack([np.full((3, 2), 0.25),
                                                            np.zeros((3, 2))], -1))
    Image = pytest.importorskip("PIL.Image")
    pixels = np.random.default_rng(1).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    img = Image.fromarray(pixels)  # 7 wide, 5 high
    t8 = sd.Texture(sd.Format.rgba8, img.size)
    t8.from_image(img)
    assert t8.shape == (7, 5)
    # Taichi's orientation: texel (i, j) is the pixel in column width - 1 - i, row j; alpha 0
    np.testing.assert_allclose(t8.to_numpy()[2, 3], list(pixels[3, 4] / 255.0) + [0], atol=1e-7)
    assert (np.asarray(t8.to_image()) == pixels).all()


@test_archs()
def test_texture_graph_arguments(arch):
    @sd.kernel
    def read(t: sd.types.texture(num_dimensions=2), out: sd.types.ndarray()):
        for i, j in out:
            out[i, j] = t.fetch(sd.Vector([i, j]), 0).r

    g = sd.graph
    rw = g.Arg(g.ArgKind.RWTEXTURE, "tex", fmt=sd.Format.r32f, ndim=2)
    arr = g.Arg(g.ArgKind.NDARRAY, "out", sd.f32, ndim=2)
    b = g.GraphBuilder()
    b.dispatch(fill_r32f, rw)
    b.dispatch(read, rw, arr)
    tex, out = sd.Texture(sd.Format.r32f, (4, 3)), sd.ndarray(sd.f32, (4, 3))
    b.compile().run({"tex": tex, "out": out})
    i, j = np.meshgrid(np.arange(4), np.arange(3), indexing="ij")
    np.testing.assert_array_equal(out.to_numpy(), i * 10.0 + j)
    with pytest.raises(sd.SpiradRuntimeError, match="must specify a valid color format"):
        g.Arg(g.ArgKind.RWTEXTURE, "t", ndim=2)
    with pytest.raises(sd.SpiradRuntimeError, match="Please use ndim instead"):
        g.Arg(g.ArgKind.TEXTURE, "t", shape=(4, 4))
