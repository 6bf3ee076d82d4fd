"""Kernels shared by the interop tests (torch custom ops, JAX): written once, each a shape the
wrappers must carry — a plain map with a scalar argument, and a gather with a run-time trip count
(an adstack) and two outputs, one of them a reduction."""
import spirad as sd


@sd.kernel
def step(x: sd.types.ndarray(), v: sd.types.ndarray(), dt: sd.f64, y: sd.types.ndarray()):
    for i in x:
        y[i] = x[i] + dt * sd.sin(v[i]) * x[i]


@sd.kernel
def gather_loop(x: sd.types.ndarray(), idx: sd.types.ndarray(), n: sd.i32,
                out: sd.types.ndarray(), total: sd.types.ndarray()):
    for i in idx:
        s = x[idx[i]]
        for _ in range(n):          # a run-time trip count: s lives on the adstack
            s = sd.sin(s) + 0.5 * s
        out[i] = s
        total[0] += s * s
