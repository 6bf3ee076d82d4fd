"""llvm_codegen/cold_copy: a versioned loop's checked original is a cold function of its own.

The checked copy runs where the guard before a loop fails; it must still check, skip and report
every out-of-range access, and hand back the locals it stores (a sum, a count) as the inline
copy did. Each kernel runs in range (the guarded copy) and past the end (the checked copy) on
every arch (the CPU outlines; the emulated GPUs, Vulkan and Metal keep their code inline), and
the CPU's LLVM IR is checked for the cold function itself.
"""
from __future__ import annotations

import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradOutOfBoundsError
from tests.passes.test_bounds_versioning import _arr
from tests.support.archs import EVERY_ARCH, test_archs
from tests.support.driver_spy import cpu_compiles


@sd.kernel
def running(a: sd.types.ndarray(), b: sd.types.ndarray(), out: sd.types.ndarray(), n: sd.i32,
            scale: sd.f32):
    """Locals defined before the loop, stored in it and read after it; a `break`."""
    s = 0.0
    m = 0
    sd.loop_config(serialize=True)
    for i in range(n):
        s += b[i + 1] * scale        # n = len(b): b[n] read in the last iteration
        if b[i] > 100.0:
            break
        a[i] = s
        m += 1
    out[0] = s
    out[1] = sd.cast(m, sd.f32)


def _running_numpy(bv, n, scale, size):
    a, s, m = np.zeros(size, np.float32), np.float32(0), 0
    for i in range(n):
        s += np.float32(bv[i + 1] if i + 1 < len(bv) else 0) * np.float32(scale)
        if bv[i] > 100:
            break
        a[i] = s
        m += 1
    return a, [s, m]


@test_archs(EVERY_ARCH)
def test_locals_and_break_in_range_and_past_the_end(arch):
    sd.init(arch=arch)
    bv = np.array([1, 2, 3, 4, 500, 6], np.float32)
    for n, size in ((4, 5), (5, 5)):  # in range; the second breaks at b[4] = 500
        a, out = _arr(np.zeros(size)), _arr(np.zeros(2))
        running(a, _arr(bv), out, n, 0.5)
        sd.sync()
        wa, wo = _running_numpy(bv, n, 0.5, size)
        np.testing.assert_array_equal(a.to_numpy(), wa)
        np.testing.assert_array_equal(out.to_numpy(), wo)
    bv = np.array([1, 2, 3, 4, 5], np.float32)
    a, out = _arr(np.zeros(5)), _arr(np.zeros(2))
    running(a, _arr(bv), out, 5, 2.0)  # b[5] past the end: skipped (read as 0) and reported
    with pytest.raises(SpiradOutOfBoundsError, match="kernel running .*'b'"):
        sd.sync()
    wa, wo = _running_numpy(bv, 5, 2.0, 5)
    np.testing.assert_array_equal(a.to_numpy(), wa)
    np.testing.assert_array_equal(out.to_numpy(), wo)


@sd.kernel
def rows(a: sd.types.ndarray(), b: sd.types.ndarray(), n: sd.i32):
    """Genesis' environment loop made parallel (a range task whose body holds a loop): the
    body is versioned against the task index, its checked original outlined per iteration."""
    sd.loop_config(serialize=True)
    for i in range(n):
        for j in range(b.shape[0]):
            a[j, i] = b[j, i] * 2.0 + b[0, i]


@test_archs(EVERY_ARCH)
def test_task_body_in_range_and_past_the_end(arch):
    sd.init(arch=arch)
    bv = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = _arr(np.zeros((3, 4)))
    rows(a, _arr(bv), 4)
    sd.sync()
    np.testing.assert_array_equal(a.to_numpy(), bv * 2 + bv[0])
    a = _arr(np.zeros((3, 5)))
    rows(a, _arr(bv), 5)  # environment 4: b[j, 4] past the end, a[j, 4] written with 0s
    with pytest.raises(SpiradOutOfBoundsError, match="kernel rows .*'b'"):
        sd.sync()
    want = np.zeros((3, 5), np.float32)
    want[:, :4] = bv * 2 + bv[0]
    np.testing.assert_array_equal(a.to_numpy(), want)


def _llvm_ir(kernel, *args) -> str:
    ((_, code),) = cpu_compiles(kernel, *args)
    return code.llvm_ir


