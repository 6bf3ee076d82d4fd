"""A small program using spirad's public API, type-checked by mypy (and run) in
tests/package/test_typing.py; pytest does not collect it (the name does not start with test_).
Each `assert_type` states what a user's type checker must infer from spirad's annotations;
kernel parameters use `Annotated[<type for the checker>, <spirad annotation>]`."""
from __future__ import annotations

from typing import Annotated, assert_type

import numpy as np

import spirad as sd

sd.init(arch=sd.cpu, default_fp=sd.f64)

x = sd.field(dtype=sd.f64, shape=8, needs_grad=True)
loss = sd.field(dtype=sd.f64, shape=(), needs_grad=True)
a = sd.ndarray(sd.f64, (8,), needs_grad=True)
assert_type(x, sd.Field)
assert_type(a, sd.Ndarray)


# PEP 593: the type checker reads the first part, spirad the second
@sd.kernel
def compute(a: Annotated[sd.Ndarray, sd.types.ndarray()], n: Annotated[int, sd.i32]) -> None:
    for i in x:
        s = x[i]
        for _ in range(n):
            s = sd.sin(s) * a[i]
        loss[None] += s


x.from_numpy(np.linspace(0.0, 1.0, 8))
a.fill(0.5)
with sd.ad.Tape(loss=loss):
    compute(a, 3)
g: np.ndarray = x.grad.to_numpy()
values: np.ndarray = a.to_numpy()
b = sd.from_dlpack(np.zeros(4))
assert_type(b, sd.Ndarray)
compute.grad(a, 3)  # the adjoint launch, as the tape ran it
v = sd.Vector.field(3, sd.f32, shape=4)
assert_type(v, sd.Field)
m = sd.Matrix([[1.0, 0.0], [0.0, 1.0]])
tape = sd.ad.Tape()
assert_type(tape, sd.ad.Tape)
sd.sync()
version: str = sd.__version__
assert_type(compute, sd.Kernel)
assert values[0] == 0.5 and np.isfinite(g).all() and abs(float(g[4])) > 0.0
