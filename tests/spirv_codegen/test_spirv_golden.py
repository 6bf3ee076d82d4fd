"""Golden disassembly of small kernels: a change in the emitted SPIR-V shows up as a text diff.

Regenerate after an intended change with

    SPIRAD_UPDATE_GOLDEN=1 pytest tests/spirv_codegen/test_spirv_golden.py

and review the diff of tests/spirv_codegen/golden/*.spvasm (an updating run reports each case as
skipped, never as passed). A missing golden file fails. Every golden module is validated.
"""
from __future__ import annotations

import difflib
import os

import numpy as np
import pytest

import spv_kit as K
from kernel_ir.abi import kernel_abi
from spirv_codegen import SpirvCaps, compile_tasks, disassemble, validate

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
FULL = SpirvCaps(True, True, True, True, True, None, preserve_float_bits=(32, 64))
LAVAPIPE = SpirvCaps(True, True, False, True, False, 65535, preserve_float_bits=(32, 64))


def axpy():
    b = K.IRBuilder()
    i = K.index_node()
    X, Y = K.nd(1, K.f32, name="x"), K.nd(2, K.f32, name="y")
    v = b.binary(K.Op.ADD, b.binary(K.Op.MUL, b.arg(0, K.f32), b.global_load(X, [i])),
                 b.global_load(Y, [i]))
    b.global_store(Y, [i], v)
    args = (K.ArgSpec("a", "scalar", K.f32), K.ArgSpec("x", "ndarray", K.f32, 1),
            K.ArgSpec("y", "ndarray", K.f32, 1))
    return K.TaskList("axpy", args, (K.range_task(b.finish(), i, n_ref_arg=1, name="axpy"),))


def loop_break_continue():
    from test_spirv_control import loop_break_continue as k
    return k()[0]


def f64_sin():
    return K.elementwise(K.Op.SIN, (K.f64,), K.f64, [np.zeros(1)])[0]


def atomic_f32():
    from test_spirv_control import atomic_kernel
    return atomic_kernel(K.f32)[0]


def adstack_small():
    from test_spirv_adstack import golden_kernel
    return golden_kernel()


CASES = {"axpy": (axpy, FULL), "loop_break_continue": (loop_break_continue, LAVAPIPE),
         "f64_sin": (f64_sin, FULL), "atomic_add_f32": (atomic_f32, FULL),
         "atomic_add_f32_cas": (atomic_f32, SpirvCaps(True, True, False, False, False, 65535,
                                                       preserve_float_bits=(32, 64))),
         "adstack_small": (adstack_small, LAVAPIPE)}


@pytest.mark.parametrize("name", list(CASES))
def test_golden(name):
    build, caps = CASES[name]
    tl = build()
    (task,) = compile_tasks(tl, kernel_abi(tl), caps)
    validate(task.words)
    text = disassemble(task.words)
    path = os.path.join(GOLDEN, f"{name}.spvasm")
    if os.environ.get("SPIRAD_UPDATE_GOLDEN") == "1":
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        pytest.skip(f"golden file {name}.spvasm written (SPIRAD_UPDATE_GOLDEN=1): review its diff")
    if not os.path.exists(path):
        pytest.fail(f"missing golden file {path} (SPIRAD_UPDATE_GOLDEN=1 writes it)")
    with open(path) as f:
        want = f.read()
    if text != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True),
                                            f"golden/{name}.spvasm", "generated"))
        pytest.fail(f"SPIR-V of {name} changed (SPIRAD_UPDATE_GOLDEN=1 to accept):\n{diff}")


def test_deterministic():
    for name, (build, caps) in CASES.items():
        a = compile_tasks(build(), kernel_abi(build()), caps)[0].words
        b = compile_tasks(build(), kernel_abi(build()), caps)[0].words
        assert a == b, name


def test_missing_golden_file_fails(monkeypatch, tmp_path):
    monkeypatch.setitem(globals(), "GOLDEN", str(tmp_path))
    monkeypatch.delenv("SPIRAD_UPDATE_GOLDEN", raising=False)
    with pytest.raises(pytest.fail.Exception, match="missing golden file"):
        test_golden("axpy")
    assert not os.listdir(tmp_path), "a golden file was written without SPIRAD_UPDATE_GOLDEN=1"
