"""Metal at the limits wgpu reports for an M1 (emulated here): 31 buffer-table entries per stage,
28 storage buffers per spirad pipeline (gfx_runtime/wgpu/caps.py), instead of WebGPU's default 8
that a device created without `required_limits` gets. Kernels that were refused at 8 run and
match the CPU; ndarrays share arenas, so only directly bound ones count, and one past 28 is
refused with the clear error. float64 host arrays run as float32
copies."""
import warnings

import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradDeviceError, SpiradTypeError, SpiradWarning
from tests.support.archs import arch_or_skip
from tests.support.kernel_source import load_kernel as _load

ND = sd.types.ndarray()


def wide_kernel(n: int):
    """`wide{n}(a0, ..., a{n-1})`: a0[i] = sum over k >= 1 of sin(a_k[i]) * k, one storage buffer
    per ndarray (and per gradient in its adjoint)."""
    args = ", ".join(f"a{k}: sd.types.ndarray()" for k in range(n))
    body = " + ".join(f"sd.sin(a{k}[i]) * {k}.0" for k in range(1, n))
    return _load(f"wide{n}", f"import spirad as sd\n\n\n@sd.kernel\ndef wide{n}({args}):\n"
                             f"    for i in a0:\n        a0[i] = {body}\n")


def _init(arch):
    arch_or_skip(arch)
    sd.init(arch=getattr(sd, arch), debug=True)


def _storage_buffers(kernel, plan: int) -> int:
    mods = kernel._plans[plan].compiled.program.tasks
    return max(m.num_bindings - len(m.uniform_bindings) for m in mods)


# -- the device limits ---------------------------------------------------------------------------
def test_device_gets_the_adapters_limits_not_webgpus_defaults():
    _init("metal")
    import spirad.runtime.state as st
    be = st.backend()
    c = be.caps
    assert c.emulated and (c.buffer_slots, c.wgpu_storage_buffers) == (31, 31)
    assert c.max_per_stage_storage_buffers == 28  # 31 - arguments - immediates - buffer sizes
    lim = be.rt._device.limits
    assert lim["max-storage-buffers-per-shader-stage"] == 31  # not WebGPU's default 8
    assert lim["max-buffer-size"] == c.max_buffer_size > 256 << 20  # not WebGPU's 256 MiB


# -- 5 ndarrays and an autodiff stack: 9 storage buffers (refused at 8), now 4 --------------------
def _grad_with_adstack(arch):
    """A gradient kernel over 5 ndarrays with a run-time trip count (an autodiff stack): its
    adjoint bound status, x, x.grad, w, n, c, out.grad and the stack's meta + heap = 9 when each
    ndarray had its own buffer; in arenas (docs/metal.md) the root chunk's f32 and u32 views and
    the stack's meta + heap = 4."""
    _init(arch)

    @sd.kernel
    def k(x: ND, w: sd.types.ndarray(needs_grad=False), n: ND,
          c: sd.types.ndarray(needs_grad=False), out: ND):
        for i in x:
            v = x[i] * w[i]
            for _ in range(n[i]):
                v = sd.sin(v) + c[i]
            out[i] = v

    N = 64
    rng = np.random.default_rng(3)
    x = sd.ndarray(sd.f32, N, needs_grad=True)
    out = sd.ndarray(sd.f32, N, needs_grad=True)
    w, c, n = sd.ndarray(sd.f32, N), sd.ndarray(sd.f32, N), sd.ndarray(sd.i32, N)
    x.from_numpy(rng.uniform(-1, 1, N).astype(np.float32))
    w.from_numpy(rng.uniform(0.5, 1.5, N).astype(np.float32))
    c.from_numpy(rng.uniform(-0.2, 0.2, N).astype(np.float32))
    n.from_numpy(rng.integers(0, 6, N).astype(np.int32))
    k(x, w, n, c, out)
    out.grad.fill(1.0)
    k.grad(x, w, n, c, out)
    return out.to_numpy(), x.grad.to_numpy(), k


def test_grad_over_five_ndarrays_with_an_adstack_runs_and_matches_cpu():
    ref_out, ref_grad, _ = _grad_with_adstack("cpu")
    out, grad, k = _grad_with_adstack("metal")
    assert _storage_buffers(k, 1) == 4  # 9 with a buffer per ndarray ("allows 8": refused)
    np.testing.assert_allclose(out, ref_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-4, atol=1e-5)


# -- 8 and 10 ndarrays, forward and gradient ------------------------------------------------------
def _wide(arch, n: int, grad: bool):
    _init(arch)
    k = wide_kernel(n)
    rng = np.random.default_rng(n)
    arrs = [sd.ndarray(sd.f32, 33, needs_grad=grad) for _ in range(n)]
    for a in arrs[1:]:
        a.from_numpy(rng.uniform(-2, 2, 33).astype(np.float32))
    k(*arrs)
    if grad:
        arrs[0].grad.fill(1.0)
        k.grad(*arrs)
    res = [a.to_numpy() for a in arrs[:1]] + \
        ([a.grad.to_numpy() for a in arrs[1:]] if grad else [])
    return res, k


