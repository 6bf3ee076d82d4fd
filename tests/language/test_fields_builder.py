"""`sd.FieldsBuilder` (Taichi's `ti.FieldsBuilder`): trees of fields usable after `finalize()` on
every arch, whose `destroy()` returns their memory; a destroyed or unfinalized tree's field is
refused with a clear error (spirad/data/fields_builder.py, docs/reliability.md)."""
from __future__ import annotations

import gc
import warnings
import weakref

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import test_archs


@test_archs()
def test_trees_and_root_fields_together(arch):
    x = sd.field(sd.f32, shape=5)           # the default root
    fb1 = sd.FieldsBuilder()
    y = sd.field(sd.f32)
    fb1.dense(sd.i, 5).place(y)
    fb1.finalize()
    fb2 = sd.FieldsBuilder()
    z = sd.field(sd.i32)
    w = sd.Vector.field(2, sd.f32)
    fb2.dense(sd.ij, (3, 4)).place(z)
    fb2.dense(sd.i, 5).place(w)
    fb2.finalize()

    @sd.kernel
    def fill():
        for i in range(5):
            x[i] = i * 1.0
            y[i] = i + 5.0
            w[i] = sd.Vector([i, -i])
        for i, j in z:
            z[i, j] = i * 10 + j

    fill()
    assert x.to_numpy().tolist() == [0, 1, 2, 3, 4]
    assert y.to_numpy().tolist() == [5, 6, 7, 8, 9]
    assert z.to_numpy().tolist() == [[i * 10 + j for j in range(4)] for i in range(3)]
    assert w.to_numpy()[:, 1].tolist() == [0, -1, -2, -3, -4]


@test_archs()
def test_destroyed_tree_refuses_its_fields_and_others_stay_right(arch):
    keep = sd.field(sd.f32, shape=8)
    fb = sd.FieldsBuilder()
    x = sd.field(sd.f32)
    fb.dense(sd.i, 8).place(x)
    tree = fb.finalize()
    fb2 = sd.FieldsBuilder()
    y = sd.field(sd.f32)
    fb2.dense(sd.i, 8).place(y)
    tree2 = fb2.finalize()

    @sd.kernel
    def k():
        for i in range(8):
            x[i] = i * 2.0
            keep[i] = i + 1.0

    @sd.kernel
    def k2():
        for i in range(8):
            y[i] = keep[i] * 3.0

    k()
    k2()
    assert x[7] == 14.0
    tree.destroy()
    with pytest.raises(sd.SpiradRuntimeError, match=r"field x was destroyed.*tree"):
        k()
    with pytest.raises(sd.SpiradRuntimeError, match="field x was destroyed"):
        x.to_numpy()
    with pytest.raises(sd.SpiradRuntimeError, match="has been destroyed"):
        tree.destroy()
    k2()  # other trees and the root are untouched
    assert y.to_numpy().tolist() == [3.0 * (i + 1) for i in range(8)]
    tree2.destroy()


@test_archs()
def test_unfinalized_builder_and_finalized_builder_refuse(arch):
    fb = sd.FieldsBuilder()
    x = sd.field(sd.f32)
    fb.dense(sd.i, 4).place(x)
    with pytest.raises(sd.SpiradRuntimeError, match="not finalized"):
        x[0] = 1.0
    assert not fb.empty
    fb.finalize()
    y = sd.field(sd.f32)
    with pytest.raises(sd.SpiradRuntimeError, match="FieldsBuilder finalized"):
        fb.dense(sd.i, 4).place(y)
    with pytest.raises(sd.SpiradRuntimeError, match="FieldsBuilder finalized"):
        fb.finalize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sd.FieldsBuilder().finalize()
    assert any("empty FieldsBuilder" in str(c.message) for c in caught)


@test_archs()
def test_new_tree_after_destroy_starts_zeroed(arch):
    fb = sd.FieldsBuilder()
    a = sd.field(sd.i32)
    fb.dense(sd.i, 1).place(a)
    t = fb.finalize()
    a[0] = 5
    t.destroy()
    fb = sd.FieldsBuilder()
    b = sd.field(sd.i32)
    fb.dense(sd.i, 1).place(b)
    fb.finalize()
    assert b[0] == 0


@test_archs()
def test_gradients_of_tree_fields(arch):
    """Taichi's place(x, x.grad) on builders: gradients live (and die) with their tree."""
    arr = sd.field(sd.f32, needs_grad=True)
    fb0 = sd.FieldsBuilder()
    fb0.dense(sd.i, 10).place(arr, arr.grad)
    t0 = fb0.finalize()
    out = sd.field(sd.f32)
    fb1 = sd.FieldsBuilder()
    fb1.dense(sd.i, 10).place(out, out.grad)
    fb1.finalize()
    loss = sd.field(sd.f32)
    fb2 = sd.FieldsBuilder()
    fb2.place(loss, loss.grad)
    fb2.finalize()

    @sd.kernel
    def mul():
        for i in arr:
            out[i] = arr[i] * 2.0

    @sd.kernel
    def total():
        for i in out:
            loss[None] += out[i]

    arr.fill(1.0)
    with sd.ad.Tape(loss=loss):
        mul()
        total()
    assert loss[None] == 20.0
    assert arr.grad.to_numpy().tolist() == [2.0] * 10
    t0.destroy()
    with pytest.raises(sd.SpiradRuntimeError, match="destroyed"):
        arr.grad.to_numpy()
    with sd.ad.Tape(loss=loss):  # the Tape no longer clears the destroyed gradients
        total()


def _backend_bytes():
    be = sd._state.backend()
    roots = getattr(be, "roots", None)
    return None if roots is None else (roots.nbytes(), sum(c is not None for c in roots.chunks))


@test_archs()
def test_destroy_returns_the_memory(arch):
    """Deterministic: after destroy the storages are gone (a weak reference to each dies) and
    on the SPIR-V backends the root chunks hold what they held before the tree."""
    @sd.kernel
    def inc(x: sd.template()):
        for i in x:
            x[i] += 1.0

    keep = sd.field(sd.f32, shape=4)
    inc(keep)
    sd.sync()
    before = _backend_bytes()
    refs = []
    for _ in range(5):
        fb = sd.FieldsBuilder()
        x = sd.field(sd.f32, needs_grad=True)
        fb.dense(sd.i, 20000).place(x)
        tree = fb.finalize()
        inc(x)
        assert x[19999] == 1.0
        for st in (x._storage(), x.grad._storage()):
            # SPIR-V: a slice of a root chunk of the tree's own; its buffer must go
            refs.append(weakref.ref(st.chunk.buffer if type(st).__name__ == "RootSlice" else st))
        del st
        tree.destroy()
    sd.sync()
    gc.collect()
    assert all(r() is None for r in refs)
    assert _backend_bytes() == before
    assert len([f for f in sd._state.current().fields if f.shape == (20000,)]) == 0
