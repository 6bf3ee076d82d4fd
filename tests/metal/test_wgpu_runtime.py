"""gfx_runtime.wgpu on its own: buffers (mirror semantics), a SPIR-V pipeline with a uniform
argument buffer and push constants, batching, indirect dispatch, limits."""
import numpy as np
import pytest

from gfx_runtime.errors import GfxDeviceError
from spirv_codegen.emitter import Emitter
from spirv_codegen.interface import Interface
from spirv_codegen.lower import SpirvCaps
from spirv_codegen.module import Module
from spirv_codegen.profile import METAL
from kernel_ir.abi import pack_push_constants
from kernel_ir.dtypes import i32, u1, u32


@pytest.fixture(scope="module")
def rt():
    from gfx_runtime.wgpu import is_available, unavailable_reason
    if not is_available(True):
        pytest.skip(unavailable_reason(True))
    from gfx_runtime.wgpu import WgpuRuntime
    r = WgpuRuntime(emulate=True)
    yield r
    r.close()


class _ABI:
    bindings = ()
    arg_buffer_size = 8


def _add_kernel():
    """out[gid] = in[gid] * args[0] + push constant 0 (u32 arithmetic), for gid < args[1]."""
    caps = SpirvCaps(profile=METAL)
    m = Module()
    fn = m.function(m.t_void())
    E = Emitter(m, caps, fn)
    io = Interface(E, _ABI(), {})
    body = fn.label()
    fn.branch(body)  # the entry block keeps the loads Interface makes once per invocation
    fn.begin(body)
    gid = E.op("OpCompositeExtract", u32, io.builtin("GlobalInvocationId"), 0)
    scale, n = io.arg_word(0), io.arg_word(1)
    ok, end = fn.label(), fn.label()
    inside = E.op("OpULessThan", u1, gid, n)
    fn.selection_merge(end)
    fn.branch_cond(inside, ok, end)
    fn.begin(ok)
    idx = E.op("OpBitcast", i32, gid)
    x = E.op("OpLoad", u32, io.element_ptr(2, u32, idx))
    pc = E.op("OpBitcast", u32, io.push_constant(0))
    E.emit("OpStore", io.element_ptr(3, u32, idx),
           E.op("OpIAdd", u32, E.op("OpIMul", u32, x, scale), pc))
    fn.branch(end)
    fn.begin(end)
    fn.emit("OpReturn")
    m.capability("Shader")
    m.memory_model()
    m.entry_point("GLCompute", fn.id, "main", io.builtins)
    m.execution_mode(fn.id, "LocalSize", 64, 1, 1)
    return m.to_bytes()


def test_caps_impose_apple_silicon_limits(rt):
    c = rt.caps
    assert c.emulated and not c.has_f64 and not c.has_int64_atomics
    assert (c.wgpu_storage_buffers, c.buffer_slots, c.max_per_stage_storage_buffers) == (31, 31, 28)
    assert c.max_storage_buffer_range <= 256 << 20
    # the device is created with these limits, not WebGPU's defaults (8 storage buffers)
    lim = rt._device.limits
    assert lim["max-storage-buffers-per-shader-stage"] == 31
    assert lim["max-storage-buffer-binding-size"] == c.max_storage_buffer_range
    assert lim["max-buffer-size"] == c.max_buffer_size > 256 << 20
    assert c.features <= {"shader-float32-atomic", "shader-int64", "immediates", "shader-f16"}
    assert c.has_f16 == ("shader-f16" in c.features) == c.has_storage16  # f16 in storage too


def test_buffer_roundtrip_and_mirror(rt):
    b = rt.alloc(40)
    assert (b.read() == 0).all()  # wgpu zero-fills
    b.write(np.arange(10, dtype=np.uint32))
    v = b.view(np.uint32, 10)
    assert list(v) == list(range(10))
    v[3] = 99  # a write through the view reaches the device before the next use
    assert b.read(12, 4).view(np.uint32)[0] == 99


