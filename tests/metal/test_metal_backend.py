"""The Metal backend (emulated here): availability and the emulation variable, sd.gpu, the
compile-time errors of the Metal profile, storage-buffer packing, adstacks with overflow."""
import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradArchError, SpiradDeviceError, SpiradTypeError
from tests.support.archs import arch_or_skip
from tests.support.grad_programs import per_element_trips, per_element_trips_grad


@pytest.fixture
def metal():
    arch_or_skip("metal")
    sd.init(arch=sd.metal, debug=True)


def _native_metal() -> bool:
    from gfx_runtime.wgpu import is_available
    return is_available(False)


def test_without_emulation_a_non_metal_adapter_is_a_clear_arch_error(monkeypatch):
    if _native_metal():
        pytest.skip("a real Metal GPU is present")
    monkeypatch.delenv("SPIRAD_METAL_EMULATE", raising=False)
    with pytest.raises(SpiradArchError, match="SPIRAD_METAL_EMULATE=1"):
        sd.init(arch=sd.metal)


def test_sd_gpu_never_picks_the_emulation(monkeypatch):
    from spirad.backends import GPU_ORDER, arch_available, resolve_arch
    assert GPU_ORDER == ("cuda", "amdgpu", "metal", "vulkan")
    monkeypatch.setenv("SPIRAD_METAL_EMULATE", "1")
    if _native_metal() or not arch_available("vulkan"):
        pytest.skip("needs Vulkan and no real Metal GPU")
    assert arch_available("metal")  # the emulation is usable when asked for by name ...
    assert resolve_arch("gpu") != "metal"  # ... but sd.gpu never picks it


def test_emulated_caps_are_apple_silicon(metal):
    import spirad.runtime.state as st
    be = st.backend()
    assert be.name == "metal" and be.caps.emulated
    assert be.capabilities()["f64"] is False
    # M1 through wgpu: 31 Metal buffer-table entries, 3 taken by every spirad pipeline (the
    # uniform arguments, the immediates, naga's buffer sizes): 28 storage buffers
    assert (be.caps.buffer_slots, be.caps.wgpu_storage_buffers) == (31, 31)
    assert be.caps.max_per_stage_storage_buffers == 28


def test_f64_is_a_compile_error_naming_the_line(metal):
    x = sd.field(sd.f64, 4)

    @sd.kernel
    def k():
        for i in x:
            x[i] = x[i] * 2.0

    with pytest.raises(SpiradTypeError) as e:
        k()
    msg = str(e.value)
    assert "Metal has no 64-bit floats" in msg and "sd.f32" in msg
    assert "x[i] = x[i] * 2.0" in msg and "^" in msg


def test_i64_atomic_add_is_a_compile_error(metal):
    c = sd.field(sd.i64, ())

    @sd.kernel
    def k():
        for i in range(8):
            sd.atomic_add(c[None], 1)

    with pytest.raises(SpiradTypeError, match="atomic add on i64 is not available on Metal"):
        k()


def test_i64_arguments_and_values_round_trip(metal):
    out = sd.field(sd.i64, 3)

    @sd.kernel
    def k(a: sd.i64, b: sd.i64):
        out[0] = a + b
        out[1] = a * 3
        out[2] = -b

    a, b = (1 << 40) + 7, -(1 << 35) - 3
    k(a, b)
    assert list(out.to_numpy()) == [a + b, a * 3, -b]


def test_nan_and_inf_survive(metal):
    x = sd.field(sd.f32, 4)

    @sd.kernel
    def k():
        x[0] = sd.log(0.0 * x[1])      # -inf
        x[1] = sd.sqrt(x[1] - 1.0)     # NaN
        x[2] = 1.0 / (0.0 * x[3])      # inf (x[3] = 0)
        x[3] = sd.select(x[1] != x[1], 1.0, 0.0)  # NaN != NaN (naga orders OpFUnordNotEqual)

    k()
    v = x.to_numpy()
    assert v[0] == -np.inf and np.isnan(v[1]) and v[2] == np.inf and v[3] == 1.0


def _chain(nfields):
    """A dynamic loop (adstack) reading `nfields` fields: out += prod over fields of sin chains."""
    fs = [sd.field(sd.f32, 4, needs_grad=True) for _ in range(nfields - 2)]
    n = sd.field(sd.i32, 4)
    out = sd.field(sd.f32, (), needs_grad=True)
    for k, f in enumerate(fs):
        f.from_numpy(np.linspace(0.1, 0.5, 4).astype(np.float32) + 0.1 * k)
    n.from_numpy(np.array([1, 2, 3, 4], np.int32))
    return fs, n, out


