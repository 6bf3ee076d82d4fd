"""Local matrices indexed at run time are arrays in memory in CPU scalar tasks
(`llvm_codegen.local_arrays`): the select chains and per-component write selects of the
frontend become one indexed load / store, with the same results, out-of-range indices
included (a read past an axis reads the last candidate, a write past it writes nothing)."""
import numpy as np
import pytest

import spirad as sd
from tests.support.driver_spy import recorded_cpu_code


def _gather(rows, picks):
    """Genesis' `_func_multicontact_gather` in small: rows of a 5x3 local written at the
    run-time row `n` in a loop, then read back at run-time rows and columns."""
    n_rows = rows.shape[0]
    src = sd.field(sd.f32, shape=(n_rows, 3))
    keep = sd.field(sd.i32, shape=n_rows)
    pick = sd.field(sd.i32, shape=(len(picks), 2))
    out = sd.field(sd.f32, shape=(len(picks) + 2,))
    src.from_numpy(rows)
    keep.from_numpy((np.arange(n_rows) % 3 != 1).astype(np.int32))
    pick.from_numpy(np.array(picks, np.int32))

    @sd.kernel
    def k():
        for _ in range(1):
            m = sd.Matrix.zero(sd.f32, 5, 3)
            n = 0
            for i in range(n_rows):
                if keep[i]:
                    for c in sd.static(range(3)):
                        m[n, c] = src[i, c]
                    n += 1
            for j in range(len(picks)):
                out[j] = m[pick[j, 0], pick[j, 1]]
            col = pick[0, 1]
            m[1, col] = -1.0  # a column write at a run-time column
            out[len(picks)] = m[1, 0] + m[1, 1] * 2.0 + m[1, 2] * 4.0
            out[len(picks) + 1] = m[n, 2]  # n may be past the last row
    k()
    return out.to_numpy()


def _expected_in_range(rows, picks):
    """out[j] for the picks inside the matrix (numpy)."""
    m = np.zeros((5, 3), np.float32)
    n = 0
    for i in range(rows.shape[0]):
        if i % 3 != 1 and n < 5:
            m[n, :] = rows[i]
            n += 1
    return {j: m[r, c] for j, (r, c) in enumerate(picks) if 0 <= r < 5 and 0 <= c < 3}


@pytest.mark.parametrize("n_rows", [6, 9])  # 4 rows kept, or 6: one past the matrix
def test_gather_matches_numpy_and_uses_an_array(monkeypatch, n_rows):
    """Bit-identical to the node-by-node lowering (the plan emptied), out-of-range rows and
    columns included; the picks inside the matrix as numpy says."""
    from llvm_codegen import local_arrays
    rng = np.random.default_rng(n_rows)
    rows = rng.uniform(-3, 3, (n_rows, 3)).astype(np.float32)
    picks = [(0, 1), (3, 2), (2, 0), (7, 1), (-1, 0), (4, 5), (1, -2), (0, 14), (5, 0)]
    progs = recorded_cpu_code(monkeypatch)
    sd.init(arch=sd.cpu, offline_cache=False)
    got = _gather(rows, picks)
    assert "local.array" in "\n".join(p.llvm_ir for p in progs)  # the 5x3 local: one array
    for j, v in _expected_in_range(rows, picks).items():
        assert got[j] == v, j
    monkeypatch.setattr(local_arrays, "plan", lambda task: local_arrays.Plan())
    del progs[:]
    sd.init(arch=sd.cpu, offline_cache=False)
    want = _gather(rows, picks)
    assert "local.array" not in "\n".join(p.llvm_ir for p in progs)
    np.testing.assert_array_equal(got, want)


def test_plan_finds_reads_and_writes():
    from kernel_ir.builder import IRBuilder
    from kernel_ir.dtypes import f32, i32
    from kernel_ir.nodes import Task
    from kernel_ir.ops import Op
    from llvm_codegen import local_arrays

    b = IRBuilder()
    slots = [b.alloca(f32) for _ in range(4)]
    f = b.arg(0, i32)
    v = b.const(2.5, f32)
    for p, a in enumerate(slots):  # m[f] = v
        hit = b.binary(Op.CMP_EQ, f, b.const(p, i32))
        b.store(a, b.select(hit, v, b.load(a)))
    loads = [b.load(a) for a in slots]  # m[f]
    acc = loads[-1]
    for p in range(2, -1, -1):
        acc = b.select(b.binary(Op.CMP_EQ, f, b.const(p, i32)), loads[p], acc)
    plan = local_arrays.plan(Task("serial", b.finish(), name="s"))
    assert len(plan.reads) == 1 and len(plan.writes) == 1 and len(plan.skip) == 3
    assert sorted(plan.position[a][1] for a in slots) == [0, 1, 2, 3]
