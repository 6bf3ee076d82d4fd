"""Ndarrays in shared arenas (docs/backends.md, "Binding model"): on the SPIR-V backends every
`sd.ndarray`, its gradient and the device copy of a host array passed to a kernel live in the
root chunks that hold the fields, addressed by an element offset in the argument block, so a
kernel binds the same few buffers whatever the number of its ndarrays.

Done-when of issue 38's "ndarrays share buffers as fields do": gradient kernels over 5, 8, 12 and
20 ndarrays with a run-time loop (an autodiff stack) run on vulkan and metal (M1 limits emulated)
and match float64 central differences (and so the CPU, which runs the same test); ndarrays
resized, dropped and reallocated between launches stay correct and reuse the arena instead of
growing it; a numpy array passed to an ndarray parameter works; an ndarray larger than one
arena gets a binding of its own.
"""
import warnings

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, SPIRV_ARCHS, test_archs
from tests.support.kernel_source import load_kernel as _load

M = 16  # elements per ndarray


def _coef(j: int, n: int) -> float:
    return (j + 1) / (2.0 * n)


def many_kernel(n: int):
    """`many{n}(a0, ..., a{n-1}, nt, out)`: per element i, s = 0 then nt[i] times
    s = sin(s) * 0.9 + cos(s) * sum_j a_j[i] * c_j (a run-time loop carrying a non-linear
    value: an autodiff stack), out[i] = s."""
    args = ", ".join(f"a{j}: sd.types.ndarray()" for j in range(n))
    mix = " + ".join(f"a{j}[i] * {_coef(j, n)!r}" for j in range(n))
    src = (f"import spirad as sd\n\n\n@sd.kernel\n"
           f"def many{n}({args}, nt: sd.types.ndarray(), out: sd.types.ndarray()):\n"
           f"    for i in range({M}):\n"
           f"        s = 0.0\n"
           f"        for t in range(nt[i]):\n"
           f"            s = sd.sin(s) * 0.9 + sd.cos(s) * ({mix})\n"
           f"        out[i] = s\n")
    return _load(f"many{n}", src)


def _reference(arrays, nt) -> np.ndarray:
    """`many_kernel`'s out in float64."""
    n = len(arrays)
    mix = sum(a * _coef(j, n) for j, a in enumerate(arrays))
    s = np.zeros(M)
    for t in range(int(nt.max())):
        on = t < nt
        s = np.where(on, np.sin(s) * 0.9 + np.cos(s) * mix, s)
    return s


def _storage_buffers(kernel, plan: int) -> int:
    """Storage buffers of the largest task of the kernel's last forward (0) / adjoint (1)
    program on a SPIR-V backend."""
    mods = kernel._plans[plan].compiled.program.tasks
    return max(m.num_bindings - len(m.uniform_bindings) for m in mods)


def _run_many(n: int):
    rng = np.random.default_rng(n)
    host = [rng.uniform(-1, 1, M) for _ in range(n)]
    nt_host = (np.arange(M) % 5 + 1).astype(np.int32)
    arrays = [sd.ndarray(sd.f32, M, needs_grad=True) for _ in range(n)]
    for a, h in zip(arrays, host):
        a.from_numpy(h.astype(np.float32))
    nt = sd.ndarray(sd.i32, M)
    nt.from_numpy(nt_host)
    out = sd.ndarray(sd.f32, M, needs_grad=True)
    k = many_kernel(n)
    k(*arrays, nt, out)
    ref = _reference([h.astype(np.float32).astype(np.float64) for h in host], nt_host)
    np.testing.assert_allclose(out.to_numpy(), ref, rtol=1e-5, atol=1e-5)
    out.grad.fill(1.0)
    k.grad(*arrays, nt, out)
    eps = 1e-6
    for j, a in enumerate(arrays):
        plus = [h.astype(np.float64) for h in host]
        minus = [h.astype(np.float64) for h in host]
        plus[j] = plus[j] + eps
        minus[j] = minus[j] - eps
        fd = (_reference(plus, nt_host) - _reference(minus, nt_host)) / (2 * eps)
        np.testing.assert_allclose(a.grad.to_numpy(), fd, rtol=1e-3, atol=1e-4,
                                   err_msg=f"d out / d a{j}")
    return k


@pytest.mark.parametrize("n", [5, 8, 12, 20])
@test_archs(archs=EVERY_ARCH)
def test_gradient_over_many_ndarrays_with_an_adstack_matches_finite_differences(arch, n):
    k = _run_many(n)
    if arch in ("vulkan", "metal"):
        # one view per element type of the arena chunk, whatever n: before arenas the adjoint
        # bound 2n + 2 ndarrays and gradients (47 at n = 20, refused on both)
        assert _storage_buffers(k, 0) <= 4
        assert _storage_buffers(k, 1) <= 7


@test_archs(archs=SPIRV_ARCHS)
def test_the_binding_count_does_not_grow_with_the_ndarrays(arch):
    counts = {n: (_storage_buffers(k, 0), _storage_buffers(k, 1))
              for n, k in ((n, _run_many(n)) for n in (5, 20))}
    assert counts[5] == counts[20], counts


def _copy_kernel():
    return _load("scaled", "import spirad as sd\n\n\n@sd.kernel\n"
                           "def scaled(x: sd.types.ndarray(), y: sd.types.ndarray(), c: sd.f32):\n"
                           "    for i in x:\n        y[i] = x[i] * c + 1.0\n")


