"""Device-written adstack metadata feeds the launch (architecture §4 "Sizing": the GPU sizer kernel writes the
strides and each stack's offset and capacity into the task's metadata buffer).

On Vulkan a task sized by the GPU sizer binds the buffer `sizer_layout` wrote (no host upload of
metadata words), every result owns its buffer (a later sizing of another task, or of the same
task, never rewrites a buffer an earlier result handed out), an unchanged miss returns the same
result, and the gradients are right in every case."""
import numpy as np

import spirad as sd
import spirad.runtime.state as sd_state
from spirad.runtime import sizing_cache
from tests.support.archs import SPIRV_ARCHS, test_archs

N = 64


def _trips(xs, trips, a=0.9, b=0.1):
    """d out / d x of `trips` steps v <- sin(v) * a + b, in float64."""
    v, d = xs.astype(np.float64), np.ones(len(xs))
    for _ in range(trips):
        d = d * a * np.cos(v)
        v = np.sin(v) * a + b
    return d


def _two_stacks(xs, trips, eps=1e-6):
    """Central differences of the second task below: w <- sin(w) * 0.8 + u, u <- cos(u) * 0.5."""
    def f(x):
        w, u = x.copy(), 0.5 * x
        for _ in range(trips):
            w = np.sin(w) * 0.8 + u
            u = np.cos(u) * 0.5
        return w + u
    x = xs.astype(np.float64)
    return (f(x + eps) - f(x - eps)) / (2 * eps)


class _Bindings:
    """Records what the Vulkan runtime binds per dispatch and what the backend uploads through
    its small-buffer cache (argument bytes, host metadata words)."""

    def __init__(self, monkeypatch):
        be = sd_state.backend()
        self.dispatches, self.uploads = [], []
        rt_dispatch, small = be.rt.dispatch, be._small_buffer

        def dispatch(pipe, buffers, *a, **k):
            self.dispatches.append((pipe, list(buffers)))
            return rt_dispatch(pipe, buffers, *a, **k)

        def small_buffer(p, key, data, tail=b""):
            self.uploads.append(bytes(data))
            return small(p, key, data, tail)
        monkeypatch.setattr(be.rt, "dispatch", dispatch)
        monkeypatch.setattr(be, "_small_buffer", small_buffer)

    def bound_by(self, pipeline):
        return [bufs for pipe, bufs in self.dispatches if pipe is pipeline]


def _words(storage, n):
    return np.frombuffer(sd_state.backend().read(storage, 4 * n).tobytes(), np.uint32).tolist()


def _adstack_tasks(kernel):
    """[(task index, SizedTask, backend plan)] of the kernel's last adjoint launch."""
    ad = kernel._plans[1].adstack
    return [(ti, s, ad.tasks[ti]) for ti, s in enumerate(ad.sized) if s is not None]


def _one_stack_kernel(x, y, n):
    @sd.kernel
    def k():
        for i in x:
            v = x[i]
            for s in range(n[None]):
                v = sd.sin(v) * 0.9 + 0.1
            y[i] = v
    return k


def _two_task_kernel(x, y, z, n1, n2):
    @sd.kernel
    def k():
        for i in x:
            v = x[i]
            for s in range(n1[None]):
                v = sd.sin(v) * 0.9 + 0.1
            y[i] = v
        for i in x:
            w = x[i]
            u = x[i] * 0.5
            for s in range(n2[None]):
                w = sd.sin(w) * 0.8 + u
                u = sd.cos(u) * 0.5
            z[i] = w + u
    return k


def _grad(kernel, x, outs):
    x.grad.fill(0)
    for o in outs:
        o.grad.fill(1)
    kernel.grad()
    return x.grad.to_numpy()


def _fields(xs):
    x = sd.field(sd.f32, shape=N, needs_grad=True)
    y = sd.field(sd.f32, shape=N, needs_grad=True)
    z = sd.field(sd.f32, shape=N, needs_grad=True)
    x.from_numpy(xs)
    return x, y, z


