"""ndarray alias classes decided at launch (`Kernel._alias_partition`, spirad/data/storage_spans):
a launch runs a program in which the ndarray buffers that share memory form one alias class and
every other ndarray argument is a class of its own (passes/independent_loops rule 5), so a
serialised loop that writes one ndarray at the env index and reads another of the same type at
other indices is made parallel where the two are distinct; where they are one array (passed
twice, or a gradient beside its array) the loop stays serial. Each test checks the
task kinds (which program ran) and the results against numpy or the pass-off program."""
import dataclasses

import numpy as np
import pytest

import spirad as sd
from spirad.backends import work_estimate
from spirad.runtime.shape_policy import shape_agnostic
from tests.support.archs import test_archs

B = 256
C = 0.99


@pytest.fixture
def split_always(monkeypatch):
    """Every qualifying loop is made parallel and every launch split over the workers."""
    monkeypatch.setattr(work_estimate, "SPLIT_WORK", 0)
    monkeypatch.setattr(work_estimate, "SPLIT_SECONDS", 0.0)


def _init(monkeypatch, independent: bool = True):
    monkeypatch.setenv("SPIRAD_INDEPENDENT_LOOPS", "1" if independent else "0")
    sd.init(arch=sd.cpu, offline_cache=False, cpu_max_num_threads=4)


def _kinds(kernel) -> list:
    return [t.kind for t in kernel._plans[0].compiled.backend_tl.tasks]


def _shift_kernel():
    @sd.kernel
    def k(p: sd.types.ndarray(), q: sd.types.ndarray()):
        sd.loop_config(serialize=True)
        for b in range(1, B + 1):
            p[b] = q[b - 1] * C
    return k


def _x0():
    return np.linspace(0.5, 1.5, B + 1).astype(np.float32)


def _distinct_want(x0):
    return np.concatenate([x0[:1], x0[:-1] * np.float32(C)])


def _aliased_want(x0):
    """p[b] = p[b - 1] * C in order: the serial program on one array."""
    w = x0.copy()
    for b in range(1, B + 1):
        w[b] = w[b - 1] * np.float32(C)
    return w


def _nd(x0, needs_grad=False):
    a = sd.ndarray(sd.f32, (B + 1,), needs_grad=needs_grad)
    a.from_numpy(x0)
    return a


def test_disjoint_ndarrays_get_the_specialised_program(monkeypatch, split_always):
    """Two distinct arrays: each its own class, the loop parallel (serial without the
    launch's partition: one f32 rank-1 class), the shifted copy right."""
    _init(monkeypatch)
    k = _shift_kernel()
    x0 = _x0()
    p, q = _nd(x0), _nd(x0)
    for _ in range(3):  # the third runs the backend's record of the launch
        k(p, q)
    assert _kinds(k) == ["range"]
    assert p.to_numpy().tobytes() == _distinct_want(x0).tobytes()


@pytest.mark.parametrize("order", ["distinct first", "aliased first"])
def test_one_array_twice_runs_the_generic_program(monkeypatch, split_always, order):
    """One kernel launched with two arrays and with one array twice, in both orders: each
    launch runs its own program (two in the cache), each gives the serial answer."""
    _init(monkeypatch)
    k = _shift_kernel()
    x0 = _x0()
    seq = (False, True) if order == "distinct first" else (True, False)
    for aliased in seq + seq:
        p = _nd(x0)
        if aliased:
            k(p, p)
            assert _kinds(k) == ["serial"]
            assert p.to_numpy().tobytes() == _aliased_want(x0).tobytes()
        else:
            q = _nd(x0)
            k(p, q)
            assert _kinds(k) == ["range"]
            assert p.to_numpy().tobytes() == _distinct_want(x0).tobytes()
    assert len(k._cache) == 2


def test_a_group_leaves_the_other_arrays_their_own_classes(monkeypatch, split_always):
    """Genesis' case: one array passed for two read parameters (a dataclass member passed
    inside its dataclass and beside it), the written one distinct: the group is one class,
    the written array its own, so the loop is parallel. A later launch with another
    overlap (the written array among them) runs the generic program: serial."""
    _init(monkeypatch)

    @sd.kernel
    def k(p: sd.types.ndarray(), q: sd.types.ndarray(), r: sd.types.ndarray()):
        sd.loop_config(serialize=True)
        for b in range(1, B + 1):
            p[b] = q[b - 1] * C + r[b - 1]
    x0 = _x0()
    c = np.float32(C)
    p, a = _nd(x0), _nd(x0)
    k(p, a, a)
    assert _kinds(k) == ["range"]
    want = x0.copy()
    want[1:] = x0[:-1] * c + x0[:-1]
    np.testing.assert_allclose(p.to_numpy(), want, rtol=1e-6)
    a, r = _nd(x0), _nd(x0)
    k(a, a, r)
    assert _kinds(k) == ["serial"]
    want = x0.copy()
    for b in range(1, B + 1):
        want[b] = want[b - 1] * c + x0[b - 1]
    np.testing.assert_allclose(a.to_numpy(), want, rtol=1e-5)
    assert len(k._cache) == 2


