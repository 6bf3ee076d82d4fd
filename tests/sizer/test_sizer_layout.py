import pytest

from sizer import SizerError, compute_layout


def test_mixed_layout():
    lay = compute_layout([3, 5, 2], [4, 8, 4], ["float", "int", "float"])
    # counters: 3 x 8 bytes at the start of the int heap
    assert lay.counter_offsets == (0, 8, 16)
    # float stack 0: primal 12 -> 16 bytes, adjoint 16 bytes; stack 2 follows
    assert lay.offsets == (0, 24, 32)
    assert lay.adjoint_offsets == (16, -1, 40)
    assert lay.stride_float == 48
    assert lay.stride_int == 24 + 40
    assert lay.metadata() == [48, 64, 0, 3, 24, 5, 32, 2]
    assert lay.heap_bytes(10) == (480, 640)


def test_primal_stacks_have_no_adjoint_half():
    """'primal': a float stack whose adjoints live in registers (reverse mode's stack-tops pass)
    takes one region of the float row."""
    lay = compute_layout([3, 5, 2], [4, 8, 8], ["primal", "int", "float"])
    assert lay.offsets == (0, 24, 16)
    assert lay.adjoint_offsets == (-1, -1, 32)
    assert lay.stride_float == 16 + 2 * 16
    assert lay.metadata() == [48, 64, 0, 3, 24, 5, 16, 2]
    assert compute_layout([7], [8], ["primal"]).stride_float == 56


def test_empty_and_zero_capacity():
    lay = compute_layout([], [], [])
    assert (lay.stride_float, lay.stride_int) == (0, 0)
    lay = compute_layout([0], [8], ["float"])
    assert (lay.stride_float, lay.stride_int, lay.offsets) == (0, 8, (0,))


def test_alignment_and_disjointness():
    caps, sizes = [1, 7, 3, 0, 5], [4, 4, 8, 4, 1]
    kinds = ["float", "int", "primal", "int", "int"]
    lay = compute_layout(caps, sizes, kinds)
    assert lay.stride_float % 8 == 0 and lay.stride_int % 8 == 0
    regions = {"float": [], "primal": [], "int": [(0, 8 * len(caps))]}
    for k in range(len(caps)):
        assert lay.offsets[k] % 8 == 0
        n = caps[k] * sizes[k]
        regions[kinds[k]].append((lay.offsets[k], lay.offsets[k] + n))
        if kinds[k] == "float":
            regions["float"].append((lay.adjoint_offsets[k], lay.adjoint_offsets[k] + n))
    regions["float"] += regions.pop("primal")  # both live in the float row
    for kind, stride in (("float", lay.stride_float), ("int", lay.stride_int)):
        rs = sorted(regions[kind])
        for (a0, a1), (b0, _) in zip(rs, rs[1:]):
            assert a1 <= b0
        assert all(hi <= stride for _, hi in rs)


@pytest.mark.parametrize("args", [
    ([1], [4], ["double"]), ([-1], [4], ["int"]), ([1], [0], ["int"]),
    ([1, 2], [4], ["int"]), ([1.5], [4], ["int"]),
])
def test_bad_layout_input(args):
    with pytest.raises(SizerError):
        compute_layout(*args)


def test_from_metadata_decodes_every_layout():
    """`Layout.from_metadata` (the GPU sizer's words -> Layout) gives back what
    `compute_layout` computed, adjoint and counter offsets included."""
    import random
    from sizer import Layout
    rng = random.Random(5)
    for _ in range(300):
        n = rng.randint(0, 6)
        caps = [rng.choice([0, 1, 3, 17, 1000, 2**20]) for _ in range(n)]
        sizes = [rng.choice([1, 4, 8]) for _ in range(n)]
        kinds = [rng.choice(["float", "primal", "int"]) for _ in range(n)]
        lay = compute_layout(caps, sizes, kinds)
        assert Layout.from_metadata(lay.metadata(), sizes, kinds) == lay


@pytest.mark.parametrize("words,sizes,kinds", [
    ([48, 64, 0, 3], [4, 8], ["float", "int"]),          # too few words
    ([48, 24, 4, 3], [4], ["float"]),                    # offset not 8-aligned
    ([32, 8, 0, 3, 8, 2], [4, 4], ["float", "float"]),   # stack 1 overlaps stack 0's adjoints
    ([16, 8, 0, 3], [4], ["float"]),                     # the adjoint half leaves the row
    ([0, 16, 0, 1], [8], ["int"]),                       # an int stack on its counter
    ([0, 20, 8, 1], [8], ["int"]),                       # stride not a multiple of 8
    ([0, 0, 0, 0], [4], ["float"]),                      # no room for the counter
    ([8, 8, 0, 1], [4], ["double"]),                     # unknown kind
    ([8, 8, 0, -1], [4], ["primal"]),                    # negative capacity
])
def test_from_metadata_rejects_invalid_words(words, sizes, kinds):
    from sizer import Layout
    with pytest.raises(SizerError):
        Layout.from_metadata(words, sizes, kinds)
