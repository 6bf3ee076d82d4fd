"""Vulkan runtime: buffers, pipelines, dispatch, batching and device limits (on lavapipe in CI)."""

from __future__ import annotations

import gc
import struct

import numpy as np
import pytest

from gfx_runtime.vulkan import is_available
from gfx_runtime.errors import GfxDeviceError

if not is_available():
    pytest.skip("no Vulkan device (install mesa-vulkan-drivers for lavapipe)",
                allow_module_level=True)


def groups(n: int) -> tuple[int, int, int]:
    return ((n + 63) // 64, 1, 1)


def u32(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}I", *values)


def test_caps_are_sane(rt):
    caps = rt.caps
    assert caps.api_version >= (1, 1, 0)
    assert caps.max_storage_buffer_range > 0
    assert caps.max_per_stage_storage_buffers >= 4
    assert len(caps.max_compute_work_group_count) == 3
    assert caps.max_push_constants_size >= 128
    if caps.is_lavapipe:
        assert caps.loop_iteration_cap == 65535
        assert caps.has_f64 and caps.has_i64
    with pytest.raises(Exception):
        caps.name = "other"  # frozen


def test_caps_int64_atomics(rt):
    caps = rt.caps
    assert isinstance(caps.has_int64_atomics, bool)
    if caps.is_lavapipe:  # lavapipe implements shaderBufferInt64Atomics
        assert caps.has_int64_atomics, f"device reports no shaderBufferInt64Atomics: {caps}"


def test_int64_atomic_add(rt, spirv):
    """OpAtomicIAdd on a uint64 storage buffer; the `rt` fixture fails on any validation message
    (which it would give if the device had not enabled shaderBufferInt64Atomics)."""
    if not (rt.caps.has_i64 and rt.caps.has_int64_atomics):
        pytest.skip(f"device lacks shaderInt64 / shaderBufferInt64Atomics: {rt.caps}")
    n = 1000
    buf = rt.alloc(8)
    buf.write(np.array([5], np.uint64))
    add = rt.pipeline(spirv("atomic_add_i64"), num_bindings=1, push_constant_bytes=4)
    rt.dispatch(add, [buf], groups(n), u32(n))
    rt.flush()
    assert int(buf.read().view(np.uint64)[0]) == 5 + n * (n - 1) // 2 + n * 2**32


def test_fill(rt, spirv):
    n = 1000
    buf = rt.alloc(n * 4)
    fill = rt.pipeline(spirv("fill"), num_bindings=1, push_constant_bytes=8)
    rt.dispatch(fill, [buf], groups(n), u32(7, n))
    rt.flush()
    np.testing.assert_array_equal(buf.view(np.uint32), np.full(n, 7, np.uint32))


def test_axpy(rt, spirv):
    n = 777
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    bx, by = rt.alloc(x.nbytes), rt.alloc(y.nbytes)
    bx.write(x)
    by.write(y)
    axpy = rt.pipeline(spirv("axpy"), 2, 8)
    rt.dispatch(axpy, [bx, by], groups(n), struct.pack("<fI", 2.5, n))
    np.testing.assert_allclose(by.read().view(np.float32), 2.5 * x + y, rtol=1e-6)


def test_batch_of_1000_launches(rt, spirv):
    n = 300
    buf = rt.alloc(n * 4)
    add = rt.pipeline(spirv("add_one"), 1, 4)
    for _ in range(1000):
        rt.dispatch(add, [buf], groups(n), u32(n))
    rt.flush()
    np.testing.assert_array_equal(buf.view(np.uint32), np.full(n, 1000, np.uint32))


def test_batch_split_across_frames(rt, spirv):
    rt.max_batch = 16  # submit every 16 launches without waiting; the frames ring takes over
    n = 100
    buf = rt.alloc(n * 4)
    add = rt.pipeline(spirv("add_one"), 1, 4)
    for _ in range(1000):
        rt.dispatch(add, [buf], groups(n), u32(n))
    np.testing.assert_array_equal(buf.read().view(np.uint32), np.full(n, 1000, np.uint32))


def test_dependent_kernels_in_one_batch(rt, spirv):
    # fill -> copy_add -> add_one: each reads what the previous wrote (barriers between them).
    n = 256
    a, b = rt.alloc(n * 4), rt.alloc(n * 4)
    fill = rt.pipeline(spirv("fill"), 1, 8)
    copy_add = rt.pipeline(spirv("copy_add"), 2)
    add = rt.pipeline(spirv("add_one"), 1, 4)
    for step in range(10):
        rt.dispatch(fill, [a], groups(n), u32(step, n))
        rt.dispatch(copy_add, [a, b], groups(n))
        rt.dispatch(add, [b], groups(n), u32(n))
        rt.dispatch(copy_add, [b, a], groups(n))
    np.testing.assert_array_equal(a.view(np.uint32), np.full(n, 9 + 3, np.uint32))


def test_host_access_flushes_pending_work(rt, spirv):
    n = 64
    buf = rt.alloc(n * 4)
    fill = rt.pipeline(spirv("fill"), 1, 8)
    rt.dispatch(fill, [buf], groups(n), u32(5, n))
    assert buf.read(0, 4).view(np.uint32)[0] == 5  # no explicit flush
    rt.dispatch(fill, [buf], groups(n), u32(6, n))
    buf.write(u32(1), offset=4)  # write waits for the fill first, then overwrites element 1
    np.testing.assert_array_equal(buf.view(np.uint32, 3), [6, 1, 6])


def test_pipeline_cache_hit(rt, spirv):
    code = spirv("add_one")
    p1 = rt.pipeline(code, 1, 4)
    assert rt.pipeline(code, 1, 4) is p1
    assert rt.pipeline(bytes(code), 1, 4) is p1  # keyed by content, not identity
    assert rt.pipeline(code, 1, 4, key="add_one") is rt.pipeline(code, 1, 4, key="add_one")
    assert rt.pipeline(code, 1, 4, key="add_one") is not p1


def test_layouts_shared_between_pipelines(rt, spirv):
    fill = rt.pipeline(spirv("fill"), 1, 8)
    add = rt.pipeline(spirv("add_one"), 1, 4)
    assert fill.set_layout == add.set_layout


def test_binding_limit(rt, spirv):
    limit = rt.caps.max_per_stage_storage_buffers
    pattern = rf"at most {limit}.*maxPerStageDescriptorStorageBuffers"
    with pytest.raises(GfxDeviceError, match=pattern):
        rt.pipeline(spirv("add_one"), limit + 1, 4)


def test_push_constant_limit(rt, spirv):
    limit = rt.caps.max_push_constants_size
    with pytest.raises(GfxDeviceError, match="maxPushConstantsSize"):
        rt.pipeline(spirv("add_one"), 1, limit + 4)


def test_work_group_count_limit(rt, spirv):
    add = rt.pipeline(spirv("add_one"), 1, 4)
    buf = rt.alloc(64)
    limit = rt.caps.max_compute_work_group_count
    with pytest.raises(GfxDeviceError, match="maxComputeWorkGroupCount"):
        rt.dispatch(add, [buf], (limit[0] + 1, 1, 1), u32(16))
    with pytest.raises(GfxDeviceError, match="maxComputeWorkGroupCount"):
        rt.dispatch(add, [buf], (1, 1, limit[2] + 1), u32(16))
    rt.dispatch(add, [buf], (1, 1, 1), u32(16))  # still usable
    assert buf.view(np.uint32)[0] == 1


def test_zero_groups_is_a_no_op(rt, spirv):
    add = rt.pipeline(spirv("add_one"), 1, 4)
    buf = rt.alloc(64)
    rt.dispatch(add, [buf], (0, 1, 1), u32(16))
    rt.flush()
    assert buf.view(np.uint32)[0] == 0


def test_argument_mismatch(rt, spirv):
    add = rt.pipeline(spirv("add_one"), 1, 4)
    buf = rt.alloc(64)
    with pytest.raises(ValueError, match="1 bindings"):
        rt.dispatch(add, [buf, buf], (1, 1, 1), u32(16))
    with pytest.raises(ValueError, match="push-constant"):
        rt.dispatch(add, [buf], (1, 1, 1), b"")
    with pytest.raises(ValueError, match="SPIR-V"):
        rt.pipeline(b"\x00" * 24, 1)


def test_buffer_beyond_storage_buffer_range(rt, spirv):
    limit = rt.caps.max_storage_buffer_range
    if limit >= rt.caps.max_memory_allocation_size:
        pytest.skip("device can allocate no buffer larger than maxStorageBufferRange")
    big = rt.alloc(limit + 16, zero=False)
    assert not big.bindable
    add = rt.pipeline(spirv("add_one"), 1, 4)
    with pytest.raises(GfxDeviceError, match=rf"maxStorageBufferRange = {limit} bytes"):
        rt.dispatch(add, [big], (1, 1, 1), u32(16))
    big.write(u32(41), offset=limit)  # host access still works
    assert big.read(limit, 4).view(np.uint32)[0] == 41
    tail = rt.window(big, limit - 240, 256)  # bound through a window: its last bytes too
    rt.dispatch(add, [tail], (1, 1, 1), u32(64))
    assert big.read(limit, 4).view(np.uint32)[0] == 42
    with pytest.raises(GfxDeviceError, match="maxStorageBufferRange"):
        rt.window(big, 0, limit + 16)
    big.free()
    with pytest.raises(GfxDeviceError, match="freed"):  # a window does not outlive free()
        rt.dispatch(add, [tail], (1, 1, 1), u32(64))


def test_windows_bind_byte_ranges(rt, spirv):
    """`rt.window`: bytes of a buffer bound as a buffer of their own (spirad binds a field
    larger than one binding as several): copy_add sees only its windows (its n is the
    destination window's arrayLength), so only dst's 8 words change."""
    buf = rt.alloc(4096)
    buf.write(np.arange(1024, dtype=np.uint32))
    src, dst = rt.window(buf, 256, 64), rt.window(buf, 2048, 32)
    cp = rt.pipeline(spirv("copy_add"), 2)
    rt.dispatch(cp, [src, dst], (1, 1, 1))
    want = np.arange(1024, dtype=np.uint32)
    want[512:520] = np.arange(64, 72) + 1
    np.testing.assert_array_equal(buf.read().view(np.uint32), want)
    align = rt.caps.min_storage_buffer_offset_alignment
    if align > 4:
        with pytest.raises(GfxDeviceError, match="minStorageBufferOffsetAlignment"):
            rt.window(buf, 4, 64)
    with pytest.raises(ValueError, match="outside"):
        rt.window(buf, 4096 - 256, 512)


def test_out_of_memory_then_usable(rt, spirv):
    with pytest.raises(GfxDeviceError, match=r"1099511627776 bytes"):
        rt.alloc(1 << 40)
    heap = max(rt._types.heap_sizes)
    if heap < rt.caps.max_memory_allocation_size:  # past the heap, but under the other limits
        with pytest.raises(GfxDeviceError, match="out of Vulkan device memory"):
            rt.alloc(heap + 16, zero=False)
    n = 64
    buf = rt.alloc(n * 4)
    add = rt.pipeline(spirv("add_one"), 1, 4)
    rt.dispatch(add, [buf], groups(n), u32(n))
    np.testing.assert_array_equal(buf.view(np.uint32), np.ones(n, np.uint32))


@pytest.mark.parametrize("nbytes", [0, 1, 3, 16, 17])
def test_tiny_buffers(rt, nbytes):
    buf = rt.alloc(nbytes)
    assert buf.nbytes == nbytes
    assert buf.read().nbytes == nbytes
    data = bytes(range(1, nbytes + 1))
    buf.write(data)
    assert buf.read().tobytes() == data


def test_read_write_offsets_and_dtypes(rt):
    buf = rt.alloc(64)
    buf.write(np.arange(4, dtype=np.float64), offset=8)
    np.testing.assert_array_equal(buf.view(np.float64, 4, offset=8), np.arange(4))
    assert buf.read(0, 8).tobytes() == bytes(8)
    with pytest.raises(ValueError, match="outside"):
        buf.write(bytes(8), offset=60)
    with pytest.raises(ValueError, match="outside"):
        buf.read(60, 8)


def test_view_is_zero_copy(rt, spirv):
    n = 128
    buf = rt.alloc(n * 4)
    assert buf.host_visible
    view = buf.view(np.uint32)
    view[:] = np.arange(n, dtype=np.uint32)  # writes the device memory directly
    add = rt.pipeline(spirv("add_one"), 1, 4)
    rt.dispatch(add, [buf], groups(n), u32(n))
    rt.flush()
    np.testing.assert_array_equal(view, np.arange(1, n + 1))


def test_staging_path(rt, spirv):
    n = 1000
    buf = rt.alloc(n * 4, host_visible=False)
    assert not buf.host_visible
    np.testing.assert_array_equal(buf.read().view(np.uint32), np.zeros(n, np.uint32))
    buf.write(np.arange(n, dtype=np.uint32))
    add = rt.pipeline(spirv("add_one"), 1, 4)
    for _ in range(3):
        rt.dispatch(add, [buf], groups(n), u32(n))
    np.testing.assert_array_equal(buf.read().view(np.uint32), np.arange(n) + 3)
    np.testing.assert_array_equal(buf.read(8, 8).view(np.uint32), [5, 6])
    with pytest.raises(GfxDeviceError, match="read\\(\\)/write\\(\\)"):
        buf.view(np.uint32)
    buf.fill_zero()
    assert not buf.read().any()


def test_staging_transfer_in_chunks(rt, monkeypatch):
    from gfx_runtime.vulkan import transfer
    monkeypatch.setattr(transfer, "STAGING_MIN", 4096)
    monkeypatch.setattr(transfer, "STAGING_CAP", 4096)
    data = np.random.default_rng(1).integers(0, 255, 10_000, dtype=np.uint8)
    buf = rt.alloc(data.nbytes, host_visible=False)
    buf.write(data)
    np.testing.assert_array_equal(buf.read(), data)


def test_free_then_reuse(rt, spirv):
    n = 64
    add = rt.pipeline(spirv("add_one"), 1, 4)
    for round_ in range(20):  # freed handles are recycled: descriptor sets must not go stale
        buf = rt.alloc(n * 4)
        rt.dispatch(add, [buf], groups(n), u32(n))
        rt.dispatch(add, [buf], groups(n), u32(n))
        np.testing.assert_array_equal(buf.view(np.uint32), np.full(n, 2, np.uint32))
        buf.free()
        buf.free()  # idempotent
    with pytest.raises(GfxDeviceError, match="freed"):
        rt.dispatch(add, [buf], groups(n), u32(n))
    with pytest.raises(GfxDeviceError, match="freed"):
        buf.read()


def test_free_waits_for_pending_work(rt, spirv):
    n = 64
    add = rt.pipeline(spirv("add_one"), 1, 4)
    buf = rt.alloc(n * 4)
    keep = rt.alloc(n * 4)
    rt.dispatch(add, [buf], groups(n), u32(n))
    rt.dispatch(add, [keep], groups(n), u32(n))
    buf.free()  # must not destroy a buffer the pending batch uses
    assert keep.view(np.uint32)[0] == 1


def test_garbage_collected_buffers_are_released(rt):
    before = len(rt._buffers)
    buf = rt.alloc(1024)
    view = buf.view(np.uint8)
    del buf
    gc.collect()
    rt.flush()
    rt.alloc(16).free()
    assert len(rt._buffers) == before + 1  # the view keeps the mapping alive
    view[:] = 3
    del view
    gc.collect()
    rt.alloc(16).free()  # an idle alloc releases what was collected
    assert len(rt._buffers) == before


def test_many_distinct_descriptor_sets(rt, spirv, monkeypatch):
    from gfx_runtime.vulkan import descriptors
    monkeypatch.setattr(descriptors, "RESET_AFTER_SETS", 64)
    add = rt.pipeline(spirv("add_one"), 1, 4)
    bufs = [rt.alloc(64) for _ in range(200)]
    for rep in range(3):
        for b in bufs:
            rt.dispatch(add, [b], (1, 1, 1), u32(16))
        rt.flush()
    for b in bufs:
        assert b.view(np.uint32)[0] == 3


def test_loose_argument_types(rt, spirv):
    add = rt.pipeline(spirv("add_one"), 1, 4)
    buf = rt.alloc(64)
    rt.dispatch(add, [buf], (np.int64(1), np.uint32(1), 1), bytearray(u32(16)))
    rt.dispatch(add, [buf], [1, 1, 1], memoryview(u32(16)))
    rt.dispatch(add, (buf,), np.array([1, 1, 1]), np.array([16], np.uint32).tobytes())
    assert buf.view(np.uint32)[0] == 3


@pytest.mark.parametrize("host_visible", [None, False])
def test_alloc_does_not_flush(rt, spirv, host_visible):
    n = 64
    add = rt.pipeline(spirv("add_one"), 1, 4)
    a = rt.alloc(n * 4, host_visible=host_visible)
    rt.dispatch(add, [a], groups(n), u32(n))
    assert rt._busy
    b = rt.alloc(n * 4, host_visible=host_visible)  # zeroing a new buffer needs no sync
    assert rt._busy
    rt.dispatch(add, [b], groups(n), u32(n))
    rt.dispatch(add, [a], groups(n), u32(n))
    np.testing.assert_array_equal(a.read().view(np.uint32), np.full(n, 2))
    np.testing.assert_array_equal(b.read().view(np.uint32), np.full(n, 1))


@pytest.mark.parametrize("batch", [4096, 5])
def test_argument_blocks_each_dispatch_sees_its_own(rt, spirv, monkeypatch, batch):
    """Argument blocks (`arguments=True`: binding 0 given as bytes per dispatch, placed in the
    frame's arena at a dynamic offset): 1,500 dispatches with distinct bytes and no flush in
    between each read their own, through arena growth, a full arena that moves on to the next
    frame, batches submitted every 5 dispatches, a block reused by identity, and another
    pipeline without arguments interleaved. axpy: y[i] += a * x[i], x = the block."""
    from gfx_runtime.vulkan import runtime as vkrt
    monkeypatch.setattr(vkrt, "FIRST_ARENA", 256)  # grows at the 5th block of a batch
    monkeypatch.setattr(vkrt, "MAX_ARENA", 1024)   # then fills: next frame, without a flush
    rt.max_batch = batch
    n = 4
    axpy = rt.pipeline(spirv("axpy"), 2, 8, arguments=True)
    add = rt.pipeline(spirv("add_one"), 1, 4)
    y, count = rt.alloc(4 * n), rt.alloc(4 * n)
    expect = np.zeros(n, np.float64)
    same = np.array([1, 2, 3, 4], np.float32).tobytes()
    for k in range(1500):
        block = same if k % 10 == 3 else np.array(
            [(k * (i + 3)) % 101 for i in range(n)], np.float32).tobytes()
        a = 1.0 if k % 2 else 2.0
        rt.dispatch(axpy, [block, y], (1, 1, 1), struct.pack("<fI", a, n))
        if k % 7 == 0:
            rt.dispatch(add, [count], (1, 1, 1), u32(n))
            rt.dispatch(axpy, [block, y], (1, 1, 1), struct.pack("<fI", a, n))  # same block
            expect += a * np.frombuffer(block, np.float32)
        expect += a * np.frombuffer(block, np.float32)
    np.testing.assert_array_equal(y.read().view(np.float32), expect.astype(np.float32))
    np.testing.assert_array_equal(count.read().view(np.uint32), np.full(n, 215, np.uint32))
    assert expect.max() < 2 ** 24  # every partial sum exact in float32


def test_argument_block_larger_than_the_arena(rt, spirv, monkeypatch):
    from gfx_runtime.vulkan import runtime as vkrt
    monkeypatch.setattr(vkrt, "FIRST_ARENA", 64)
    monkeypatch.setattr(vkrt, "MAX_ARENA", 64)
    n = 100
    axpy = rt.pipeline(spirv("axpy"), 2, 8, arguments=True)
    y = rt.alloc(4 * n)
    for k in range(3):
        rt.dispatch(axpy, [np.full(n, k + 1, np.float32).tobytes(), y], groups(n),
                    struct.pack("<fI", 1.0, n))
    np.testing.assert_array_equal(y.read().view(np.float32), np.full(n, 6, np.float32))


def test_argument_block_is_copied_at_dispatch(rt, spirv):
    """A bytearray block changed in place between dispatches: each reads what it was given."""
    n = 4
    axpy = rt.pipeline(spirv("axpy"), 2, 8, arguments=True)
    y = rt.alloc(4 * n)
    block = bytearray(4 * n)
    for k in range(3):
        block[:] = np.full(n, k + 1, np.float32).tobytes()
        rt.dispatch(axpy, [block, y], (1, 1, 1), struct.pack("<fI", 1.0, n))
    np.testing.assert_array_equal(y.read().view(np.float32), np.full(n, 6, np.float32))


def test_recording_replayed_with_changed_argument_blocks(rt, spirv):
    """`record` / `replay` (recording.py): a recording of dispatches with argument blocks and
    one without, replayed 40 times with no flush in between (two copies in flight), eager
    dispatches interleaved, blocks changed by identity at some replays: every dispatch reads
    the block of its replay, in submission order with the eager work; a dropped recording is
    destroyed at the next flush. axpy: y[i] += a * x[i], x = the block."""
    import gc
    n = 4
    axpy = rt.pipeline(spirv("axpy"), 2, 8, arguments=True)
    add = rt.pipeline(spirv("add_one"), 1, 4)
    y, count = rt.alloc(4 * n), rt.alloc(4 * n)
    ones = np.ones(n, np.float32).tobytes()
    rec = rt.record([(axpy, [0, y], (1, 1, 1), struct.pack("<fI", 2.0, n), None),
                     (add, [count], (1, 1, 1), u32(n), None),
                     (axpy, [1, y], (1, 1, 1), struct.pack("<fI", 1.0, n), None)],
                    [ones, ones])
    expect = np.zeros(n, np.float64)
    blocks = [ones, ones]
    for k in range(40):
        if k % 3 == 0:  # new blocks for the second dispatch of axpy
            blocks = [ones, np.array([k, k + 1, k + 2, k + 3], np.float32).tobytes()]
        rt.replay(rec, blocks)
        expect += 2.0 * np.frombuffer(blocks[0], np.float32)
        expect += np.frombuffer(blocks[1], np.float32)
        if k % 5 == 0:  # eager work between replays, in order
            rt.dispatch(axpy, [ones, y], (1, 1, 1), struct.pack("<fI", 1.0, n))
            expect += 1.0
    np.testing.assert_array_equal(y.read().view(np.float32), expect.astype(np.float32))
    np.testing.assert_array_equal(count.read().view(np.uint32), np.full(n, 40, np.uint32))
    with pytest.raises(ValueError, match="recorded with 16"):
        rt.replay(rec, [ones, b"\0" * 8])
    rt.flush()
    del rec
    gc.collect()
    assert rt._dropped  # destroyed once nothing of it is pending: at the next flush
    rt.dispatch(add, [count], (1, 1, 1), u32(n))
    rt.flush()
    assert not rt._dropped and not rt._recordings
