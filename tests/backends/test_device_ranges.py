"""Parallel loops whose range reads fields, ndarray elements or locals (issue #13 item 9):
`for i in range(n[None])`, `range(a[0], b[0])`. Checked against numpy on every arch; on Vulkan
both ways a range is evaluated: on the device (indirect dispatch, the default) and on the host
(debug mode, and tasks with adstacks). The reverse-mode tests check that the adstack sizer sees
the launched range (float64 central differences)."""
import numpy as np
import pytest

import spirad as sd
from tests.autodiff.gradutil import central_diff
from tests.support.archs import EVERY_ARCH, arch_or_skip, exactly, test_archs
from tests.support.device_programs import bound_kernels

DEVICE_ARCHS = ("cpu", "vulkan", "metal")  # not debug: device ranges on vulkan and metal
N = 64


def _kernels():
    n = sd.field(sd.i32, shape=())
    ab = sd.field(sd.i32, shape=2)
    out = sd.field(sd.f32, shape=N)
    grid = sd.field(sd.f32, shape=(8, 8))

    @sd.kernel
    def shapes(arr: sd.types.ndarray(), k: sd.i32):
        for i in range(n[None]):                      # a 0-d field
            out[i] = 1.0
        for i in range(ab[0], ab[1]):                 # two elements
            out[i] += 10.0
        for i in range(arr[1] - k):                   # an ndarray element and an argument
            out[i] += 100.0
        m = ab[1] * 2                                 # a local: a kernel temporary
        for i in range(ab[1], m):
            out[i] += 1000.0
        for i, j in sd.ndrange(ab[0], (1, n[None])):  # a multi-dimensional range
            grid[i, j] = i * 10.0 + j

    def reference(nv, a, b, arrv, k):
        o = np.zeros(N, np.float32)
        o[:max(nv, 0)] = 1
        o[a:max(a, b)] += 10
        o[:max(arrv - k, 0)] += 100
        o[b:max(b, 2 * b)] += 1000
        g = np.zeros((8, 8), np.float32)
        for i in range(max(a, 0)):
            for j in range(1, nv):
                g[i, j] = i * 10 + j
        return o, g

    return n, ab, out, grid, shapes, reference


def _run_table(arch):
    n, ab, out, grid, shapes, reference = _kernels()
    arr = sd.ndarray(sd.i32, 3)
    for nv, a, b, arrv, k in ((5, 2, 7, 9, 3), (8, 0, 20, 4, 4), (0, 5, 3, 2, 9), (3, 6, 6, 40, 1)):
        out.fill(0)
        grid.fill(0)
        n[None] = nv                                  # new ranges, the same compiled kernel
        ab.from_numpy(np.array([a, b], np.int32))
        arr.from_numpy(np.array([0, arrv, 0], np.int32))
        shapes(arr, k)
        want_o, want_g = reference(nv, a, b, arrv, k)
        np.testing.assert_array_equal(out.to_numpy(), want_o, err_msg=str((nv, a, b, arrv, k)))
        np.testing.assert_array_equal(grid.to_numpy(), want_g, err_msg=str((nv, a, b, arrv, k)))
    return shapes, arr


@test_archs(archs=exactly("interp") | EVERY_ARCH)
def test_ranges_from_fields_ndarrays_and_locals(arch):       # debug mode: host-evaluated
    _run_table(arch)


@pytest.mark.parametrize("arch", DEVICE_ARCHS, ids=[f"arch={a}" for a in DEVICE_ARCHS])
def test_ranges_evaluated_on_the_device(arch):
    arch_or_skip(arch)
    sd.init(arch=arch)                                       # not debug: device ranges on Vulkan
    shapes, arr = _run_table(arch)
    if arch in ("vulkan", "metal"):
        prog = shapes.compile((arr, 1)).program
        kinds = [r[0] for r in prog.ranges if r is not None]
        assert kinds == ["device"] * 5, kinds
        assert not sd.runtime.state.current().backend.take_validation_messages()


@pytest.mark.parametrize("arch", DEVICE_ARCHS, ids=[f"arch={a}" for a in DEVICE_ARCHS])
def test_range_written_by_an_earlier_launch_and_task_without_host_sync(arch):
    arch_or_skip(arch)
    sd.init(arch=arch)
    n, x, set_n, count_up = bound_kernels()
    total = np.zeros(1000, np.int32)
    for v in (10, 500, 0, 999):
        set_n(v)                                     # queued on the device: no host read between
        count_up()
        total[:v + 1] += 1
    np.testing.assert_array_equal(x.to_numpy(), total)


