"""Fields in shared root buffers (issue 22): on vulkan and metal every field, gradient and dual
lives in a root buffer addressed by offset (`spirad/backends/root_buffers.py`,
`spirv_codegen/buffers.py`), so a kernel's binding count does not grow with the fields it uses.
Checked on every arch (the same programs must give the same values everywhere): a kernel over 40
fields and their gradients, fields created after kernels were compiled (the root buffer grows),
fields spread over several root chunks, every dtype with its alignment, atomics (native, int
through unsigned views, compare-and-swap loops) and host access."""
import numpy as np
import pytest

import spirad as sd
import spirad.runtime.state as sd_state
from tests.support.archs import SPIRV_ARCHS, test_archs

NF = 40


def storage_buffers(kernel, mode=0):
    """Storage buffers each task of the kernel's last program (mode 0 forward, 1 adjoint) binds
    on a SPIR-V backend; None on the others."""
    prog = kernel._plans[mode].compiled.program
    tasks = getattr(prog, "tasks", None)
    if tasks is None or not hasattr(tasks[0], "num_bindings"):
        return None
    return [m.num_bindings - len(m.uniform_bindings) for m in tasks]


@test_archs()
def test_forty_fields_and_their_gradients(arch):
    fs = [sd.field(sd.f32, shape=8, needs_grad=True) for _ in range(NF)]
    out = [sd.field(sd.f32, shape=8, needs_grad=True) for _ in range(4)]
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def k():
        for i in range(8):
            for j in sd.static(range(NF)):
                loss[None] += (j + 1) * 0.01 * sd.sin(fs[j][i])
                out[j % 4][i] += fs[j][i] * fs[(j + 1) % NF][i]

    @sd.kernel
    def total():
        for i in range(8):
            for j in sd.static(range(4)):
                loss[None] += out[j][i] * 0.5

    base = np.linspace(0.0, 1.0, 8)
    for j, f in enumerate(fs):
        f.from_numpy((base + 0.01 * j).astype(np.float32))
    with sd.ad.Tape(loss=loss):
        k()
        total()
    x = np.stack([f.to_numpy().astype(np.float64) for f in fs])
    want_out = [sum(x[j] * x[(j + 1) % NF] for j in range(NF) if j % 4 == m) for m in range(4)]
    for m in range(4):
        np.testing.assert_allclose(out[m].to_numpy(), want_out[m], rtol=1e-5)
    want_loss = sum((j + 1) * 0.01 * np.sin(x[j]).sum() for j in range(NF)) + \
        0.5 * sum(w.sum() for w in want_out)
    assert abs(loss[None] - want_loss) < 1e-4 * abs(want_loss)
    for j in range(NF):  # d loss / d fs[j] = (j+1)/100 cos + (fs[j+1] + fs[j-1]) / 2
        want = (j + 1) * 0.01 * np.cos(x[j]) + 0.5 * (x[(j + 1) % NF] + x[(j - 1) % NF])
        np.testing.assert_allclose(fs[j].grad.to_numpy(), want, rtol=1e-5, atol=1e-6)
    nb = storage_buffers(k, 1)
    if nb is not None:  # 44 fields with gradients and the status words: one root buffer (f32 and
        # u32 views), and the argument buffer on vulkan (a uniform buffer on metal)
        assert max(nb) <= 2 + (arch == "vulkan"), nb


@test_archs()
def test_fields_created_after_kernels_compiled(arch):
    a = sd.field(sd.f32, shape=16)

    @sd.kernel
    def inc(d: sd.f32):
        for i in a:
            a[i] += d

    inc(1.0)
    more = [sd.field(sd.f32, shape=4096) for _ in range(24)]  # 384 KiB: the root buffer grows

    @sd.kernel
    def fill_more():
        for i in range(4096):
            for j in sd.static(range(24)):
                more[j][i] = j + i * 0.5 + a[i % 16]

    fill_more()
    inc(2.0)  # compiled before the growth: binds the grown buffer
    np.testing.assert_array_equal(a.to_numpy(), np.full(16, 3.0, np.float32))
    for j in (0, 11, 23):
        np.testing.assert_array_equal(more[j].to_numpy(), j + np.arange(4096) * 0.5 + 1.0)
    # a gradient added after compiling: the kernels are compiled again for the new layout
    x = sd.field(sd.f32)
    sd.root.dense(sd.i, 16).place(x)
    loss = sd.field(sd.f32, shape=())

    @sd.kernel
    def sq():
        for i in x:
            loss[None] += x[i] * x[i] * a[i]

    x.from_numpy(np.arange(16, dtype=np.float32))
    sq()
    sd.root.lazy_grad()
    loss.grad[None] = 1.0
    sq.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * np.arange(16) * 3.0)
    be = sd_state.backend()
    if arch in ("vulkan", "metal"):
        assert be.roots.grown >= 1 and len(be.roots.chunks) == 1


