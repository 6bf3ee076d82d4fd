"""Scale: reverse mode over 2,000,000+ threads with per-thread dynamic trip counts, heap memory
bounded by the number of threads in flight (rows), not by the number of iterations."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, test_archs

N = 2_000_003


@test_archs(archs=EVERY_ARCH)
def test_two_million_threads(arch):
    x = sd.ndarray(sd.f32, N, needs_grad=True)
    y = sd.ndarray(sd.f32, N, needs_grad=True)
    steps = sd.ndarray(sd.i32, N)

    @sd.kernel
    def k(x: sd.types.ndarray(), y: sd.types.ndarray(), steps: sd.types.ndarray()):
        for i in x:
            v = x[i]
            for s in range(steps[i]):
                v = sd.sin(v) * 0.5 + 0.3
            y[i] = v

    rng = np.random.default_rng(0)
    xs = rng.random(N, dtype=np.float32)
    st = rng.integers(0, 9, N).astype(np.int32)
    st[123456] = 12                      # the longest trip count: sizes every row
    x.from_numpy(xs)
    steps.from_numpy(st)
    k(x, y, steps)
    y.grad.fill(1.0)
    k.grad(x, y, steps)
    g = x.grad.to_numpy()

    sample = np.r_[0:50, 123456, N - 50:N]
    for i in sample:
        v, d = float(xs[i]), 1.0
        for _ in range(st[i]):
            d *= np.cos(v) * 0.5
            v = np.sin(v) * 0.5 + 0.3
        assert g[i] == pytest.approx(d, rel=2e-4, abs=1e-6), i

    be = sd.runtime.state.backend()
    from spirad.runtime import sizing_cache
    gc = k.compile_adjoint((x, y, steps))
    (ti, sized), = [(i, s) for i, s in enumerate(sizing_cache.evaluate(gc.sizing, (x, y, steps),
                                                                      cache=False)) if s]
    layout = sized.layout
    assert sized.caps[0] == 14                         # 12 trips: K + 2
    # CPU: a row per worker and SPMD lane (1 lane under debug=True: scalar tasks)
    rows = be.rt.num_workers * gc.program.lanes[ti] if arch == "cpu" else 65536
    heap_f, heap_i = be.heap_bytes()
    assert heap_f <= 2 * rows * layout.stride_float    # bounded by rows, not by N
    assert heap_f < 64 * 1024 * 1024