def test_five_buffers_and_an_adstack(metal):
    """status + 5 arrays + adstack meta + one heap = 8 storage buffers (arguments are uniform)."""
    (a,), n, out = _chain(3)
    # a, a.grad, n, out, out.grad: five arrays in the adjoint kernel

    @sd.kernel
    def k():
        for i in a:
            v = a[i]
            for j in range(n[i]):
                v = sd.sin(v) + 0.25
            out[None] += v

    with sd.ad.Tape(loss=out):
        k()
    x0 = np.linspace(0.1, 0.5, 4)

    def f(x):
        tot = 0.0
        for i in range(4):
            v = x[i]
            for _ in range(i + 1):
                v = np.sin(v) + 0.25
            tot += v
        return tot
    eps = 1e-6
    num = [(f(x0 + eps * np.eye(4)[i]) - f(x0 - eps * np.eye(4)[i])) / (2 * eps) for i in range(4)]
    assert abs(out[None] - f(x0)) < 1e-5
    assert np.allclose(a.grad.to_numpy(), num, atol=1e-4)


def test_fields_share_a_root_buffer(metal):
    """a, a.grad, b, b.grad, n, out, out.grad and two autodiff-stack buffers: nine storage buffers
    when every field was its own (refused before root buffers); now status + one root view + the
    two stack buffers."""
    (a, b), n, out = _chain(4)

    @sd.kernel
    def k():
        for i in a:
            v = a[i] * b[i]
            for j in range(n[i]):
                v = sd.sin(v)
            out[None] += v

    with sd.ad.Tape(loss=out):
        k()
    av, bv = a.to_numpy().astype(np.float64), b.to_numpy().astype(np.float64)

    def f(x, y):
        tot = 0.0
        for i in range(4):
            v = x[i] * y[i]
            for _ in range(i + 1):
                v = np.sin(v)
            tot += v
        return tot
    eps = 1e-6
    num = [(f(av + eps * np.eye(4)[i], bv) - f(av - eps * np.eye(4)[i], bv)) / (2 * eps)
           for i in range(4)]
    assert abs(out[None] - f(av, bv)) < 1e-5
    assert np.allclose(a.grad.to_numpy(), num, atol=1e-4)
    mods = k._plans[1].compiled.program.tasks
    assert max(m.num_bindings - len(m.uniform_bindings) for m in mods) <= 5


def test_too_many_ndarrays_is_a_clear_device_error(metal):
    """Ndarrays in arenas share one binding; bound directly (larger than an arena, or imported)
    they keep a buffer each: a kernel with more than Metal allows (28 storage buffers: status and
    28 direct ndarrays are 29) is refused before wgpu sees it, naming the kernel, the count, the
    limit and the arguments (tests/metal/test_metal_limits.py: the largest kernel that fits)."""
    from tests.metal.test_metal_limits import _direct, wide_kernel
    k = wide_kernel(28)
    arrs = _direct(28)
    names = ", ".join(f"a{i}" for i in range(28))
    with pytest.raises(SpiradDeviceError, match=rf"kernel wide28 needs 29 storage buffers .*"
                       rf"28 ndarrays with buffers of their own.*\({names}\).* allows 28 .*"
                       rf"split the large ndarray arguments {names}"):
        k(*arrs)
    k(*[sd.ndarray(sd.f32, 4) for _ in range(28)])  # in the arena: they fit


def test_adstack_overflow_is_reported(monkeypatch):
    arch_or_skip("metal")
    sd.init(arch=sd.metal, ad_stack_size=4)
    x = sd.field(sd.f32, 2, needs_grad=True)
    out = sd.field(sd.f32, (), needs_grad=True)
    n = sd.field(sd.i32, 2)
    n.from_numpy(np.array([2, 10], np.int32))
    x.from_numpy(np.array([0.3, 0.4], np.float32))

    @sd.kernel
    def k():
        for i in x:
            v = x[i]
            for j in range(n[i]):
                v = sd.sin(v)
            out[None] += v

    with pytest.raises(sd.SpiradAdStackOverflow, match="k"):
        with sd.ad.Tape(loss=out):
            k()
        sd.sync()


def test_gpu_sizer_has_every_slot_and_sizes_on_the_device(metal):
    """The sizer kernels compile with all 4 int + 2 f32 data slots on Metal (28 storage buffers;
    no f64 slots); a trip count read from a large ndarray is sized on the device, once per
    change, and the gradient is right."""
    import spirad.runtime.state as st
    from spirad.runtime import sizing_cache
    gs = st.backend().gpu_sizer
    assert gs is not None and (gs.int_slots, gs.f32_slots) == (4, 2)
    N = 200_000
    k = per_element_trips
    rng = np.random.default_rng(5)
    st_np = rng.integers(0, 5, N).astype(np.int32)
    x = sd.ndarray(sd.f32, N, needs_grad=True)
    s = sd.ndarray(sd.i32, N)
    o = sd.ndarray(sd.f32, N, needs_grad=True)
    xs = rng.uniform(-1.5, 1.5, N).astype(np.float32)
    x.from_numpy(xs)
    s.from_numpy(st_np)
    k(x, s, o)
    sizing_cache.stats.reset()
    for _ in range(2):  # the second launch hits the sizing cache
        x.grad.fill(0)
        o.grad.fill(1)
        k.grad(x, s, o)
    stats = sizing_cache.stats
    assert (stats.gpu_dispatches, stats.host_evaluations) == (1, 0), stats
    d = per_element_trips_grad(xs, st_np)
    np.testing.assert_allclose(x.grad.to_numpy(), d, rtol=2e-5, atol=2e-6)