def test_dispatch_uniform_args_push_constants_and_batching(rt):
    words = _add_kernel()
    from spirv_codegen import metal_check, validate
    validate(words)
    assert metal_check.violations(words, 8, 3, (0,)) == []
    pipe = rt.pipeline(words, 4, 12, uniform=(0,))
    n = 100
    args = rt.alloc(16)
    args.write(np.array([3, n, 0, 0], np.uint32))
    src, dst = rt.alloc(4 * n), rt.alloc(4 * n)
    src.write(np.arange(n, dtype=np.uint32))
    status = rt.alloc(64)
    for k in range(5):  # batched in one pass; each reads what the previous one wrote
        rt.dispatch(pipe, [args, status, src if k % 2 == 0 else dst, dst if k % 2 == 0 else src],
                    (2, 1, 1), pack_push_constants(k, 0, 0))
    rt.flush()
    ref = np.arange(n, dtype=np.uint64)
    for k in range(5):
        ref = ref * 3 + k
    assert (dst.read().view(np.uint32) == (ref % (1 << 32)).astype(np.uint32)).all()


def test_host_write_after_recorded_use_is_ordered(rt):
    """A host write to a buffer the unsubmitted batch binds waits for that batch first."""
    pipe = rt.pipeline(_add_kernel(), 4, 12, uniform=(0,))
    args, status = rt.alloc(16), rt.alloc(64)
    args.write(np.array([1, 4, 0, 0], np.uint32))
    src, dst = rt.alloc(16), rt.alloc(16)
    src.write(np.full(4, 7, np.uint32))
    rt.dispatch(pipe, [args, status, src, dst], (1, 1, 1), pack_push_constants(0, 0, 0))
    src.write(np.full(4, 1000, np.uint32))  # must not be seen by the dispatch above
    assert list(dst.read().view(np.uint32)) == [7] * 4


def test_limits_raise_runtime_errors(rt):
    with pytest.raises(GfxDeviceError, match="buffer size limit"):
        rt.alloc(rt.caps.max_buffer_size + 16)
    limit = rt.caps.max_storage_buffer_range
    pipe = rt.pipeline(_add_kernel(), 4, 12, uniform=(0,))
    args, status, src = rt.alloc(16), rt.alloc(64), rt.alloc(16)
    big = rt.alloc(limit + 16)  # allocated; bound whole it is refused, through windows not
    with pytest.raises(GfxDeviceError, match="binding 3 exceeds the storage-buffer binding limit"):
        rt.dispatch(pipe, [args, status, src, big], (1, 1, 1), pack_push_constants(0, 0, 0))
    with pytest.raises(GfxDeviceError, match="binding limit"):
        rt.window(big, 0, limit + 16)
    args.write(np.array([2, 4, 0, 0], np.uint32))
    src.write(np.full(4, 5, np.uint32))
    tail = rt.window(big, limit, 16)  # the 16 bytes past the binding limit
    rt.dispatch(pipe, [args, status, src, tail], (1, 1, 1), pack_push_constants(1, 0, 0))
    assert list(big.read(limit, 16).view(np.uint32)) == [11] * 4
    big.free()
    # Metal's buffer table: 28 storage + 1 uniform + immediates + naga's sizes = 31 entries fit
    rt.pipeline(_add_kernel(), 29, 12, uniform=(0,))
    with pytest.raises(GfxDeviceError, match=r"29 storage buffers takes 32 entries of Metal's "
                       r"buffer argument table \(29 storage \+ 1 uniform \+ 1 immediates \+ 1 "
                       r"for the buffer sizes naga passes\), which has 31"):
        rt.pipeline(_add_kernel(), 30, 12, uniform=(0,))
    with pytest.raises(GfxDeviceError, match="32 storage buffers exceeds the limit of 31"):
        rt.pipeline(_add_kernel(), 33, 12, uniform=(0,))


def test_windows_bind_byte_ranges(rt):
    """`rt.window`: bytes of a buffer bound as a buffer of their own, read and written by one
    dispatch (the add kernel: dst[i] = src[i] * 3 + 5 for i < 4); the rest is untouched, and a
    host write to the buffer after the dispatch waits for it."""
    pipe = rt.pipeline(_add_kernel(), 4, 12, uniform=(0,))
    args, status = rt.alloc(16), rt.alloc(64)
    args.write(np.array([3, 4, 0, 0], np.uint32))
    buf = rt.alloc(1024)
    buf.write(np.arange(256, dtype=np.uint32))
    src, dst = rt.window(buf, 256, 16), rt.window(buf, 768, 16)
    rt.dispatch(pipe, [args, status, src, dst], (1, 1, 1), pack_push_constants(5, 0, 0))
    buf.write(np.full(4, 9, np.uint32), 0)  # ordered after the dispatch above
    want = np.arange(256, dtype=np.uint32)
    want[192:196] = np.arange(64, 68) * 3 + 5
    want[:4] = 9
    np.testing.assert_array_equal(buf.read().view(np.uint32), want)
    with pytest.raises(GfxDeviceError, match="multiple of 256"):
        rt.window(buf, 128, 16)


