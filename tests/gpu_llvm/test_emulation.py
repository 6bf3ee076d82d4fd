"""The GPU lowering run on the CPU (`SPIRAD_<ARCH>_EMULATE=1`): forward results against numpy,
gradients against float64 central differences, with ranges longer than the emulated grid (the
grid stride), concurrent threads (atomics, one adstack heap row per thread), serial tasks, and
device errors reported at sync."""
import numpy as np
import pytest

import spirad as sd
from tests.autodiff.gradutil import arr
from tests.gpu_llvm import kernels


@pytest.mark.parametrize("fp", [sd.f32, sd.f64], ids=["f32", "f64"])
def test_forward_kernels(gpu_arch, fp):
    sd.init(arch=gpu_arch, default_fp=fp)
    kernels.run_forward(fp)


def test_gradients_through_heap_adstacks(gpu_arch):
    sd.init(arch=gpu_arch, default_fp=sd.f64, default_ad_stack_size=16)  # the while loop
    kernels.run_grads(sd.f64)


def test_grid_is_smaller_than_the_range_and_rows_are_threads(gpu_arch):
    sd.init(arch=gpu_arch, default_fp=sd.f64)
    import spirad.runtime.state as st
    be = st.backend()
    assert be.rt.max_threads < kernels.N
    n = 5000
    xs = np.linspace(0.1, 0.9, n)
    x, y = arr(sd.f64, xs, needs_grad=True), arr(sd.f64, np.zeros(n), needs_grad=True)
    kernels.k_loop_grad(x, y, 3)
    np.testing.assert_allclose(y.to_numpy(), kernels._loop_ref(xs, 3), rtol=1e-12)
    y.grad.fill(1.0)
    kernels.k_loop_grad.grad(x, y, 3)
    v, d = xs.copy(), np.ones(n)
    for k in range(3):
        d = d * np.cos(v) * 0.9
        v = np.sin(v) * 0.9 + 0.01 * k
    np.testing.assert_allclose(x.grad.to_numpy(), d, rtol=1e-12)
    hf, hi = be.heap_bytes()
    assert 0 < hf < n * 64  # heap rows = grid threads, not iterations


def test_out_of_range_index_is_reported_at_sync(gpu_arch):
    sd.init(arch=gpu_arch, debug=True)
    x = arr(sd.f32, np.zeros(8))

    @sd.kernel
    def bad(x: kernels.ND, k: sd.i32):
        for i in x:
            x[i + k] = 1.0

    bad(x, 3)
    with pytest.raises(sd.SpiradValueError, match="out of range|index"):
        sd.sync()
    bad(x, 0)  # the status is cleared: the next launch runs normally
    np.testing.assert_array_equal(x.to_numpy(), np.ones(8))


def test_many_launches_without_sync_reuse_the_arena_and_keep_the_first_error(gpu_arch, monkeypatch):
    from spirad.backends import llvm_gpu
    import spirad.runtime.state as st
    monkeypatch.setattr(llvm_gpu, "ARENA_LIMIT", 1 << 16)
    sd.init(arch=gpu_arch, debug=True)
    x = arr(sd.f32, np.zeros(64))

    @sd.kernel
    def inc(x: kernels.ND, k: sd.i32):
        for i in x:
            x[i + k] += 1.0

    inc(x, 100)  # every access out of range: the error waits for sync()
    for _ in range(3000):
        inc(x, 0)
    be = st.backend()
    assert be.arena.nbytes == 1 << 16 and len(be.launched) < 3000  # drained and reused
    with pytest.raises(sd.SpiradValueError, match="index out of range in kernel inc"):
        sd.sync()
    np.testing.assert_array_equal(x.to_numpy(), np.full(64, 3000.0))
