"""Assigning an element of a Python list in a kernel (`verts[1] = verts[2]`), as Taichi's
implicit_fem example does under a run-time `if`: each run-time element of a list the kernel
binds to a name is a local of its own (frontend/list_elements.py)."""
import numpy as np
import pytest

import spirad as sd
from tests.support.archs import EVERY_ARCH, exactly, test_archs


@test_archs(archs=EVERY_ARCH)
def test_swap_list_elements_under_a_run_time_if(arch):
    F = sd.Vector.field(4, sd.i32, shape=3)
    out = sd.field(sd.i32, shape=(3, 3))
    F.from_numpy(np.array([[10, 11, 12, 13], [20, 21, 22, 23], [30, 31, 32, 33]], np.int32))

    @sd.kernel
    def k():
        for c in F:
            verts = [F[c][(1 + j) % 4] for j in range(3)]
            if c != 1:  # run-time: swap for rows 0 and 2 only
                tmp = verts[1]
                verts[1] = verts[2]
                verts[2] = tmp
            for q in sd.static(range(3)):
                out[c, q] = verts[q]

    k()
    assert out.to_numpy().tolist() == [[11, 13, 12], [21, 22, 23], [31, 33, 32]]
    assert F.to_numpy()[0].tolist() == [10, 11, 12, 13]  # the field is not written


@test_archs(archs=exactly("cpu"))
def test_list_elements_are_copies(arch):
    x = sd.field(sd.i32, shape=2)

    @sd.kernel
    def k():
        a = x[0] + 1
        verts = [a, x[1], 7]
        verts[0] = 5       # changes the element, not `a`
        verts[2] = 9       # a compile-time element: Python's assignment
        verts[1] += verts[2]
        x[0] = a * 100 + verts[0]
        x[1] = verts[1]

    x.from_numpy(np.array([1, 2], np.int32))
    k()
    assert x.to_numpy().tolist() == [205, 11]


def test_list_element_errors():
    sd.init(arch="cpu")
    x = sd.field(sd.i32, shape=2)

    @sd.kernel
    def run_time_index(i: sd.i32):
        verts = [x[0], x[1]]
        verts[i] = 1

    @sd.kernel
    def out_of_range():
        verts = [x[0], x[1]]
        verts[2] = 1

    with pytest.raises(sd.TaichiSyntaxError, match="index known at compile time") as e:
        run_time_index(0)
    assert "verts[i] = 1" in str(e.value)
    with pytest.raises(sd.TaichiSyntaxError, match="list index 2 out of range"):
        out_of_range()


@test_archs(archs=EVERY_ARCH)
def test_python_scope_vectors_in_a_list_indexed_in_a_kernel(arch):
    x = sd.Vector.field(3, sd.i32, shape=(16, 16))
    offsets = [sd.Vector([1, 2]), sd.Vector([2, 3])]  # Python-scope values

    @sd.kernel
    def k():
        vec = sd.Vector([4, 5])
        x[vec + sd.static(offsets)[0]] = [100, 10, 1]
        w = sd.Vector([0, 1])
        w += offsets[1]
        x[w] = [1, 10, 100]
        x[sd.select(sd.Vector([0, 1]), sd.Vector([0, 1]), sd.static(offsets)[0])] = [7, 7, 7]

    k()
    assert x[5, 7].tolist() == [100, 10, 1]
    assert x[2, 4].tolist() == [1, 10, 100]
    assert x[1, 1].tolist() == [7, 7, 7]