def _functions(ir: str) -> dict:
    """{function name: (its `define` line, its body)}."""
    out = {}
    for chunk in ir.split("\ndefine ")[1:]:
        head, _, body = chunk.partition("\n")
        name = head.split("@", 1)[1].split("(", 1)[0].strip('"')
        out[name] = (head, body.split("\n}", 1)[0])
    return out


@pytest.mark.parametrize("kernel", ["running", "rows"])
def test_checked_copy_is_a_cold_function(kernel):
    """The checked original is an internal `cold` function holding the loop's checks; the
    task function calls it and keeps only the unchecked copy's code (no check of `b`)."""
    sd.init(arch=sd.cpu, offline_cache=False)
    if kernel == "running":
        ir = _llvm_ir(running, _arr(np.zeros(5)), _arr(np.zeros(6)), _arr(np.zeros(2)), 5, 1.0)
    else:
        ir = _llvm_ir(rows, _arr(np.zeros((3, 4))), _arr(np.zeros((3, 4))), 4)
    fns = _functions(ir)
    cold = {k: v for k, v in fns.items() if ".checked." in k}
    assert len(cold) == 1, list(fns)
    (name, (head, body)), = cold.items()
    assert head.startswith("internal ") and "cold" in head and "noinline" in head, head
    assert body.count("@\"spirad.oob.fail\"") + body.count("@spirad.oob.fail") >= 3
    task = name.split(".checked.")[0]
    assert f"@\"{name}\"" in fns[task][1] or f"@{name}" in fns[task][1]


def _optimized(monkeypatch=None, light=None):
    """(checked copy's head with its attribute groups, its body, the task function's) in the
    CPU pipeline's optimised IR of `running`; `light`: `machine_code.LIGHT_PASSES` instead."""
    import re

    from llvm_codegen import machine_code
    from llvm_codegen.cpu_runtime import CpuRuntime
    if light is not None:
        monkeypatch.setattr(machine_code, "LIGHT_PASSES", light)
    sd.init(arch=sd.cpu, offline_cache=False)
    ir = _llvm_ir(running, _arr(np.zeros(5)), _arr(np.zeros(6)), _arr(np.zeros(2)), 5, 1.0)
    _, optimized = CpuRuntime(num_workers=1).compile_object(ir)
    fns = _functions(optimized)
    (name, (head, body)), = ((k, v) for k, v in fns.items() if ".checked." in k)
    groups = dict(re.findall(r"^attributes (#\d+) = \{([^}]*)\}", optimized, re.M))
    attrs = head + " " + " ".join(groups.get(g, "") for g in re.findall(r"#\d+", head))
    return attrs, body, fns[name.split(".checked.")[0]][1]


def test_checked_copy_gets_light_passes_and_minsize_code():
    """The CPU pipeline skips the checked copy (`optnone` while it runs), then gives it the
    light passes (its locals promoted: no `alloca` left) and `minsize optsize` for its machine
    code; the task function is optimised as before. What the kernel computes, in range and past
    the end: `test_locals_and_break_in_range_and_past_the_end`."""
    attrs, body, task = _optimized()
    assert "optnone" not in attrs and "minsize" in attrs and "optsize" in attrs, attrs
    assert "alloca" not in body and "oob.fail" in body
    assert "alloca" not in task


def test_the_pipeline_skips_the_checked_copy(monkeypatch):
    """Without the light passes the checked copy keeps its locals in memory: LLVM's
    optimisation pipeline (whose SROA promotes every task function's locals) never ran on it."""
    attrs, body, task = _optimized(monkeypatch, ())
    assert "alloca" in body and "alloca" not in task
    assert "optnone" not in attrs and "minsize" in attrs


def test_a_checked_copy_the_pipeline_deleted():
    """A checked copy whose call the pipeline proves dead (its guard folded to true) is deleted
    by it; the light passes skip it (Genesis' `kernel_substep_inequality` has such copies)."""
    from llvm_codegen.cpu_runtime import CpuRuntime
    ir = """
define internal void @"t.checked.1"(ptr %p) cold noinline nounwind {
  store i32 1, ptr %p
  ret void
}
define void @t(ptr %p, i32 %n) nounwind {
  %g = icmp sge i32 %n, %n
  br i1 %g, label %fast, label %slow
fast:
  store i32 2, ptr %p
  ret void
slow:
  call void @"t.checked.1"(ptr %p)
  ret void
}
"""
    _, optimized = CpuRuntime(num_workers=1).compile_object(ir)
    assert "checked.1" not in optimized and "store i32 2" in optimized