def test_one_user_array_twice(monkeypatch, split_always):
    """A numpy array passed to both parameters (zero-copy on the CPU; two different views of
    one buffer are refused at launch, `interop.arrays`): one storage, so the loop stays serial
    and reads what the earlier iterations wrote."""
    _init(monkeypatch)
    k = _shift_kernel()
    x0 = _x0()
    buf = x0.copy()
    k(buf, buf)
    assert _kinds(k) == ["serial"]
    assert buf.tobytes() == _aliased_want(x0).tobytes()
    other = x0.copy()
    buf = x0.copy()
    k(buf, other)
    assert _kinds(k) == ["range"]
    assert buf.tobytes() == _distinct_want(x0).tobytes()


def test_a_gradient_beside_its_array(monkeypatch, split_always):
    """A kernel reading `x.grad` and writing an argument that is `x.grad` itself: one class
    (the generic partition merges gradients with arrays of their type), so the loop is serial
    and runs the recurrence."""
    _init(monkeypatch)

    @sd.kernel
    def k(x: sd.types.ndarray(), g: sd.types.ndarray()):
        sd.loop_config(serialize=True)
        for b in range(1, B + 1):
            g[b] = x.grad[b - 1] * C
    x0 = _x0()
    x = _nd(np.zeros(B + 1, np.float32), needs_grad=True)
    x.grad.from_numpy(x0)
    k(x, x.grad)
    assert _kinds(k) == ["serial"]
    assert x.grad.to_numpy().tobytes() == _aliased_want(x0).tobytes()


def test_dataclass_members_count(monkeypatch, split_always):
    """ndarrays inside a dataclass argument are launch arguments too: distinct members get
    the specialised program, one array as both members the generic one."""
    @dataclasses.dataclass(frozen=True)
    class S:
        p: sd.Tensor
        q: sd.Tensor

    _init(monkeypatch)

    @sd.kernel
    def k(s: S):
        sd.loop_config(serialize=True)
        for b in range(1, B + 1):
            s.p[b] = s.q[b - 1] * C
    x0 = _x0()
    p, q = _nd(x0), _nd(x0)
    k(S(p, q))
    assert _kinds(k) == ["range"]
    assert p.to_numpy().tobytes() == _distinct_want(x0).tobytes()
    a = _nd(x0)
    k(S(a, a))
    assert _kinds(k) == ["serial"]
    assert a.to_numpy().tobytes() == _aliased_want(x0).tobytes()


def test_shape_agnostic_keeps_the_generic_partition(monkeypatch, split_always):
    """Programs compiled inside `shape_agnostic()` (the GPU sizer, the device bundle) assume
    nothing of their ndarrays: distinct arrays there run the serial loop."""
    _init(monkeypatch)
    k = _shift_kernel()
    x0 = _x0()
    p, q = _nd(x0), _nd(x0)
    with shape_agnostic():
        k(p, q)
    assert _kinds(k) == ["serial"]
    assert p.to_numpy().tobytes() == _distinct_want(x0).tobytes()


@pytest.mark.parametrize("aliased", [False, True], ids=["distinct", "one array twice"])
def test_gradient_same_as_the_pass_off_program(monkeypatch, split_always, aliased):
    """Forward and reverse mode with the same ndarray passed twice (and with two): the values
    and gradients equal those of the program with the pass off, bit for bit, and numpy's."""
    x0 = _x0()
    res = {}
    for on in (True, False):
        _init(monkeypatch, on)
        k = _shift_kernel()
        p = _nd(x0, needs_grad=True)
        q = p if aliased else _nd(x0, needs_grad=True)
        k(p, q)
        kinds = _kinds(k)
        p.grad.fill(1.0)
        if not aliased:
            q.grad.fill(0.0)
        k.grad(p, q)
        res[on] = (kinds, p.to_numpy(), p.grad.to_numpy(), q.grad.to_numpy())
    assert res[True][0] == (["serial"] if aliased else ["range"])
    assert res[False][0] == ["serial"]
    for a, b in zip(res[True][1:], res[False][1:]):
        assert a.tobytes() == b.tobytes()
    fwd = _aliased_want(x0) if aliased else _distinct_want(x0)
    np.testing.assert_array_equal(res[True][1], fwd)
    if aliased:  # the adjoint of the serial loop, last iteration first: the store's
        g = np.ones(B + 1, np.float32)  # adjoint takes g[b] (zeroing it), then g[b-1] += C g[b]
        for b in range(B, 0, -1):
            t, g[b] = g[b], 0.0
            g[b - 1] += np.float32(C) * t
        np.testing.assert_allclose(res[True][2], g, rtol=1e-5)
    else:
        want = np.zeros(B + 1, np.float32)
        want[:-1] = np.float32(C)
        np.testing.assert_allclose(res[True][3], want, rtol=1e-6)


@test_archs()
@pytest.mark.parametrize("aliased", [False, True], ids=["distinct", "one array twice"])
def test_results_on_every_arch(arch, aliased):
    """The same launches on every arch (only the CPU compiles a second program: elsewhere the
    pass does not run): the serial answers."""
    k = _shift_kernel()
    x0 = _x0()
    p = _nd(x0)
    if aliased:
        k(p, p)
        want = _aliased_want(x0)
    else:
        k(p, _nd(x0))
        want = _distinct_want(x0)
    np.testing.assert_allclose(p.to_numpy(), want, rtol=1e-6)