@test_archs(archs=SPIRV_ARCHS)
def test_grad_launch_binds_the_device_written_metadata(arch, monkeypatch):
    xs = np.linspace(-1.2, 1.4, N).astype(np.float32)
    x, y, _ = _fields(xs)
    n = sd.field(sd.i32, shape=())
    n[None] = 3
    k = _one_stack_kernel(x, y, n)
    k()
    spy = _Bindings(monkeypatch)
    sizing_cache.stats.reset()
    got = _grad(k, x, [y])
    assert (sizing_cache.stats.gpu_dispatches, sizing_cache.stats.host_evaluations) == (1, 0)
    np.testing.assert_allclose(got, _trips(xs, 3), rtol=2e-5, atol=2e-6)
    ((ti, sized, plan),) = _adstack_tasks(k)
    meta = sized.device_meta
    assert meta is not None and plan.meta is meta and max(sized.caps) == 3 + 2
    words = sized.layout.metadata()
    assert _words(meta, len(words)) == words                  # written by sizer_layout
    program = k._plans[1].compiled.program
    bound = spy.bound_by(program.pipelines[ti])
    assert bound and all(any(b is meta for b in bufs) for bufs in bound)
    host_words = np.array(words, np.uint32).tobytes()
    assert host_words not in spy.uploads                      # nothing uploaded from the host


@test_archs(archs=SPIRV_ARCHS)
def test_every_result_owns_its_metadata_buffer(arch, monkeypatch):
    """Two tasks of one kernel, and a second kernel, sized one after the other: each launch binds
    its own result's words; a cache hit after other sizings still finds its words intact."""
    xs = np.linspace(-1.0, 1.3, N).astype(np.float32)
    x, y, z = _fields(xs)
    n, n1, n2 = (sd.field(sd.i32, shape=()) for _ in range(3))
    n[None], n1[None], n2[None] = 2, 4, 6
    one = _one_stack_kernel(x, y, n)
    two = _two_task_kernel(x, y, z, n1, n2)

    @sd.kernel
    def set_n2(v: sd.i32):
        n2[None] = v

    one()
    two()
    spy = _Bindings(monkeypatch)

    def check_two(trips2):
        got = _grad(two, x, [y, z])
        np.testing.assert_allclose(got, _trips(xs, 4) + _two_stacks(xs, trips2),
                                   rtol=5e-4, atol=5e-5)
        tasks = _adstack_tasks(two)
        assert len(tasks) == 2
        metas = [s.device_meta for _, s, _ in tasks]
        assert metas[0] is not metas[1] and None not in metas
        for (ti, s, plan), meta in zip(tasks, metas):
            assert plan.meta is meta and _words(meta, len(s.layout.metadata())) == s.layout.metadata()
        assert tasks[1][1].layout != tasks[0][1].layout       # really different layouts
        return max(tasks, key=lambda t: len(t[1].caps))[1]    # the task with w, u: sized by n2

    def check_one():
        np.testing.assert_allclose(_grad(one, x, [y]), _trips(xs, 2), rtol=2e-5, atol=2e-6)
        ((ti, s, plan),) = _adstack_tasks(one)
        assert _words(s.device_meta, len(s.layout.metadata())) == s.layout.metadata()
        return s

    first = check_one()
    assert max(check_two(6).caps) == 6 + 2
    sizing_cache.stats.reset()
    assert check_one() is first                               # a cache hit: the same result ...
    assert sizing_cache.stats.gpu_dispatches == 0             # ... and its words are intact
    set_n2(9)                                                 # a kernel write: task 1 re-sized
    sizing_cache.stats.reset()
    sized_n2 = check_two(9)
    assert sizing_cache.stats.gpu_dispatches == 1 and max(sized_n2.caps) == 9 + 2
    assert check_one() is first


@test_archs(archs=SPIRV_ARCHS, adstack_cache=False)
def test_an_unchanged_miss_returns_the_same_result(arch):
    """With the cache off every launch sizes again: while the sizes stay the same the result (and
    so its buffer and the launch's descriptor sets) stays the same; a change gives a new buffer
    and leaves the old result's words as they were."""
    xs = np.linspace(-1.1, 0.9, N).astype(np.float32)
    x, y, _ = _fields(xs)
    n = sd.field(sd.i32, shape=())
    n[None] = 3
    k = _one_stack_kernel(x, y, n)
    k()
    results = []
    for trips in (3, 3, 3, 5, 5):
        n[None] = trips
        sizing_cache.stats.reset()
        np.testing.assert_allclose(_grad(k, x, [y]), _trips(xs, trips), rtol=2e-5, atol=2e-6)
        assert sizing_cache.stats.gpu_dispatches == 1
        ((_, s, _),) = _adstack_tasks(k)
        results.append(s)
    assert results[0] is results[1] is results[2] and results[3] is results[4]
    old, new = results[0], results[3]
    assert new.device_meta is not old.device_meta and max(new.caps) == 5 + 2
    assert _words(old.device_meta, len(old.layout.metadata())) == old.layout.metadata()
    assert _words(new.device_meta, len(new.layout.metadata())) == new.layout.metadata()
