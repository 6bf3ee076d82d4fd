"""Adstack heap sizing (architecture §4 "Heap-backed storage" / "Sizing"): after a grad launch the
backend's heaps (`sd.runtime.state.backend().heap_bytes()` -> (float bytes, int bytes)) hold at least
rows x stride of the launch's exact capacities, exactly that on the first launch after init, and
grow by amortised doubling (max(needed, 2 x current)), never shrinking. The expected strides come
from `sizer.compute_layout` over the capacities the grad kernel computed for the launch
(`kernel.compile_adjoint(...).sizing`, evaluated with `sizing_cache.evaluate`), with each
stack's layout kind (`adstack_kind`: 'primal' when its adjoint lives in a register)."""
import numpy as np
import pytest

import sizer as sz
import spirad as sd
import spirad.runtime.state as sd_state
from spirad.runtime import sizing_cache
from spirad.backends.spirv_backend import ROWS_CAP
from kernel_ir.abi import adstack_allocas, adstack_kind
from tests.autodiff.gradutil import arr
from tests.support.archs import EVERY_ARCH, test_archs

ND = sd.types.ndarray()


@sd.kernel
def k_one(x: ND, y: ND, k: sd.i32):
    for i in x:
        v = x[i]                               # set before the K-trip loop ...
        for j in range(k):
            v = sd.sin(v) * 0.9 + 0.1          # ... assigned once per trip: K + 2 entries
        y[i] = v


@sd.kernel
def k_mixed(x: ND, y: ND, k: sd.i32, steps: ND):
    for i in x:
        v = x[i]
        acc = 0.0
        for j in range(k):
            if v > 0.5:                        # a condition on a carried value: an int stack
                v = v * 0.8
            for q in range(steps[j]):          # inner bound from an ndarray value
                v = sd.sin(v) + 0.05
            acc += v * v
            if acc > 100.0:
                break                          # a break: trip counter and flags
        y[i] = acc + v


@sd.kernel
def k_two_tasks(x: ND, y: ND, k: sd.i32, m: sd.i32):
    for i in x:
        v = x[i]
        for j in range(k):
            v = sd.sin(v)
        y[i] = v
    for i in x:
        w = x[i]
        for j in range(m):
            w = sd.cos(w) * 0.5
        y[i] += w