@test_archs()
def test_one_module_over_fields_at_other_offsets(arch):
    """A template kernel over three fields of one shape: one SPIR-V module for all (they sit in
    one root chunk), at other offsets. Vulkan creates a pipeline per placement (the offsets are
    its specialization constants: `spirv_codegen.interface.Interface.root_word`), Metal reads
    them from the arguments; either way each launch reads and writes its own field, and a trip
    count read from a field takes its value."""
    fs = [sd.field(sd.f32, shape=16) for _ in range(3)]
    n = sd.field(sd.i32, shape=())

    @sd.kernel
    def k(f: sd.template(), s: sd.f32):
        for i in f:
            v = f[i]
            for _ in range(n[None]):
                v = v * s + 1.0
            f[i] = v

    for j, f in enumerate(fs):
        f.from_numpy(np.full(16, j + 1.0, np.float32))
    n[None] = 2
    programs = []
    for _ in range(2):  # the second round: every program (and pipeline) again
        for f in fs:
            k(f, 3.0)
            programs.append(k._plans[0].compiled.program)
    want = [float(j + 1) for j in range(3)]
    for _ in range(4):
        want = [w * 3.0 + 1.0 for w in want]
    for f, w in zip(fs, want):
        np.testing.assert_array_equal(f.to_numpy(), np.full(16, w, np.float32))
    if arch == "vulkan":
        assert len({bytes(t.words) for p in programs for t in p.tasks}) == 1  # one module,
        assert len({id(pipe) for p in programs for pipe in p.pipelines}) == 3  # 3 pipelines


@test_archs(archs=SPIRV_ARCHS)  # and metal: the root buffers of the SPIR-V backends
def test_fields_spread_over_root_chunks(arch):
    """With root chunks of 8 KiB, 6 KiB fields and gradients take a chunk each: a kernel binds one
    view per chunk (and element type) it touches, and computes as with one chunk."""
    be = sd_state.backend()
    be.roots.limit = 8192
    n = 1536
    fs = [sd.field(sd.f32, shape=n, needs_grad=True) for _ in range(2)]
    idx = sd.field(sd.i32, shape=n)  # an int field: a u32 view of its chunk
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def k():
        for i in range(n):
            loss[None] += sd.sin(fs[0][idx[i]] + 2.0 * fs[1][idx[i]])

    rng = np.random.default_rng(3)
    vals = [rng.uniform(-0.5, 0.5, n).astype(np.float32) for _ in range(2)]
    for f, v in zip(fs, vals):
        f.from_numpy(v)
    perm = rng.permutation(n).astype(np.int32)
    idx.from_numpy(perm)
    with sd.ad.Tape(loss=loss):
        k()
    x = [v.astype(np.float64) for v in vals]
    s = sum(x[j][perm] * (j + 1) for j in range(2))
    assert abs(loss[None] - np.sin(s).sum()) < 1e-3
    for j in range(2):
        want = np.zeros(n)
        np.add.at(want, perm, np.cos(s) * (j + 1))
        np.testing.assert_allclose(fs[j].grad.to_numpy(), want, rtol=1e-4, atol=1e-5)
    arrays = fs + [f.grad for f in fs] + [idx]
    chunks = {be.roots.by_key[f.id].chunk.index for f in arrays}
    assert len(chunks) == 5 and len(be.roots.chunks) == 5
    (fwd,), grad = storage_buffers(k, 0), storage_buffers(k, 1)
    c = lambda f: be.roots.by_key[f.id].chunk.index  # noqa: E731
    status = k._plans[0].compiled.program.status.chunk.index
    views = {(c(fs[0]), "f32"), (c(fs[1]), "f32"), (c(idx), "u32"), (c(loss), "f32"),
             (status, "u32")}  # one binding per root chunk and element type
    args = arch == "vulkan"  # the argument buffer is a storage buffer there
    assert fwd == args + len(views) and max(grad) >= args + len(views) + 2


