"""numpy arrays and torch tensors as `types.ndarray()` arguments; DLPack both ways.

Forward results are checked against numpy; on the CPU the kernel must write the caller's memory
(zero-copy), on Vulkan the same results come through the copy in and out."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs


@sd.kernel
def saxpy(a: sd.f32, x: sd.types.ndarray(), y: sd.types.ndarray()):
    for i in x:
        y[i] = a * x[i] + y[i]


@sd.kernel
def fill_rows(m: sd.types.ndarray(dtype=sd.f64, ndim=2)):
    for i, j in m:
        m[i, j] = i * 10.0 + j


@test_archs()
def test_numpy_in_and_out(arch):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(37).astype(np.float32), rng.standard_normal(37).astype(np.float32)
    want = 1.5 * x + y
    saxpy(1.5, x, y)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    x0 = x.copy()
    x *= 2.0          # changed in place between launches: the kernel sees the new values
    saxpy(1.0, x, y)
    np.testing.assert_allclose(y, want + 2.0 * x0, rtol=1e-6, atol=1e-5)


@test_archs()
def test_numpy_2d_with_dtype_and_ndim(arch):
    m = np.zeros((3, 4))
    fill_rows(m)
    np.testing.assert_array_equal(m, np.add.outer(10.0 * np.arange(3), np.arange(4)))


@test_archs(archs=exactly("cpu"))
def test_cpu_is_zero_copy(arch):
    x, y = np.ones(5, np.float32), np.zeros(5, np.float32)
    saxpy(2.0, x, y)
    entry = saxpy._arrays.entries[2]
    assert np.shares_memory(entry.nd._storage(), y)  # the kernel wrote the caller's memory
    view = y[1:3]  # a view taken before the next launch sees its writes
    saxpy(1.0, x, y)
    np.testing.assert_array_equal(view, [3.0, 3.0])


@test_archs()
def test_same_array_reuses_the_plan_and_new_array_does_not(arch):
    x, y = np.ones(4, np.float32), np.zeros(4, np.float32)
    saxpy(1.0, x, y)
    plan = saxpy._plans[0]
    saxpy(1.0, x, y)
    assert saxpy._plans[0] is plan
    gen = saxpy._arrays.entries[1].nd.generation
    saxpy(1.0, x, y)
    assert saxpy._arrays.entries[1].nd.generation > gen  # each launch counts as a host write
    y2 = np.zeros(6, np.float32)
    saxpy(1.0, np.ones(6, np.float32), y2)
    np.testing.assert_array_equal(y2, np.ones(6))
    np.testing.assert_array_equal(y, np.full(4, 3.0))


@test_archs()
def test_vector_elements_from_annotation(arch):
    @sd.kernel
    def norms(p: sd.types.ndarray(dtype=sd.types.vector(3, sd.f32), ndim=1),
              out: sd.types.ndarray()):
        for i in p:
            out[i] = p[i].norm()
            p[i] = p[i] * 2.0

    data = np.random.default_rng(1).standard_normal((6, 3)).astype(np.float32)
    p, out = data.copy(), np.zeros(6, np.float32)
    norms(p, out)
    np.testing.assert_allclose(out, np.linalg.norm(data, axis=1), rtol=1e-6)
    np.testing.assert_allclose(p, data * 2, rtol=1e-6)


@test_archs()
def test_mixed_with_sd_ndarray_and_grad_treats_numpy_as_constant(arch):
    @sd.kernel
    def weighted(w: sd.types.ndarray(), x: sd.types.ndarray(), out: sd.types.ndarray()):
        for i in x:
            out[0] += w[i] * x[i] * x[i]

    w = np.array([1.0, 2.0, 3.0], np.float32)
    x = sd.ndarray(sd.f32, 3, needs_grad=True)
    x.from_numpy(np.array([0.5, -1.0, 2.0], np.float32))
    out = sd.ndarray(sd.f32, 1, needs_grad=True)
    weighted(w, x, out)
    np.testing.assert_allclose(out.to_numpy(), [(w * x.to_numpy() ** 2).sum()], rtol=1e-6)
    out.grad.fill(1.0)
    weighted.grad(w, x, out)
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * w * x.to_numpy(), rtol=1e-6)


@pytest.mark.parametrize("bad, msg", [
    (np.zeros(4, np.int16), "dtype int16"),
    (np.zeros(8, bool)[::2], "must be C-contiguous"),  # bool arrays: copied as u1 (Quadrants)
    (np.zeros(8, np.float32)[::2], "not C-contiguous"),
    ([1.0, 2.0], "got list"),
], ids=["int16", "bool-strided", "strided", "list"])
@test_archs(archs=exactly("cpu"))
def test_clear_errors(arch, bad, msg):
    with pytest.raises(sd.SpiradTypeError, match=msg.replace("(", r"\(").replace(")", r"\)")) as e:
        saxpy(1.0, bad, np.zeros(4, np.float32))
    assert "^" in str(e.value) and "x: sd.types.ndarray()" in str(e.value)  # caret on the param


@test_archs(archs=exactly("cpu"))
def test_errors_from_the_annotation(arch):
    with pytest.raises(sd.SpiradTypeError, match="must have dtype float64"):
        fill_rows(np.zeros((2, 2), np.float32))
    with pytest.raises(sd.SpiradTypeError, match="must have 2 dimension"):
        fill_rows(np.zeros(3))
    ro = np.zeros((2, 2))
    ro.flags.writeable = False
    with pytest.raises(sd.SpiradTypeError, match="read-only"):
        fill_rows(ro)


@test_archs()
def test_torch_tensors(arch):
    torch = pytest.importorskip("torch")
    x = torch.arange(6, dtype=torch.float32)
    y = torch.ones(6, dtype=torch.float32, requires_grad=True)  # read through detach()
    # a leaf that requires grad is not written in place while grad mode is on, as in torch
    with pytest.raises(sd.SpiradValueError, match="argument 'y' of saxpy is a torch leaf tensor "
                                                  "that requires grad, and the kernel writes it"):
        saxpy(2.0, x, y)
    np.testing.assert_array_equal(y.detach().numpy(), np.ones(6))  # untouched
    saxpy(2.0, y, x.clone())  # read only: fine
    with torch.no_grad():  # as an optimizer updates its parameters
        saxpy(2.0, x, y)
    np.testing.assert_array_equal(y.detach().numpy(), 2 * np.arange(6) + 1)
    y.data = torch.zeros(3)  # re-pointed in place: a new alias, not the stale one
    with torch.no_grad():
        saxpy(1.0, x[:3].contiguous(), y)
    np.testing.assert_array_equal(y.detach().numpy(), np.arange(3))
    z = torch.ones(6, requires_grad=True) * 1  # not a leaf: written as torch would allow
    saxpy(1.0, x, z)
    with pytest.raises(sd.SpiradTypeError, match="not C-contiguous"):
        saxpy(1.0, torch.zeros(4, 2)[:, 0], torch.zeros(4))


@test_archs()
def test_dlpack_out_of_sd_ndarray(arch):
    a = sd.ndarray(sd.f32, 4)
    saxpy(1.0, np.arange(4, dtype=np.float32), a)
    gpu = {"cuda": (2, 0), "amdgpu": (10, 0)}.get(arch)  # kDLCUDA / kDLROCM: tests/interop/
    assert a.__dlpack_device__() == (gpu or (1, 0))        # test_gpu_arrays.py
    if gpu is not None:  # device memory: numpy refuses it, a host copy on request
        with pytest.raises(RuntimeError, match="device"):
            np.from_dlpack(a)
        np.testing.assert_array_equal(np.from_dlpack(a, device="cpu"), np.arange(4))
        with pytest.raises(BufferError, match="copy"):
            a.__dlpack__(dl_device=(1, 0), copy=False)
        return
    v = np.from_dlpack(a)
    np.testing.assert_array_equal(v, np.arange(4))
    if arch == "cpu":  # zero-copy: later kernel writes show through the view
        saxpy(1.0, np.ones(4, np.float32), a)
        np.testing.assert_array_equal(v, np.arange(4) + 1)
    else:             # GPU memory: a host copy, and copy=False is refused
        with pytest.raises(BufferError, match="copy"):
            a.__dlpack__(copy=False)


@test_archs()
def test_dlpack_into_sd_ndarray(arch):
    src = np.arange(12, dtype=np.float64).reshape(3, 4)
    a = sd.from_dlpack(src)
    assert a.shape == (3, 4) and a.dtype == sd.f64
    np.testing.assert_array_equal(a.to_numpy(), src)
    fill_rows(a)
    want = np.add.outer(10.0 * np.arange(3), np.arange(4))
    np.testing.assert_array_equal(a.to_numpy(), want)
    if arch == "cpu":
        np.testing.assert_array_equal(src, want)  # shared memory
    v = sd.from_dlpack(np.zeros((2, 3), np.float32), dtype=sd.types.vector(3, sd.f32))
    assert v.shape == (2,) and v.comp_shape == (3,)


@test_archs(archs=exactly("cpu"))
def test_dlpack_with_torch(arch):
    torch = pytest.importorskip("torch")
    t = torch.arange(5, dtype=torch.int32)
    a = sd.from_dlpack(t)
    assert a.dtype == sd.i32 and a.shape == (5,)
    a[2] = 40
    assert int(t[2]) == 40  # the tensor's memory
    back = torch.from_dlpack(a)
    a[0] = 7
    assert back.tolist() == [7, 1, 40, 3, 4]