@test_archs(archs=EVERY_ARCH)
def test_ndarrays_resized_dropped_and_reallocated_between_launches(arch):
    """Each round drops the last round's ndarrays (sizes change) before launching again without
    a sync in between; the results stay right, a reused range reads as zeros, and on the SPIR-V
    backends the arena stops growing: dropped ranges are reused."""
    from spirad.runtime import state
    k = _copy_kernel()
    be = state.backend()
    sizes = []
    for r in range(40):
        n = 700 + (r * 1313) % 5000  # 40 rounds: 2 MiB without reuse
        x = sd.ndarray(sd.f32, n)
        y = sd.ndarray(sd.f32, n, needs_grad=True)
        assert not y.to_numpy().any() and not y.grad.to_numpy().any()  # new ndarrays are zero
        xs = np.arange(n, dtype=np.float32) + r
        x.from_numpy(xs)
        k(x, y, 0.5)
        if r % 3:  # read back only some rounds: drops happen with launches still pending
            np.testing.assert_allclose(y.to_numpy(), xs * 0.5 + 1.0)
        if arch in ("vulkan", "metal") and r >= 20:
            sizes.append(be.roots.nbytes())
        del x, y
    if arch in ("vulkan", "metal"):
        assert len(set(sizes)) == 1, sizes  # no growth in the second half
        assert be.roots.reclaims > 0  # dropped ranges went back to the free lists


@test_archs(archs=EVERY_ARCH)
def test_a_numpy_array_passed_to_an_ndarray_parameter(arch):
    k = _copy_kernel()
    x = np.linspace(0, 1, 33).astype(np.float32)
    y = np.zeros(33, np.float32)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        k(x, y, 2.0)
        np.testing.assert_allclose(y, x * 2.0 + 1.0, rtol=1e-6)
        if arch in ("vulkan", "metal"):
            from spirad.backends.root_buffers import RootSlice
            assert all(type(st) is RootSlice for st in k._plans[0].storages)  # in the arena
        x2 = np.arange(5, dtype=np.float32)
        y2 = np.zeros(5, np.float32)
        k(x2, y2, 3.0)  # other arrays: new copies
    assert (arch == "cpu") == (not seen)  # "copied to ... device memory" where it is copied
    np.testing.assert_allclose(y2, x2 * 3.0 + 1.0)


@test_archs(archs=SPIRV_ARCHS)
def test_a_directly_bound_ndarray_takes_a_binding_and_a_variant_of_its_own(arch):
    """An ndarray that is not in an arena (larger than one: lavapipe's 128 MiB binding; or over
    an imported buffer) is bound directly: the kernel's variant for it binds one more buffer,
    and launches switch between variants as their arguments' placement changes. Simulated with
    an ndarray over a buffer of its own, as an imported one is."""
    from spirad.runtime import state
    from spirad.backends.root_buffers import RootSlice
    from spirad.data.ndarray import Ndarray
    be = state.backend()
    k = _copy_kernel()
    x, y = sd.ndarray(sd.f32, 8), sd.ndarray(sd.f32, 8)
    own = Ndarray._alias(be.allocate(32), sd.f32, (8,))
    assert type(x._storage()) is RootSlice and type(own._storage()) is not RootSlice
    x.from_numpy(np.arange(8, dtype=np.float32))
    own.from_numpy(np.arange(8, dtype=np.float32) + 10)
    k(x, y, 2.0)
    n_arena = _storage_buffers(k, 0)
    np.testing.assert_allclose(y.to_numpy(), np.arange(8) * 2.0 + 1.0)
    k(own, y, 3.0)
    np.testing.assert_allclose(y.to_numpy(), (np.arange(8) + 10) * 3.0 + 1.0)
    assert _storage_buffers(k, 0) == n_arena + 1
    k(x, own, 4.0)
    np.testing.assert_allclose(own.to_numpy(), np.arange(8) * 4.0 + 1.0)
    k(x, y, 5.0)  # back to the first variant
    np.testing.assert_allclose(y.to_numpy(), np.arange(8) * 5.0 + 1.0)
    assert _storage_buffers(k, 0) == n_arena
    assert len(k._plans[0].compiled.program.variants) == 3


# -- the allocator alone (no device) -------------------------------------------------------------
class _Buf:
    def __init__(self, n):
        self.nbytes = n
        self.data = np.zeros(n, np.uint8)

    def write(self, data, offset=0):
        raw = np.asarray(data).view(np.uint8).reshape(-1)
        self.data[offset:offset + raw.nbytes] = raw


class _Rt:
    def __init__(self):
        self.flushes = 0

    def alloc(self, n):
        return _Buf(n)

    def copy(self, src, dst, n):
        dst.data[:n] = src.data[:n]

    def flush(self):
        self.flushes += 1


def test_arena_reuses_dropped_ranges_and_merges_neighbours():
    import gc

    from spirad.backends.root_buffers import RootBuffers
    rt = _Rt()
    roots = RootBuffers(rt, 1 << 20, 1 << 30)
    a = roots.place_ndarray(1000)
    b = roots.place_ndarray(1000)
    c = roots.place_ndarray(1000)
    assert (a.offset, b.offset, c.offset) == (0, 1000, 2000)
    b.chunk.buffer.write(np.full(1000, 7, np.uint8), b.offset)
    del a, b
    gc.collect()
    assert roots.free_bytes() == 0  # released, not yet free: work may still read them
    # fits the buffer as it is: placed after c, no flush
    d = roots.place_ndarray(1000)
    assert d.offset == 3000 and rt.flushes == 0
    big = roots.place_ndarray(roots.chunks[0].buffer.nbytes)  # would grow: reclaim first
    assert rt.flushes == 1
    del big
    e = roots.place_ndarray(2000)  # the two dropped ranges, merged into one
    assert e.offset == 0 and e.nbytes == 2000
    assert not e.chunk.buffer.data[0:2000].any()  # zeroed: b's bytes are gone
    assert roots.place_ndarray(roots.limit + 8) is None  # larger than an arena: not placed
    del c, d, e