@test_archs()
def test_dtypes_alignment_atomics_and_host_access(arch):
    b = sd.field(sd.u1, shape=3)       # 12 bytes: the next field starts 8-byte aligned
    x = sd.field(sd.f32, shape=3)
    n = sd.field(sd.i32, shape=())
    big = sd.field(sd.i64, shape=3)
    u = sd.field(sd.u32, shape=5)
    v = sd.Vector.field(3, sd.f32, shape=2)

    @sd.kernel
    def k(m: sd.i32):
        for i in range(m):
            n[None] += -3                  # an i32 atomic through unsigned words
            x[i % 3] += 0.5                # an f32 atomic add
            u[i % 5] += sd.u32(7)
        for i in b:
            b[i] = i % 2 == 0
            big[i] = sd.i64(i + 1) * 3000000000 + n[None]
        for i, j in sd.ndrange(2, 3):
            v[i][j] = i * 0.25 + j

    x.from_numpy(np.array([1.0, -2.0, 0.0], np.float32))
    u.fill(1)
    k(10)
    assert n[None] == -30
    np.testing.assert_array_equal(x.to_numpy(), [3.0, -0.5, 1.5])
    np.testing.assert_array_equal(u.to_numpy(), [15, 15, 15, 15, 15])
    assert b.to_numpy().dtype == bool and b.to_numpy().tolist() == [True, False, True]
    assert big.to_numpy().tolist() == [3000000000 * (i + 1) - 30 for i in range(3)]
    np.testing.assert_array_equal(v.to_numpy(), [[0, 1, 2], [0.25, 1.25, 2.25]])
    big[1] = -(2 ** 40) - 1                # element access next to other fields
    x[2] = 7.5
    u.fill(9)
    assert big[1] == -(2 ** 40) - 1 and x[2] == 7.5 and u.to_numpy().tolist() == [9] * 5
    assert n[None] == -30 and x[0] == 3.0