@pytest.mark.parametrize("arch", DEVICE_ARCHS, ids=[f"arch={a}" for a in DEVICE_ARCHS])
def test_large_device_range(arch):
    arch_or_skip(arch)
    sd.init(arch=arch)
    big = 5_000_000                                  # > 65,535 workgroups of 64: a 2-D grid
    n = sd.field(sd.i32, shape=())
    x = sd.field(sd.i32, shape=big)

    @sd.kernel
    def k():
        for i in range(n[None]):
            x[i] = i % 1000 + 1

    n[None] = big - 3
    k()
    got = x.to_numpy()
    want = np.arange(big, dtype=np.int64) % 1000 + 1
    want[big - 3:] = 0
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("arch", DEVICE_ARCHS, ids=[f"arch={a}" for a in DEVICE_ARCHS])
def test_device_ranges_with_four_ndarrays_and_their_gradients(arch):
    """Ranges read from a field and from an ndarray element (indirect dispatch on vulkan and
    metal) in a kernel taking four ndarrays, two of them with gradients: the indirect-argument
    buffer is bound read-only (wgpu refuses a buffer that is both read-write storage and
    indirect argument of one dispatch), and every buffer is counted before wgpu sees it."""
    arch_or_skip(arch)
    sd.init(arch=arch)
    n = sd.field(sd.i32, shape=())
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def gated(a: sd.types.ndarray(), b: sd.types.ndarray(), c: sd.types.ndarray(),
              m: sd.types.ndarray()):
        for i in range(n[None]):
            loss[None] += sd.sin(a[i]) * b[i] + c[i]
        for i in range(m[1]):
            loss[None] += a[i] * a[i] * c[i]

    a = sd.ndarray(sd.f32, 16, needs_grad=True)
    b = sd.ndarray(sd.f32, 16, needs_grad=True)
    c = sd.ndarray(sd.f32, 16)
    m = sd.ndarray(sd.i32, 2)
    av, bv, cv = (np.linspace(0.1, 1.0, 16) * s for s in (1.0, 2.0, -0.5))
    for arr, vals in ((a, av), (b, bv), (c, cv)):
        arr.from_numpy(vals.astype(np.float32))
    for nv, mv in ((11, 5), (3, 16), (0, 0)):
        n[None] = nv
        m.from_numpy(np.array([0, mv], np.int32))
        loss[None] = 0.0
        gated(a, b, c, m)
        want = (np.sin(av[:nv]) * bv[:nv] + cv[:nv]).sum() + (av[:mv] ** 2 * cv[:mv]).sum()
        assert abs(loss[None] - want) < 1e-4 * max(1.0, abs(want)), (nv, mv)
        a.grad.fill(0)
        b.grad.fill(0)
        loss.grad[None] = 1.0
        gated.grad(a, b, c, m)
        ga = np.where(np.arange(16) < nv, np.cos(av) * bv, 0) + \
            np.where(np.arange(16) < mv, 2 * av * cv, 0)
        np.testing.assert_allclose(a.grad.to_numpy(), ga, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b.grad.to_numpy(), np.where(np.arange(16) < nv, np.sin(av), 0),
                                   rtol=1e-5, atol=1e-6)
    if arch in ("vulkan", "metal"):
        prog = gated.compile((a, b, c, m)).program
        assert [r[0] for r in prog.ranges if r is not None] == ["device", "device"]


@test_archs(archs=exactly("interp") | EVERY_ARCH, default_fp=sd.f64)
def test_grad_with_range_from_a_field_sizes_stacks_for_the_launched_range(arch):
    n = sd.field(sd.i32, shape=())
    x = sd.field(sd.f64, shape=12, needs_grad=True)
    y = sd.field(sd.f64, shape=12, needs_grad=True)

    @sd.kernel
    def k():
        for i in range(n[None]):
            v = x[i]
            for j in range(i):                       # stack size: the largest launched i
                v = sd.sin(v) * 1.1 + 0.1
            y[i] = v

    def ref(xs, nv):
        out = np.zeros_like(xs)
        for i in range(nv):
            v = xs[i]
            for j in range(i):
                v = np.sin(v) * 1.1 + 0.1
            out[i] = v
        return out

    xs = np.linspace(0.1, 0.9, 12)
    x.from_numpy(xs)
    for nv in (4, 11, 7):                            # a larger range needs larger stacks
        n[None] = nv
        x.grad.fill(0)
        y.fill(0)
        k()
        np.testing.assert_allclose(y.to_numpy(), ref(xs, nv), rtol=1e-12)
        w = np.random.default_rng(nv).uniform(0.5, 1.5, 12)
        y.grad.from_numpy(w)
        k.grad()
        want = central_diff(lambda v: ref(v, nv), xs, w)
        np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-6, atol=1e-9)


@test_archs(archs=EVERY_ARCH)
def test_forward_mode_with_range_from_a_field(arch):
    n = sd.field(sd.i32, shape=())
    x = sd.field(sd.f32, shape=8, needs_dual=True)
    y = sd.field(sd.f32, shape=8, needs_dual=True)
    x.from_numpy(np.arange(8, dtype=np.float32) * 0.1)
    n[None] = 6

    @sd.kernel
    def k():
        for i in range(n[None]):
            y[i] = x[i] * x[i]

    with sd.ad.FwdMode(loss=y, param=x, seed=[1.0] * 8):
        k()
    want = np.where(np.arange(8) < 6, 2 * np.arange(8) * 0.1, 0)
    np.testing.assert_allclose(y.dual.to_numpy(), want, rtol=1e-6)


@test_archs(archs=EVERY_ARCH)
def test_range_errors(arch):
    n = sd.field(sd.i32, shape=())
    ab = sd.field(sd.i32, shape=2)
    x = sd.field(sd.f32, shape=8, needs_grad=True)
    y = sd.field(sd.f32, shape=8, needs_grad=True)

    @sd.kernel
    def writes_own_bound():
        for i in range(n[None]):
            n[None] = 0

    @sd.kernel
    def overwritten_later():
        for i in range(n[None]):
            y[i] = x[i] * 2.0
        n[None] = 3

    @sd.kernel
    def index_out_of_range(k: sd.i32):
        for i in range(ab[k]):
            y[i] = 1.0

    with pytest.raises(sd.SpiradSyntaxError, match="which its range reads"):
        writes_own_bound()
    n[None] = 4
    overwritten_later()                              # the forward kernel is fine ...
    with pytest.raises(sd.SpiradAutodiffError, match="overwrites after the loop"):
        overwritten_later.grad()                     # ... its adjoint would read n == 3
    with pytest.raises(sd.SpiradValueError, match="outside its shape"):
        index_out_of_range(5)                        # debug mode: checked
        sd.sync()
