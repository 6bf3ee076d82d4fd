"""`@sd.data_oriented` classes (kernels, funcs and plain methods as methods; `self` a template
argument), plus small Taichi conveniences: `Matrix.rows/cols`, `x[i] = [a, b]`, `sd.atan`,
`sd.floor(x, dtype)`, `sd.types.f32`."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import exactly, test_archs


@sd.data_oriented
class Spring:
    def __init__(self, n):
        self.n = n
        self.x = sd.field(sd.f32, shape=n, needs_grad=True)
        self.e = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.func
    def stretch(self, i):
        return self.x[i + 1] - self.x[i]

    def weight(self, i):
        return 1.0 + 0.5 * i

    @sd.kernel
    def energy(self, k: sd.f32):
        for i in range(self.n - 1):
            d = self.stretch(i)
            self.e[None] += 0.5 * k * self.weight(i) * d * d


@test_archs()
def test_data_oriented_forward_and_grad(arch):
    s = Spring(6)
    xs = np.array([0.0, 0.3, 1.1, 1.4, 2.6, 3.0], np.float32)
    s.x.from_numpy(xs)
    with sd.ad.Tape(loss=s.e):
        s.energy(2.0)
    d, w = np.diff(xs.astype(np.float64)), 1.0 + 0.5 * np.arange(5)
    np.testing.assert_allclose(s.e[None], np.sum(w * d * d), rtol=1e-6)
    g = np.zeros(6)
    g[1:] += 2 * w * d
    g[:-1] -= 2 * w * d
    np.testing.assert_allclose(s.x.grad.to_numpy(), g, rtol=1e-5, atol=1e-6)
    s.e.grad[None] = 1.0
    s.x.grad.fill(0)
    s.energy.grad(2.0)  # a bound kernel's grad
    np.testing.assert_allclose(s.x.grad.to_numpy(), g, rtol=1e-5, atol=1e-6)


@test_archs()
def test_small_conveniences(arch):
    v = sd.Vector.field(2, sd.f32, shape=(2, 3))
    out = sd.field(sd.f32, shape=4)
    iout = sd.field(sd.i32, shape=())

    @sd.kernel
    def k():
        for i, j in v:
            v[i, j] = [i, j * 2]
        m = sd.Matrix.rows([sd.Vector([1.0, 2.0]), sd.Vector([3.0, 4.0])])
        c = sd.Matrix.cols([sd.Vector([1.0, 2.0]), sd.Vector([3.0, 4.0])])
        out[0] = m[1, 0]
        out[1] = c[1, 0]
        out[2] = sd.atan(1.0 * out[0])
        out[3] = sd.cast(2.75, sd.types.f32)
        iout[None] = sd.floor(out[3], int)

    k()
    ii, jj = np.meshgrid(np.arange(2), np.arange(3), indexing="ij")
    np.testing.assert_array_equal(v.to_numpy(), np.stack([ii, 2 * jj], axis=-1))
    np.testing.assert_allclose(out.to_numpy(), [3.0, 2.0, np.arctan(3.0), 2.75], rtol=1e-6)
    assert iout[None] == 2
    np.testing.assert_array_equal(sd.Matrix.cols([[1, 2], [3, 4]]).to_numpy(), [[1, 3], [2, 4]])


@test_archs()
def test_vector_and_matrix_kernel_arguments(arch):
    import spirad.math as tm
    a = sd.ndarray(sd.f32, shape=4, needs_grad=True)
    out = sd.Vector.field(3, sd.f32, shape=4)

    @sd.kernel
    def k(v: tm.vec3, m: sd.types.matrix(2, 2, float), arr: sd.types.ndarray(), s: sd.f32) -> sd.f32:
        for i in arr:
            out[i] = v * arr[i] + tm.vec3(m[0, 1], m[1, 0], s)
            arr.grad[i] = (m @ tm.vec2(1.0, 2.0))[1]
        return v.sum() + m.determinant()

    a.from_numpy(np.arange(4, dtype=np.float32))
    r = k(tm.vec3(1, 2, 3), [[1.0, 2.0], [3.0, 4.0]], a, 0.5)
    assert abs(r - (6.0 - 2.0)) < 1e-6
    want = np.arange(4)[:, None] * [1, 2, 3] + [2.0, 3.0, 0.5]
    np.testing.assert_allclose(out.to_numpy(), want)
    np.testing.assert_allclose(a.grad.to_numpy(), np.full(4, 11.0))
    r = k(np.array([0.0, 0.0, 1.0]), sd.Matrix([[2.0, 0.0], [0.0, 2.0]]), a, 0.0)  # same program
    assert abs(r - 5.0) < 1e-6
    with pytest.raises(sd.SpiradTypeError, match="shape"):
        k(tm.vec2(1, 2), [[1.0, 2.0], [3.0, 4.0]], a, 0.5)


@test_archs(archs=exactly("cpu"))
def test_torch_interop_and_real_func(arch):
    torch = pytest.importorskip("torch")
    x = sd.field(sd.f32, shape=3)
    x.from_torch(torch.tensor([1.0, 2.0, 3.0]))

    @sd.real_func
    def twice(v: sd.f32) -> sd.f32:  # a real_func is typed, as in Taichi (test_real_func.py)
        return v * 2.0

    @sd.kernel
    def k():
        for i in x:
            x[i] = twice(x[i])

    k()
    assert torch.equal(x.to_torch(), torch.tensor([2.0, 4.0, 6.0]))
    a = sd.ndarray(sd.f32, shape=2)
    a.from_torch(torch.ones(2))
    assert a.to_torch().sum().item() == 2.0


@test_archs()
def test_data_oriented_objects_are_freed(arch):
    """The programs compiled for a data_oriented object (`self` is a template argument, cached
    by identity) hold it weakly and are dropped with it: a program that makes a new object per
    step keeps only the last one alive (Taichi's test_oop_memory_leak), and grads still run."""
    import gc
    import weakref

    @sd.data_oriented
    class Step:
        def __init__(self, k):
            self.k = k
            self.x = sd.field(sd.f32, shape=3, needs_grad=True)
            self.y = sd.field(sd.f32, shape=(), needs_grad=True)

        @sd.kernel
        def run(self):
            for i in self.x:
                self.y[None] += self.k * self.x[i] ** 2

    refs = []
    for k in range(4):
        s = Step(float(k))
        s.x.from_numpy(np.array([1, 2, 3], np.float32))
        with sd.ad.Tape(loss=s.y):
            s.run()
        assert s.y[None] == 14.0 * k
        np.testing.assert_allclose(s.x.grad.to_numpy(), [2 * k, 4 * k, 6 * k])
        refs.append(weakref.ref(s))
        del s
        gc.collect()
    assert [r() is None for r in refs] == [True, True, True, False]  # the last launch's object
    assert len(Step.run._cache) == 1 and all(k[0] in Step.run._cache for k in Step.run._derived)