@pytest.mark.parametrize("grad", [False, True], ids=["forward", "grad"])
@pytest.mark.parametrize("n", [8, 10])
def test_kernels_over_8_and_10_ndarrays_run_and_match_cpu(n, grad):
    ref, _ = _wide("cpu", n, grad)
    got, k = _wide("metal", n, grad)
    # with a buffer per ndarray each needed more than WebGPU's default 8; in arenas: 1 or 2
    assert _storage_buffers(k, 1 if grad else 0) <= 2
    for r, g in zip(ref, got):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)


def _run_wide(k, arrs, storage_buffers):
    """Launch wide_kernel `k` over `arrs` (5 f32 each): check the storage buffers its task binds
    and its result, sin(x) times the sum of the inputs' indices."""
    xs = np.linspace(0.1, 0.9, 5).astype(np.float32)
    for a in arrs[1:]:
        a.from_numpy(xs)
    k(*arrs)
    assert _storage_buffers(k, 0) == storage_buffers
    np.testing.assert_allclose(arrs[0].to_numpy(), np.sin(xs) * sum(range(1, len(arrs))), rtol=1e-5)


def test_sixty_ndarrays_share_the_arena():
    """60 ndarrays bind the arena chunk's f32 view (and its u32 view of the status words, and the
    uniform arguments): the count no longer grows with the ndarrays (27 was the most with a
    buffer per ndarray)."""
    _init("metal")
    k = wide_kernel(60)
    arrs = [sd.ndarray(sd.f32, 5) for _ in range(60)]
    _run_wide(k, arrs, storage_buffers=2)


def _direct(n):
    """n ndarrays of 5 f32 bound directly, as an ndarray larger than an arena or an imported
    buffer is (not in an arena: a storage buffer each)."""
    from spirad.runtime import state
    from spirad.data.ndarray import Ndarray
    be = state.backend()
    return [Ndarray._alias(be.allocate(20), sd.f32, (5,)) for _ in range(n)]


def test_the_largest_kernel_over_direct_ndarrays_runs_and_one_more_is_refused():
    """Directly bound ndarrays still take a storage buffer each: status + 27 of them = 28
    storage buffers (+ the uniform arguments, the immediates and naga's buffer sizes: all 31
    entries of Metal's buffer table) runs; 28 are refused before wgpu sees the module, naming
    the count, the limit and the arguments."""
    _init("metal")
    k = wide_kernel(27)
    arrs = _direct(27)
    _run_wide(k, arrs, storage_buffers=28)
    k2 = wide_kernel(28)
    arrs += _direct(1)
    with pytest.raises(SpiradDeviceError, match=r"kernel wide28 needs 29 storage buffers in task "
                       r".*28 ndarrays with buffers of their own, larger than one arena \(\d+ "
                       r"bytes\) or imported \(a0, a1, .*a27\)\) but .* allows 28 per kernel "
                       r"\(Metal, through wgpu\); pass fewer such ndarrays"):
        k2(*arrs)
    k(*arrs[:27])  # the device is as it was


# -- windows the emulating adapter needs and an M1 would not ------------------------------------
def _fields_kernel(n: int):
    """`sum_fields{n}()`: f0[i] = sum over k >= 1 of f_k[i] * k over n fields of 5,000 f32."""
    args = ", ".join(f"f{k}: sd.template()" for k in range(n))
    body = " + ".join(f"f{k}[i] * {k}.0" for k in range(1, n))
    return _load(f"sum_fields{n}", f"import spirad as sd\n\n\n@sd.kernel\n"
                                   f"def sum_fields{n}({args}):\n    for i in f0:\n"
                                   f"        f0[i] = {body}\n")


def _fields_over_small_bindings(n: int):
    """n fields of 20,000 bytes on an emulated M1 whose adapter binds 8 KiB and the M1 16 KiB
    (lavapipe's 128 MiB against an M1's 256 MiB, at test scale): 3 windows each on the adapter,
    2 on the M1."""
    import dataclasses
    import spirad.runtime.state as st
    _init("metal")
    be = st.backend()
    be.roots.limit = 8192
    be.caps = dataclasses.replace(be.caps, max_storage_buffer_range=8192,
                                  emulated_max_binding=16384)
    k = _fields_kernel(n)
    return k, [sd.field(sd.f32, 5000) for _ in range(n)], be.roots