@pytest.mark.parametrize("batch", [4096, 7])
def test_argument_blocks_each_dispatch_sees_its_own(rt, monkeypatch, batch):
    """Argument blocks (`arguments=True`: the uniform binding 0 given as bytes per dispatch,
    staged at a dynamic offset of the arena and written once per pass): 1,200 dispatches with
    distinct blocks and no flush in between each read their own, through passes submitted every
    7 dispatches and an arena that fills (the pass is submitted early) and one block larger
    than it (a new arena). Each dispatch reads what the previous one wrote."""
    from gfx_runtime.wgpu import WgpuRuntime
    from gfx_runtime.wgpu import runtime as wrt
    monkeypatch.setattr(wrt, "ARENA_BYTES", 512)
    r = WgpuRuntime(emulate=True)
    try:
        r.max_batch = batch
        pipe = r.pipeline(_add_kernel(), 4, 12, uniform=(0,), arguments=True)
        n = 100
        src, dst, status = r.alloc(4 * n), r.alloc(4 * n), r.alloc(64)
        src.write(np.arange(n, dtype=np.uint32))
        ref = np.arange(n, dtype=np.uint64)
        for k in range(1200):
            scale = 1 + k % 3
            words = [scale, n, k, 0] if k != 600 else [scale, n] + [0] * 200  # 808 bytes
            block = np.array(words, np.uint32).tobytes()
            a, b = (src, dst) if k % 2 == 0 else (dst, src)
            r.dispatch(pipe, [block, status, a, b], (2, 1, 1), pack_push_constants(k, 0, 0))
            ref = (ref * scale + k) % (1 << 32)
        out = dst if 1200 % 2 else src
        assert (out.read().view(np.uint32) == ref.astype(np.uint32)).all()
    finally:
        r.close()


def test_argument_block_is_copied_at_dispatch(rt):
    """A bytearray block changed in place between dispatches: each reads what it was given."""
    pipe = rt.pipeline(_add_kernel(), 4, 12, uniform=(0,), arguments=True)
    n = 8
    src, dst, status = rt.alloc(4 * n), rt.alloc(4 * n), rt.alloc(64)
    src.write(np.ones(n, np.uint32))
    block = bytearray(16)
    for k, scale in enumerate((2, 3, 5)):
        block[:] = np.array([scale, n, 0, 0], np.uint32).tobytes()
        a, b = (src, dst) if k % 2 == 0 else (dst, src)
        rt.dispatch(pipe, [block, status, a, b], (1, 1, 1), pack_push_constants(0, 0, 0))
    assert list(dst.read().view(np.uint32)) == [30] * n


def test_a_pass_with_the_blocks_of_the_pass_before_writes_no_arguments(rt, monkeypatch):
    """`launch; sync()` with unchanged arguments: the arena buffer holds the pass's blocks
    already, so they are not written again (a `queue.write_buffer` costs microseconds); a pass
    with other blocks writes them, and every dispatch reads its own."""
    pipe = rt.pipeline(_add_kernel(), 4, 12, uniform=(0,), arguments=True)
    n = 5
    src, dst, status = rt.alloc(4 * n), rt.alloc(4 * n), rt.alloc(64)
    src.write(np.ones(n, np.uint32))
    queue, writes = rt._queue, []

    class Counting:  # rt._queue, counting the writes into the argument arena
        def __getattr__(self, name):
            return getattr(queue, name)

        def write_buffer(self, buf, *args):
            if rt._arena is not None and buf is rt._arena.buffer.handle:
                writes.append(bytes(args[1])[:8])
            return queue.write_buffer(buf, *args)

    monkeypatch.setattr(rt, "_queue", Counting())
    for scale in (7, 7, 9, 9, 7):
        block = np.array([scale, n], np.uint32).tobytes()  # a new object: equal bytes
        rt.dispatch(pipe, [block, status, src, dst], (1, 1, 1), pack_push_constants(0, 0, 0))
        rt.flush()
        assert list(dst.read().view(np.uint32)) == [scale] * n
    assert [np.frombuffer(w, np.uint32)[0] for w in writes] == [7, 9, 7]