def _rows(arch, n_iter, layout, lanes):
    """Heap rows of a launch of `n_iter` iterations (`lanes`: the CPU task's SPMD lanes)."""
    be = sd_state.backend()
    if arch == "cpu":  # a row per worker and lane (llvm_codegen.spmd_adstack)
        return be.rt.num_workers * lanes
    if arch in ("cuda", "amdgpu"):  # one row per grid thread (spirad/backends/llvm_gpu.py)
        return be.heap_rows(n_iter, layout)
    limit = be.caps.max_storage_buffer_range
    per_row = max(layout.stride_float, layout.stride_int, 1)
    return max(1, min(ROWS_CAP, n_iter, limit // per_row))


def _layouts(kernel, args):
    """Per task with stacks: (names, capacities, Layout, CPU lanes) of this launch. The lanes:
    the SPMD lanes the CPU backend ran the task on, each with its own heap row (1 elsewhere, and
    under `debug=True`, which keeps CPU tasks scalar; the release run has them)."""
    g = kernel.compile_adjoint(args)
    sized = sizing_cache.evaluate(g.sizing, args, cache=False)
    out = []
    for ti, (t, s) in enumerate(zip(g.tl.tasks, sized)):
        if s is None:
            continue
        lanes = g.program.lanes[ti] if sd_state.current().arch == "cpu" else 1
        assert lanes == 1 or not sd_state.current().debug, lanes
        allocas = adstack_allocas(t)
        names = [a.arg.name for a in allocas]
        c = list(s.caps)
        layout = sz.compute_layout(c, [a.dtype.nbytes for a in allocas],
                                   [adstack_kind(a) for a in allocas])
        assert layout == s.layout  # the layout the launch used
        out.append((names, c, layout, lanes))
    return out


def _grown(cur, need, floor=0):
    need = max(need, floor)
    return cur if need <= cur else max(need, 2 * cur)


class HeapModel:
    """What the heaps should be after a sequence of launches (the backends' growth rule)."""

    def __init__(self, arch):
        self.arch = arch
        # CPU starts with 8-byte placeholder heaps; Vulkan allocates on first use (>= 16 bytes)
        self.f, self.i = (0, 0) if arch == "vulkan" else (8, 8)  # cuda / amdgpu: as the CPU
        self.fresh = True

    def launch(self, kernel, args, n_iter):
        for names, caps, layout, lanes in _layouts(kernel, args):
            rows = _rows(self.arch, n_iter, layout, lanes)
            nf, ni = layout.heap_bytes(rows)
            if self.arch != "vulkan":
                self.f, self.i = _grown(self.f, nf), _grown(self.i, ni)
            else:
                fl = 16 if self.fresh else 0
                self.f, self.i = _grown(self.f, nf, fl), _grown(self.i, ni, fl)
                self.fresh = False
        return self.f, self.i


def _launch(kernel, args):
    kernel(*args)
    args[1].grad.fill(1.0)
    kernel.grad(*args)
    sd.sync()
    return sd_state.backend().heap_bytes()


@pytest.mark.parametrize("k_trips", [0, 1, 5, 37])
@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_capacity_is_k_plus_2_and_first_launch_is_exact(arch, k_trips):
    n = 8
    x = arr(sd.f64, np.linspace(0.1, 0.8, n), needs_grad=True)
    y = sd.ndarray(sd.f64, n, needs_grad=True)
    args = (x, y, k_trips)
    (names, caps, layout, lanes), = _layouts(k_one, args)
    assert caps[names.index("v")] == k_trips + 2
    # the reverse walk keeps the top adjoint in a register (passes/autodiff/stack_tops): the
    # float row holds only v's primal entries, no adjoint half, no padding
    assert layout.kinds[names.index("v")] == "primal"
    assert layout.stride_float == (k_trips + 2) * 8  # f64 entries: already 8-aligned
    rows = _rows(arch, n, layout, lanes)
    nf, ni = layout.heap_bytes(rows)
    got = _launch(k_one, args)
    # the first launch from a fresh init: exactly rows x stride (both are well above 16 bytes)
    assert nf >= 16 and ni >= 16
    assert got == (nf, ni), (got, (nf, ni), rows, layout)


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_capacity_matches_sizer_for_nested_dynamic_bounds(arch):
    n = 6
    x = arr(sd.f64, np.linspace(0.1, 0.8, n), needs_grad=True)
    y = sd.ndarray(sd.f64, n, needs_grad=True)
    steps = arr(sd.i32, [2, 0, 5, 1])
    args = (x, y, 4, steps)
    (names, caps, layout, lanes), = _layouts(k_mixed, args)
    # v: one push at its definition, one per conditional store (4), one per inner trip (8)
    # plus the initial zero: at least 14 and exactly what the sizer says
    assert caps[names.index("v")] >= 1 + 1 + 4 + 8
    assert "int" in k_mixed.compile_adjoint(args).sizing.tasks[0].kinds, "int stacks"
    got = _launch(k_mixed, args)
    rows = _rows(arch, n, layout, lanes)
    assert got == layout.heap_bytes(rows)
    # the capacities are what this launch needs: a bigger bound gives bigger stacks
    steps.from_numpy(np.array([9, 9, 9, 9], np.int32))
    (_, caps2, _, _), = _layouts(k_mixed, args)
    assert caps2[names.index("v")] >= 1 + 1 + 4 + 36


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_heaps_grow_by_amortised_doubling_and_never_shrink(arch):
    n = 8
    x = arr(sd.f64, np.linspace(0.1, 0.8, n), needs_grad=True)
    y = sd.ndarray(sd.f64, n, needs_grad=True)
    model = HeapModel(arch)
    sizes = []
    for k in (4, 5, 40, 3, 41, 200, 0, 90):
        want = model.launch(k_one, (x, y, k), n)
        got = _launch(k_one, (x, y, k))
        (names, caps, layout, lanes), = _layouts(k_one, (x, y, k))
        need = layout.heap_bytes(_rows(arch, n, layout, lanes))
        assert got[0] >= need[0] and got[1] >= need[1], (k, got, need)
        assert got == want, (k, got, want)
        sizes.append(got)
    for a, b in zip(sizes, sizes[1:]):
        assert b[0] >= a[0] and b[1] >= a[1]          # never shrinks
    # 4 -> 5 trips needs a little more than the first launch: the heap doubles
    assert sizes[1][0] == 2 * sizes[0][0]


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_two_tasks(arch):
    n = 5
    x = arr(sd.f64, np.linspace(0.1, 0.8, n), needs_grad=True)
    y = sd.ndarray(sd.f64, n, needs_grad=True)
    model = HeapModel(arch)
    for k, m in ((3, 30), (30, 3), (64, 64)):
        want = model.launch(k_two_tasks, (x, y, k, m), n)
        assert _launch(k_two_tasks, (x, y, k, m)) == want


@test_archs(archs=EVERY_ARCH, default_fp=sd.f64)
def test_heap_is_rows_times_stride_not_iterations(arch):
    """Many more iterations than rows: memory is rows x stride (CPU: one row per worker and SPMD
    lane; Vulkan: at most ROWS_CAP threads in flight), and the gradients are still right."""
    n = ROWS_CAP + 4464 if arch == "vulkan" else 5000
    xs = np.random.default_rng(0).uniform(0.1, 0.9, n)
    x = arr(sd.f64, xs, needs_grad=True)
    y = sd.ndarray(sd.f64, n, needs_grad=True)
    k = 3
    (names, caps, layout, lanes), = _layouts(k_one, (x, y, k))
    rows = _rows(arch, n, layout, lanes)
    assert rows < n
    if arch == "cpu":
        assert rows == sd_state.backend().rt.num_workers * lanes
    elif arch in ("cuda", "amdgpu"):
        assert rows == sd_state.backend().rt.max_threads  # the whole grid
    else:
        assert rows == ROWS_CAP
    got = _launch(k_one, (x, y, k))
    assert got == layout.heap_bytes(rows)
    v, g = xs.copy(), np.ones(n)
    for _ in range(k):
        g = g * np.cos(v) * 0.9
        v = np.sin(v) * 0.9 + 0.1
    np.testing.assert_allclose(x.grad.to_numpy(), g, rtol=1e-12)
    np.testing.assert_allclose(y.to_numpy(), v, rtol=1e-12)