def test_windows_only_the_emulating_adapter_needs_are_not_counted_against_the_m1():
    """10 fields of 3 windows bind 31 storage buffers on the adapter (status and 30 windows):
    past an M1's 28 as counted before, but an M1 binds them as 2 windows each (21). The kernel
    runs and matches numpy (DiffTaichi's diffmpm3d: 30 on lavapipe, 18 at an M1's 256 MiB)."""
    k, fs, roots = _fields_over_small_bindings(10)
    rng = np.random.default_rng(5)
    xs = [rng.uniform(-1, 1, 5000).astype(np.float32) for _ in fs]
    for f, x in zip(fs[1:], xs[1:]):
        f.from_numpy(x)
    k(*fs)
    assert all(len(roots.by_key[f.id].chunk.windows) == 3 for f in fs)
    assert _storage_buffers(k, 0) == 31
    np.testing.assert_allclose(fs[0].to_numpy(), sum(x * j for j, x in enumerate(xs) if j),
                               rtol=1e-5, atol=1e-5)


def test_windows_past_the_emulating_adapters_own_limit_are_refused_naming_it():
    """11 such fields: 34 storage buffers on the adapter, past its 31, though an M1 would bind
    23: a clear error naming both counts, not a wgpu failure."""
    k, fs, _ = _fields_over_small_bindings(11)
    with pytest.raises(SpiradDeviceError, match=r"kernel sum_fields11 needs 34 storage buffers "
                       r"in task .*11 of them windows of fields larger than this adapter's "
                       r"bindings \(8192 bytes\).*own limit of 31; the device emulated binds 23"):
        k(*fs)


# -- float64 host arrays -----------------------------------------------------------------------
def _f64_kernels():
    @sd.kernel
    def scale(a: ND, b: ND):
        for i in a:
            b[i] = a[i] * 2.0 + 1.0

    @sd.kernel
    def loss_k(x: ND, y: ND):
        for i in x:
            y[i] = x[i] * x[i]

    return scale, loss_k


def _precision_warnings(rec):
    return [str(w.message) for w in rec if issubclass(w.category, SpiradWarning)
            and "float64" in str(w.message)]


def test_float64_numpy_arrays_run_as_float32_with_one_warning_per_argument():
    _init("metal")
    scale, _ = _f64_kernels()
    a = np.linspace(0, 1, 10)  # float64
    b = np.zeros(10)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        scale(a, b)
        scale(a, b)
        b2 = np.zeros(10)
        scale(a, b2)  # a new array for b: still one warning per kernel and argument
    msgs = _precision_warnings(rec)
    assert len(msgs) == 2, msgs
    assert any("argument 'a' of scale" in m for m in msgs)
    assert any("argument 'b' of scale" in m for m in msgs)
    assert all("converted to float32" in m and "Metal has no 64-bit floats" in m and
               "lose precision" in m for m in msgs)
    assert b.dtype == np.float64 and b2.dtype == np.float64
    want = (a.astype(np.float32) * np.float32(2) + np.float32(1)).astype(np.float64)
    np.testing.assert_array_equal(b, want)  # written back, as float64, with float32's values
    np.testing.assert_array_equal(b2, want)
    assert not np.array_equal(b, a * 2 + 1)  # float32 precision, as the warning says


def test_float64_torch_cpu_tensors_run_as_float32_and_their_gradients_come_back():
    torch = pytest.importorskip("torch")
    _init("metal")
    _, loss_k = _f64_kernels()
    x = torch.linspace(-1, 1, 8, dtype=torch.float64, requires_grad=True)
    y = torch.zeros(8, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        with torch.no_grad():
            loss_k(x, y)
        y.grad = torch.ones(8, dtype=torch.float64)
        loss_k.grad(x, y)
    msgs = _precision_warnings(rec)
    assert len([m for m in msgs if "of loss_k" in m]) == 2, msgs
    assert all("torch tensor" in m for m in msgs)
    assert y.dtype == x.grad.dtype == torch.float64
    xs = x.detach().numpy().astype(np.float32)
    np.testing.assert_allclose(y.detach().numpy(), xs * xs, rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), 2 * xs, rtol=1e-6)


def test_an_annotated_f64_parameter_and_an_f64_ndarray_stay_refused():
    """Only unannotated parameters are converted; `sd.ndarray(sd.f64)` is refused where it is
    created on Metal (no kernel could take it), with the message the arch tests treat as
    Metal's f64 refusal."""
    _init("metal")

    @sd.kernel
    def k(a: sd.types.ndarray(dtype=sd.f64)):
        for i in a:
            a[i] = a[i] * 2.0

    with pytest.raises(SpiradTypeError, match="Metal has no 64-bit floats"):
        k(np.zeros(4))
    with pytest.raises(SpiradTypeError, match=r"sd.ndarray of dtype f64 on metal: Metal has no "
                       r"64-bit floats; use sd.f32"):
        sd.ndarray(sd.f64, 4)
    with pytest.raises(SpiradTypeError, match=r"sd.from_dlpack: an ndarray of dtype f64 on metal"):
        sd.from_dlpack(np.zeros(4))
    with pytest.raises(SpiradTypeError, match="Metal has no 64-bit floats"):
        sd.Vector.ndarray(3, sd.f64, 4)
