"""The wire formats shared by host and device are defined once, in `kernel_ir/abi.py` (engineering 15:
a constant written twice will drift, and a wrong status code is a silently missing error):

- no other module (packages, tests, benchmarks, scripts) assigns a name of those formats —
  status codes and words, push constants, range arguments, argument-slot formats, the LLVM
  extra buffers;
- no module spells their struct formats or packs the argument buffer itself;
- the formats agree with what they describe (sizes, word order, alignment).

(The GPU sizer's own wire format is `sizer/device_format.py`, its one definition.)
"""
import ast
import struct

from kernel_ir import abi
from tests.architecture.import_graph import ROOT

OWNER = ROOT / "kernel_ir" / "abi.py"
SIZER_FORMAT = ROOT / "sizer" / "device_format.py"

def _assigned(tree):
    """(line, name) of every name a statement binds directly (not subscripts / attributes)."""
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        for t in targets:
            for n in ([t] if isinstance(t, ast.Name) else
                      t.elts if isinstance(t, (ast.Tuple, ast.List)) else []):
                if isinstance(n, ast.Name):
                    yield node.lineno, n.id


NAMES = {n for _, n in _assigned(ast.parse(OWNER.read_text())) if n.isupper()} | {
    "STATUS_TICKET_WORD", "ADSTACK_EXTRA_BUFFERS"}  # (old names of these formats)
BINDINGS = {"STATUS_BINDING"}  # SPIR-V binding numbers: spirv_codegen/buffers.py's
FORMATS = {abi.PUSH_CONSTANT_FORMAT, *abi.SCALAR_FORMAT.values()} - {"<I", "<i", "<f", "<d", "<q",
                                                                     "<Q"}
DIRS = ("spirad", "kernel_ir", "passes", "sizer", "spirv_codegen", "llvm_codegen", "gfx_runtime", "shaders",
        "tests", "benchmarks", "scripts", "examples")


def _files():
    for d in DIRS:
        for p in sorted((ROOT / d).rglob("*.py")):
            if p not in (OWNER, SIZER_FORMAT):
                yield p


def test_wire_format_names_are_assigned_only_in_kernel_ir_abi():
    bad = [f"{p.relative_to(ROOT)}:{line}: {name}" for p in _files()
           for line, name in _assigned(ast.parse(p.read_text(encoding="utf-8")))
           if name in NAMES or (name.startswith("STATUS_") and name not in BINDINGS)]
    assert not bad, "import these from kernel_ir.abi instead of defining them:\n" + "\n".join(bad)


def test_struct_formats_of_the_wire_are_spelled_only_in_kernel_ir_abi():
    bad = [f"{p.relative_to(ROOT)}: {f!r}" for p in _files()
           for f in FORMATS if repr(f) in p.read_text(encoding="utf-8")]
    assert not bad, f"use kernel_ir.abi (pack_push_constants, PUSH_CONSTANT_FORMAT): {bad}"


def test_the_formats_agree_with_their_descriptions():
    assert abi.PUSH_CONSTANT_BYTES == struct.calcsize(abi.PUSH_CONSTANT_FORMAT) == 12
    assert [n for n, _ in abi.PUSH_CONSTANTS] == ["begin", "end", "threads_per_row"]
    assert abi.STATUS_WORDS == len(abi.StatusWord) and abi.STATUS_BYTES % 8 == 0
    assert abi.STATUS_BYTES >= 4 * abi.STATUS_WORDS
    assert len({abi.STATUS_OK, abi.STATUS_ADSTACK_OVERFLOW, abi.STATUS_LOOP_CAP,
                abi.STATUS_INDEX_OUT_OF_RANGE}) == 4 and abi.STATUS_OK == 0
    assert abi.RANGE_ARGS_WORDS == len(abi.RangeArg) and abi.RangeArg.GROUPS_X == 0
    assert len(abi.LLVM_EXTRA_BUFFERS) == 4 and abi.LLVM_EXTRA_BUFFERS[abi.LLVM_STATUS] == "status"
    for fmt in abi.SCALAR_FORMAT.values():
        assert struct.calcsize(fmt) <= abi.ARG_SLOT_BYTES


def test_status_words_decode():
    w = [0] * abi.STATUS_WORDS
    w[abi.StatusWord.CODE] = abi.STATUS_INDEX_OUT_OF_RANGE
    w[abi.StatusWord.TASK], w[abi.StatusWord.AUX], w[abi.StatusWord.AXIS] = 2, 5, 1
    w[abi.StatusWord.VALUE_LO], w[abi.StatusWord.VALUE_HI] = 0xFFFFFFFF, 0xFFFFFFFF  # -1
    w[abi.StatusWord.EXTENT], w[abi.StatusWord.SITE] = 7, 3
    st = abi.decode_status(w)
    assert (st.code, st.task, st.binding, st.value, st.axis, st.extent, st.site) == \
        (abi.STATUS_INDEX_OUT_OF_RANGE, 2, 5, -1, 1, 7, 3)


def test_argument_buffer_round_trip():
    from kernel_ir import dtypes as T
    from kernel_ir.nodes import ArgSpec, TaskList
    args = (ArgSpec("a", "scalar", T.f32), ArgSpec("x", "ndarray", T.f32, 2),
            ArgSpec("n", "scalar", T.i64), ArgSpec("b", "scalar", T.u1))
    a = abi.kernel_abi(TaskList("k", args, ()))
    buf = a.pack_args(args, [1.5, None, -3, True], lambda arg, ax: (4, 9)[ax])
    assert len(buf) == a.arg_buffer_size
    scalars, shapes = a.unpack_args(args, bytes(buf))
    assert scalars == [1.5, None, -3, 1] and shapes == {1: {0: 4, 1: 9}}


def test_the_spirv_argument_tail_is_packed_only_in_kernel_ir_abi():
    """The root / arena offset words after a SPIR-V program's arguments: written and read
    through `pack_offset_words`, `patch_offset_words` and `offset_word` alone."""
    name = "OFFSET_" + "WORD_FORMAT"  # (spelled apart: this file is searched too)
    bad = [str(p.relative_to(ROOT)) for p in _files() if name in p.read_text(encoding="utf-8")]
    assert not bad, f"use kernel_ir.abi's offset-word functions: {bad}"
    tail = abi.pack_offset_words([3, 0, 70000])
    assert len(tail) == 12 and [abi.offset_word(tail, i) for i in range(3)] == [3, 0, 70000]
    patched = abi.patch_offset_words(tail, [(4, 9)])
    assert [abi.offset_word(patched, i) for i in range(3)] == [3, 9, 70000]
    assert abi.offset_word(tail, 1) == 0  # the program's own tail is not changed
