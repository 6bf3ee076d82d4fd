"""Taichi's compute graphs (`sd.graph.GraphBuilder`, spirad/graph/builder.py) on every arch: a
graph runs its launches in order with the named values, fixed values stay fixed, sequentials
append in order, and Taichi's dispatch-time and run-time checks name the argument."""
import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradNotSupportedError, SpiradRuntimeError, SpiradTypeError
from tests.support.archs import test_archs

G = sd.graph


def kernels():
    @sd.kernel
    def fill(a: sd.types.ndarray(dtype=sd.f32, ndim=1), v: sd.f32):
        for i in a:
            a[i] = v

    @sd.kernel
    def axpy(a: sd.types.ndarray(ndim=1), b: sd.types.ndarray(ndim=1), s: sd.f32):
        for i in a:
            b[i] = b[i] * 2 + s * a[i]

    @sd.kernel
    def mat_sum(m: sd.types.matrix(2, 2, sd.i32), out: sd.types.ndarray(dtype=sd.i32, ndim=0)):
        out[None] = m.sum() + m[1, 0]

    return fill, axpy, mat_sum


@test_archs()
def test_a_graph_runs_its_launches_in_order(arch):
    fill, axpy, _ = kernels()
    a, b = G.Arg(G.ArgKind.NDARRAY, "a", sd.f32, ndim=1), G.Arg(G.ArgKind.NDARRAY, "b", sd.f32, 1)
    s = G.Arg(G.ArgKind.SCALAR, "s", sd.f32)
    gb = G.GraphBuilder()
    gb.dispatch(fill, a, 1.5)                 # a fixed value
    seq = gb.create_sequential()
    seq.dispatch(axpy, a, b, s)
    seq.dispatch(axpy, a, b, s)
    gb.append(seq)
    graph = gb.compile()
    x, y = sd.ndarray(sd.f32, 5), sd.ndarray(sd.f32, 5)
    y.from_numpy(np.arange(5, dtype=np.float32))
    for step in range(2):
        graph.run({"a": x, "b": y, "s": 0.5 + step})
    # per run: y = 4 y + 3 s * 1.5 (two axpy launches after the fill)
    want = np.arange(5, dtype=np.float64)
    for step in range(2):
        want = 4 * want + 3 * (0.5 + step) * 1.5
    np.testing.assert_allclose(y.to_numpy(), want, rtol=1e-6)
    np.testing.assert_array_equal(x.to_numpy(), 1.5)


@test_archs()
def test_matrix_arguments_take_flat_or_shaped_values(arch):
    _, _, mat_sum = kernels()
    m = G.Arg(G.ArgKind.MATRIX, "m", sd.types.matrix(2, 2, sd.i32))
    out = G.Arg(G.ArgKind.NDARRAY, "out", sd.i32, ndim=0)
    gb = G.GraphBuilder()
    gb.dispatch(mat_sum, m, out)
    graph = gb.compile()
    r = sd.ndarray(sd.i32, ())
    graph.run({"m": sd.Matrix([1, 2, 3, 4], sd.i32), "out": r})     # flat, as Taichi flattens
    assert r.to_numpy() == 10 + 3
    graph.run({"m": sd.Matrix([[5, 6], [7, 8]], sd.i32), "out": r})
    assert r.to_numpy() == 26 + 7


def test_dispatch_checks_name_the_argument():
    sd.init(arch=sd.cpu)
    fill, axpy, _ = kernels()
    gb = G.GraphBuilder()
    with pytest.raises(SpiradTypeError, match="ndim 2 doesn't match kernel's annotated ndim 1"):
        gb.dispatch(fill, G.Arg(G.ArgKind.NDARRAY, "a", sd.f32, ndim=2), 1.0)
    with pytest.raises(SpiradTypeError, match="dtype i32 doesn't match kernel's annotated dtype"):
        gb.dispatch(fill, G.Arg(G.ArgKind.NDARRAY, "a", sd.i32, ndim=1), 1.0)
    with pytest.raises(SpiradTypeError, match="'v'.*doesn't match kernel's annotated dtype"):
        gb.dispatch(fill, G.Arg(G.ArgKind.NDARRAY, "a", sd.f32, ndim=1),
                    G.Arg(G.ArgKind.SCALAR, "v", sd.i32))
    gb.dispatch(fill, G.Arg(G.ArgKind.NDARRAY, "a", sd.f32, ndim=1), 1.0)
    with pytest.raises(SpiradRuntimeError, match="used for two different arguments"):
        gb.dispatch(fill, G.Arg(G.ArgKind.NDARRAY, "q", sd.f32, ndim=1),
                    G.Arg(G.ArgKind.SCALAR, "a", sd.f32))
    with pytest.raises(SpiradRuntimeError, match="Invalid argument: ndim"):
        G.Arg(G.ArgKind.SCALAR, "x", sd.f32, ndim=1)
    with pytest.raises(SpiradTypeError, match="the kernel takes an ndarray, the argument is "
                                              "TEXTURE"):  # textures: tests/language/test_textures.py
        gb.dispatch(fill, G.Arg(G.ArgKind.TEXTURE, "t", ndim=2), 1.0)


def test_run_checks_the_values():
    sd.init(arch=sd.cpu)
    fill, _, _ = kernels()
    gb = G.GraphBuilder()
    gb.dispatch(fill, G.Arg(G.ArgKind.NDARRAY, "a", sd.f32, ndim=1),
                G.Arg(G.ArgKind.SCALAR, "v", sd.f32))
    graph = gb.compile()
    with pytest.raises(SpiradRuntimeError, match="compiled for argument a with ndim=1, but got "
                                                 "an ndarray with ndim=2"):
        graph.run({"a": sd.ndarray(sd.f32, (2, 2)), "v": 1.0})
    with pytest.raises(SpiradRuntimeError, match="but got an ndarray with dtype=i32"):
        graph.run({"a": sd.ndarray(sd.i32, 2), "v": 1.0})
    with pytest.raises(SpiradRuntimeError, match="no value for the graph arguments"):
        graph.run({"a": sd.ndarray(sd.f32, 2)})
    with pytest.raises(SpiradRuntimeError, match="Only python int, float"):
        graph.run({"a": np.zeros(2, np.float32), "v": 1.0})


def test_in_kernel_do_while_is_refused_at_its_line():
    """Quadrants' `sd.graph.do_while` reaches the frontend through `frontend/namespace_hooks.py`
    (the frontend does not import `sd.graph`): a compile error at the call, the host loop as fix."""
    sd.init(arch=sd.cpu)
    flag = sd.ndarray(sd.i32, ())

    @sd.kernel
    def k(f: sd.types.ndarray()):
        while sd.graph.do_while(f[None]):
            f[None] = 0

    with pytest.raises(SpiradNotSupportedError) as e:
        k(flag)
    text = str(e.value)
    assert "sd.graph.do_while is not supported yet: loop on the host" in text
    assert "while sd.graph.do_while(f[None]):" in text and "^" in text
