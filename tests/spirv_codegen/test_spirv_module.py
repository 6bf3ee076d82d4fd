"""Module builder, generated tables, validator wrapper, public API shapes (no GPU needed)."""
from __future__ import annotations

import dataclasses
import struct

import pytest

from spirv_codegen import SpirvCaps, SpirvTask, _tables as T, validate
from spirv_codegen.module import Module, encode_string, inst
from scripts import gen_spirv_tables as gen_tables
from spirv_codegen import validator as V


def test_tables_up_to_date():
    with open(gen_tables.OUT, encoding="utf-8") as f:
        assert f.read() == gen_tables.generate(), "rerun scripts/gen_spirv_tables.py"


def test_tables_content():
    assert T.OPCODES["OpFAdd"] == 129 and T.OPCODES["OpLoopMerge"] == 246
    assert T.CAPABILITY["Float64"] == 10 and T.STORAGE_CLASS["StorageBuffer"] == 12
    assert T.GLSL_STD_450["FMin"] == 37 and T.GLSL_STD_450["Atan2"] == 25
    assert T.BUILTIN["GlobalInvocationId"] == 28 and T.EXECUTION_MODE["LocalSize"] == 17
    assert T.MAGIC == 0x07230203


@pytest.mark.parametrize("s,words", [
    ("", [0]), ("abc", [0x00636261]), ("abcd", [0x64636261, 0]),
    ("main", [0x6E69616D, 0]), ("GLSL.std.450", [0x4C534C47, 0x6474732E, 0x3035342E, 0]),
])
def test_string_encoding(s, words):
    assert encode_string(s) == words


def test_inst_encoding():
    assert inst("OpReturn") == [(1 << 16) | 253]
    assert inst("OpTypeInt", 5, 32, 1) == [(4 << 16) | 21, 5, 32, 1]


def _minimal(m: Module) -> bytes:
    m.capability("Shader")
    m.memory_model()
    fn = m.function(m.t_void())
    fn.emit("OpReturn")
    m.entry_point("GLCompute", fn.id, "main")
    m.execution_mode(fn.id, "LocalSize", 1, 1, 1)
    return m.to_bytes()


def test_module_sections_and_dedupe():
    m = Module()
    # out-of-order construction still lands in layout order
    f = m.t_float(32)
    m.name(f, "f")
    assert m.t_float(32) == f and m.t_int(32, True) != m.t_int(32, False)
    assert m.const_float(32, 1.5) == m.const_float(32, 1.5)
    assert m.const_int(32, True, -1) == m.const_int(32, True, 0xFFFFFFFF)
    m.capability("Shader")
    words = _minimal(m)
    validate(words)
    w = struct.unpack(f"<{len(words) // 4}I", words)
    assert w[0] == T.MAGIC and w[1] == 0x00010300 and w[3] == m._bound


def test_validate_rejects_bad_module():
    m = Module()
    m.capability("Shader")
    m.memory_model()
    fn = m.function(m.t_void())
    fn.emit("OpReturn")  # no entry point -> valid for universal, but add a broken type ref
    m.add("globals", inst("OpTypePointer", m.id(), T.STORAGE_CLASS["Function"], 999))
    with pytest.raises(RuntimeError, match="SPIR-V validation failed"):
        validate(m.to_bytes())


def test_validator_backends_agree():
    m = Module()
    good = _minimal(m)
    V.validate(good)
    V._validate_subprocess(good, "vulkan1.1")
    assert V.backend() in ("library", "subprocess")


def test_public_dataclasses_frozen():
    assert dataclasses.is_dataclass(SpirvCaps) and dataclasses.is_dataclass(SpirvTask)
    c = SpirvCaps()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.has_f64 = True
    assert [f.name for f in dataclasses.fields(SpirvTask)] == [
        "name", "kind", "words", "num_bindings", "push_constant_bytes", "local_size", "adstacks",
        "adstack_kinds", "device_range", "uniform_bindings", "readonly_bindings", "spec_words"]
