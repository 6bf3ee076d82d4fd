"""The placement rules of argument blocks (`gfx_runtime.arena`), which both SPIR-V runtimes
follow: their arenas only say how the bytes are written. Host-only: no device is needed."""
import pytest

from gfx_runtime.arena import ArgumentArena, block_range


class Recorded(ArgumentArena):
    """An arena that keeps its bytes in a bytearray and counts the writes."""
    __slots__ = ("mem", "writes")

    def __init__(self, size, align):
        super().__init__(size, align)
        self.mem = bytearray(size)
        self.writes = []

    def _write(self, offset, data):
        self.writes.append(offset)
        self.mem[offset:offset + len(data)] = data


def test_block_range_is_whole_rows_at_least_one():
    assert [block_range(n) for n in (0, 1, 15, 16, 17, 32, 33, 100)] == \
        [16, 16, 16, 16, 32, 32, 48, 112]


@pytest.mark.parametrize("align", [16, 64, 256])
def test_blocks_follow_each_other_at_the_alignment(align):
    a = Recorded(4096, align)
    sizes = [4, 16, 17, 40, 0, align + 1]
    offsets = [a.place(bytes([k + 1]) * n) for k, n in enumerate(sizes)]
    expect, off = [], 0
    for n in sizes:
        expect.append(off)
        off = -(-(off + block_range(n)) // align) * align
    assert offsets == expect
    assert all(o % align == 0 for o in offsets)
    for k, (o, n) in enumerate(zip(offsets, sizes)):
        assert a.mem[o:o + n] == bytes([k + 1]) * n  # each block's bytes where it was placed
    assert a.last_range == block_range(sizes[-1]) and a.last_offset == offsets[-1]


def test_alignment_is_at_least_16_and_a_power_of_two():
    assert Recorded(256, 4).align == 16
    with pytest.raises(ValueError, match="power of two"):
        Recorded(256, 48)


def test_the_block_placed_last_is_placed_once_by_identity():
    a = Recorded(1024, 32)
    block = b"\1" * 24
    assert a.place(block) == 0
    assert a.place(block) == 0          # the same object: its offset again, not written
    assert a.writes == [0]
    equal = bytes(bytearray(block))     # equal bytes, another object: placed again
    assert equal is not block and a.place(equal) == 32
    assert a.place(block) == 64         # no longer the last one: placed again
    assert a.writes == [0, 32, 64]


def test_a_block_that_does_not_fit_is_not_placed():
    a = Recorded(64, 16)
    assert a.place(b"x" * 40) == 0      # takes 48 bytes
    before = (a.used, a.last, a.last_offset, a.last_range, list(a.writes))
    assert a.place(b"y" * 17) is None   # needs 32, 16 left
    assert (a.used, a.last, a.last_offset, a.last_range, a.writes) == before
    assert a.place(b"z" * 16) == 48     # exactly what is left
    assert a.place(b"w") is None


def test_reset_starts_over_and_forgets_the_last_block():
    a = Recorded(64, 16)
    block = b"a" * 16
    a.place(b"b" * 40)
    assert a.place(block) == 48
    a.reset()
    assert a.place(block) == 0          # written again: the arena's old contents are gone
    assert a.writes == [0, 48, 0]
    assert a.mem[:16] == block


def test_the_first_block_again_after_reset_is_not_rewritten():
    """A `launch; sync()` loop: each batch places the same argument bytes first. Offset 0
    still holds them (only a first block writes there), so nothing is written."""
    a = Recorded(256, 16)
    block = b"\3" * 20
    assert a.place(block) == 0 and a.place(b"\4" * 8) == 32
    a.reset()
    assert a.place(block) == 0 and a.writes == [0, 32]
    assert a.mem[:20] == block
    a.reset()
    assert a.place(b"\5" * 20) == 0    # another first block: offset 0 holds it now
    a.reset()
    assert a.place(block) == 0 and a.writes == [0, 32, 0, 0] and a.mem[:20] == block
    a.reset()
    assert a.place(b"\6" * 4) == 0     # `block` not first: written where it goes
    assert a.place(block) == 16 and a.writes == [0, 32, 0, 0, 0, 16]
    assert a.mem[16:36] == block
    equal = bytes(bytearray(b"\6" * 4))  # equal bytes, another object: written again
    a.reset()
    assert a.place(equal) == 0 and a.writes[-1] == 0 and len(a.writes) == 7


def test_a_block_larger_than_the_arena_never_fits():
    a = Recorded(64, 16)
    assert a.place(b"q" * 65) is None
    assert a.used == 0 and a.writes == []


def test_both_runtimes_place_blocks_with_these_rules():
    """The Vulkan and wgpu arenas only write the bytes (one definition of the placement)."""
    from gfx_runtime.vulkan.arguments import Arena
    from gfx_runtime.wgpu.runtime import StagedArena
    for cls in (Arena, StagedArena):
        assert issubclass(cls, ArgumentArena)
        assert cls.place is ArgumentArena.place and cls.reset is ArgumentArena.reset


def test_staged_arena_stages_the_bytes_on_the_host():
    from gfx_runtime.wgpu.runtime import StagedArena

    class FakeBuffer:
        nbytes = 128

    a = StagedArena(FakeBuffer(), 32)
    assert a.place(b"\7" * 20) == 0 and a.place(b"\x09" * 3) == 32
    assert a.staged[:20] == b"\7" * 20 and a.staged[32:35] == b"\x09" * 3 and a.used == 64