@test_archs(require=("f64",))
def test_f64_fields_and_compare_and_swap_atomics(arch):
    """f64 fields after odd-sized ones; f64 atomic adds (a compare-and-swap loop on lavapipe,
    which has no f64 atomic add: an unsigned 64-bit view of the root) next to f64 loads."""
    pad = sd.field(sd.f32, shape=3)
    acc = sd.field(sd.f64, shape=4, needs_grad=True)
    w = sd.field(sd.f64, shape=64, needs_grad=True)
    loss = sd.field(sd.f64, shape=(), needs_grad=True)

    @sd.kernel
    def k():
        for i in w:
            acc[i % 4] += w[i] * w[i]
        for j in range(4):
            loss[None] += acc[j] * (j + 1.0) + pad[0]

    wv = np.linspace(-1, 1, 64)
    w.from_numpy(wv)
    pad.fill(0.25)
    with sd.ad.Tape(loss=loss):
        k()
    want = np.array([(wv[j::4] ** 2).sum() for j in range(4)])
    np.testing.assert_allclose(acc.to_numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(w.grad.to_numpy(), 2 * wv * (np.arange(64) % 4 + 1), rtol=1e-12)
    assert abs(loss[None] - ((np.arange(4) + 1) * want).sum() - 1.0) < 1e-9


def _chain_source(n_args: int) -> str:
    args = ", ".join(f"a{i}: sd.types.ndarray()" for i in range(n_args))
    body = " + ".join(f"a{i}[i]" for i in range(1, n_args))
    return (f"import spirad as sd\n\n@sd.kernel\ndef wide({args}):\n    for i in a0:\n"
            f"        a0[i] = {body}\n")


def _ordinary_work():
    """A forward kernel, a Tape over a gradient and a range read from memory, all checked."""
    x = sd.field(sd.f32, shape=32, needs_grad=True)
    n = sd.field(sd.i32, shape=())
    loss = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def k(a: sd.types.ndarray()):
        for i in range(n[None]):
            loss[None] += sd.sin(x[i]) * a[i]

    x.from_numpy(np.linspace(0, 1, 32).astype(np.float32))
    a = sd.ndarray(sd.f32, 32)
    a.from_numpy(np.arange(32, dtype=np.float32))
    n[None] = 20
    with sd.ad.Tape(loss=loss):
        k(a)
    xs = np.linspace(0, 1, 32)
    assert abs(loss[None] - (np.sin(xs[:20]) * np.arange(20)).sum()) < 1e-3
    want = np.where(np.arange(32) < 20, np.cos(xs) * np.arange(32), 0.0)
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["vulkan", "metal"])
def test_refused_kernel_leaves_the_device_usable(arch, tmp_path):
    """A kernel over more directly bound ndarrays (larger than an arena, or imported: simulated
    with ndarrays over buffers of their own) than the device binds is refused before the device
    sees it (naming kernel, count, limit and arguments); then ordinary kernels run as in a fresh
    process."""
    import importlib.util

    from kernel_ir.errors import SpiradDeviceError
    from tests.support.archs import arch_or_skip
    arch_or_skip(arch)
    sd.init(arch=getattr(sd, arch))
    limit = sd_state.backend().caps.max_per_stage_storage_buffers
    path = tmp_path / "wide_kernel.py"
    path.write_text(_chain_source(limit + 1))
    spec = importlib.util.spec_from_file_location("wide_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from spirad.data.ndarray import Ndarray
    be = sd_state.backend()
    arrs = [Ndarray._alias(be.allocate(16), sd.f32, (4,)) for _ in range(limit + 1)]
    with pytest.raises(SpiradDeviceError, match=rf"kernel wide needs {limit + 2 + (arch == 'vulkan')} "
                       rf"storage buffers .* allows {limit} .*split the large ndarray "
                       rf"arguments a0, a1, "):
        mod.wide(*arrs)
    _ordinary_work()
    mod.wide(*[sd.ndarray(sd.f32, 4) for _ in range(limit + 1)])  # in arenas: it fits
    with pytest.raises(SpiradDeviceError, match="kernel wide needs"):  # refused again, the same
        mod.wide(*arrs)
    _ordinary_work()


def test_wgpu_validation_error_names_the_kernel_and_leaves_the_device_usable(monkeypatch):
    """Were a module to reach wgpu with a binding it rejects (here: the indirect-dispatch buffer
    of a range read from memory declared read-write, as before root buffers), the error names
    the kernel and wgpu's cause, none of the batch ran, and later work runs normally."""
    from gfx_runtime.wgpu.runtime import WgpuRuntime
    from kernel_ir.errors import SpiradDeviceError
    from tests.support.archs import arch_or_skip
    arch_or_skip("metal")
    sd.init(arch=sd.metal)
    n = sd.field(sd.i32, shape=())
    out = sd.field(sd.f32, shape=8)

    @sd.kernel
    def gated():
        for i in range(n[None]):
            out[i] = 1.0

    n[None] = 4
    dispatch = WgpuRuntime.dispatch

    def indirect_from_a_read_write_buffer(self, pipeline, buffers, groups, pc=b"", indirect=None):
        if indirect is not None:
            indirect = (buffers[1], 0)
        return dispatch(self, pipeline, buffers, groups, pc, indirect)
    monkeypatch.setattr(WgpuRuntime, "dispatch", indirect_from_a_read_write_buffer)
    with pytest.raises(SpiradDeviceError, match=r"(?s)kernel gated.*conflicting usages"):
        gated()  # recorded; wgpu validates the pass at the flush
        sd.sync()
    monkeypatch.setattr(WgpuRuntime, "dispatch", dispatch)
    assert out.to_numpy().tolist() == [0.0] * 8  # none of the rejected batch ran
    _ordinary_work()
    # a module wgpu rejects at pipeline creation (its range arguments read-write in the layout,
    # read-only in the shader): named too, and nothing else is affected
    pipeline = WgpuRuntime.pipeline

    def read_write(self, *a, readonly=(), **k):
        return pipeline(self, *a, **k)
    monkeypatch.setattr(WgpuRuntime, "pipeline", read_write)

    @sd.kernel
    def gated2():
        for i in range(n[None]):
            out[i] = 2.0
    with pytest.raises(SpiradDeviceError, match=r"(?s)compute shader of kernel gated2.*"
                                                 r"Validation Error"):
        gated2()
    monkeypatch.setattr(WgpuRuntime, "pipeline", pipeline)
    _ordinary_work()
    gated()
    assert out.to_numpy().tolist() == [1.0] * 4 + [0.0] * 4
