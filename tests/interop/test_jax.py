"""spirad kernels as JAX functions (`spirad.interop.jax.jax_kernel`): values and gradients under
`jax.jit` and `jax.grad` against the same computation written in jax.numpy (float64), on the CPU.

jax is part of the `test` extra: a missing jax fails here (no skip)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spirad as sd
from spirad.interop.jax import jax_kernel
from tests.support.archs import exactly, test_archs
from tests.support.interop_kernels import gather_loop, step


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-15)


@test_archs(require=("f64",), default_fp=sd.f64)
def test_jit_and_grad_match_jax_numpy(arch):
    f = jax_kernel(step, outputs={"y": "x"})

    def loss(x, v):
        return (f(jnp.tanh(x), v, 0.3) ** 2).sum()

    def reference(x, v):
        t = jnp.tanh(x)
        return ((t + 0.3 * jnp.sin(v) * t) ** 2).sum()

    x, v = jnp.linspace(-1.0, 1.0, 9), jnp.linspace(0.1, 1.7, 9)
    _close(f(x, v, 0.3), x + 0.3 * jnp.sin(v) * x)
    _close(jax.jit(loss)(x, v), reference(x, v))
    ref = jax.grad(reference, argnums=(0, 1))(x, v)
    for got in (jax.grad(loss, argnums=(0, 1))(x, v),
                jax.jit(jax.grad(loss, argnums=(0, 1)))(x, v)):
        _close(got[0], ref[0])
        _close(got[1], ref[1])


@test_archs(archs=exactly("cpu"), default_fp=sd.f64)
def test_dynamic_loop_int_input_two_outputs_one_unused(arch):
    f = jax_kernel(gather_loop, outputs={"out": lambda x, idx, n: idx.shape, "total": (1,)})
    idx = jnp.array([3, 0, 2, 2, 1], dtype=jnp.int32)

    def reference(x, n=3):
        s = (x * 2.0)[idx]
        for _ in range(n):
            s = jnp.sin(s) + 0.5 * s
        return s, (s * s).sum()

    def both(x):
        out, total = f(x * 2.0, idx, 3)
        return out.sum() + total[0]

    def only_total(x):          # `out` unused: its cotangent is a symbolic zero
        return f(x * 2.0, idx, 3)[1][0]

    x = jnp.linspace(-0.8, 0.9, 4)
    out, total = jax.jit(lambda x: f(x * 2.0, idx, 3))(x)
    r_out, r_total = reference(x)
    _close(out, r_out)
    _close(total[0], r_total)
    _close(jax.jit(jax.grad(both))(x), jax.grad(lambda x: sum(map(jnp.sum, reference(x))))(x))
    _close(jax.jit(jax.grad(only_total))(x), jax.grad(lambda x: reference(x)[1])(x))
    # jax.vjp with an explicit cotangent of `out`
    _, vjp = jax.vjp(lambda x: f(x, idx, 3)[0], x)
    _, vjp_ref = jax.vjp(lambda x: reference(x / 2.0)[0], x)
    ct = jnp.arange(1.0, 6.0)
    _close(vjp(ct)[0], vjp_ref(ct)[0])


@test_archs(archs=exactly("cpu"), default_fp=sd.f64)
def test_jax_kernel_refusals(arch):
    f = jax_kernel(step, outputs={"y": "x"})
    x = jnp.ones(3)
    with pytest.raises(sd.SpiradTypeError, match="no gradient for scalar parameter 'dt'"):
        jax.grad(lambda dt: f(x, x, dt).sum())(0.1)
    with pytest.raises(sd.SpiradTypeError, match="takes 3 argument"):
        f(x, x)
    with pytest.raises(sd.SpiradValueError, match="not a parameter"):
        jax_kernel(step, outputs={"z": "x"})

    @sd.kernel
    def takes_template(a: sd.template(), y: sd.types.ndarray()):
        for i in y:
            y[i] = 1.0

    with pytest.raises(sd.SpiradTypeError, match="cannot be a JAX argument"):
        jax_kernel(takes_template, outputs={"y": (3,)})

    @sd.kernel
    def takes_vectors(p: sd.types.ndarray(dtype=sd.types.vector(3, sd.f64), ndim=1),
                      y: sd.types.ndarray()):
        for i in p:
            y[i] = p[i][0]

    with pytest.raises(sd.SpiradTypeError, match="ndarrays of scalar elements"):
        jax_kernel(takes_vectors, outputs={"y": (3,)})


@test_archs(archs=exactly("cpu"))
def test_float32_without_x64(arch):
    @sd.kernel
    def scale(x: sd.types.ndarray(), w: sd.types.ndarray(), y: sd.types.ndarray()):
        for i in x:
            y[i] = sd.exp(w[i]) * x[i]

    f = jax_kernel(scale, outputs={"y": "x"})
    with jax.enable_x64(False):
        x, w = jnp.linspace(-1.0, 1.0, 6), jnp.linspace(0.0, 0.5, 6)
        assert x.dtype == jnp.float32
        loss = jax.jit(lambda x, w: (f(x, w) ** 2).sum())
        got = jax.grad(loss, argnums=(0, 1))(x, w)
        ref = jax.grad(lambda x, w: ((jnp.exp(w) * x) ** 2).sum(), argnums=(0, 1))(x, w)
        assert got[0].dtype == jnp.float32
        for g, r in zip(got, ref):
            np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-5, atol=1e-6)
