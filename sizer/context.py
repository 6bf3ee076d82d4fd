"""The data a size expression reads at launch time.

Evaluators talk to launch data through a small protocol (``SizeContext``):

* ``scalar_arg(i) -> int | float`` -- scalar kernel argument ``i``;
* ``ndarray_shape(i, axis) -> int`` -- ``shape[axis]`` of ndarray argument ``i``;
* ``ndarray_read(i, indices)`` -- element(s) of ndarray argument ``i``;
* ``field_read(field_id, indices)`` -- element(s) of field ``field_id``.

``indices`` is a tuple with one entry per axis; each entry is either an int
or a 1-D int64 numpy array (all arrays of one call have the same length; ints
broadcast).  With array indices a read returns a numpy array of that length
(a gather); with int indices it returns a scalar.  A context must raise
``SizerError`` naming the leaf and the index for an out-of-range or negative
index, a wrong number of indices, or an unknown field / argument.  Values are
returned raw (float, int or bool); the evaluators convert them (truncation
toward zero, see :mod:`sizer.expr`).
"""

from __future__ import annotations

from typing import Mapping, Protocol

import numpy as np

from .errors import SizerError

__all__ = ["SizeContext", "DictContext"]


class SizeContext(Protocol):
    def scalar_arg(self, i: int): ...
    def ndarray_shape(self, i: int, axis: int) -> int: ...
    def ndarray_read(self, i: int, indices: tuple): ...
    def field_read(self, field_id: int, indices: tuple): ...


def _as_mapping(x) -> dict:
    if x is None:
        return {}
    if isinstance(x, Mapping):
        return dict(x)
    return dict(enumerate(x))


def _gather(arr: np.ndarray, indices: tuple, what: str):
    if len(indices) != arr.ndim:
        raise SizerError(f"{what}: {len(indices)} indices for an array of rank {arr.ndim}")
    scalar = True
    for axis, ix in enumerate(indices):
        n = arr.shape[axis]
        if isinstance(ix, np.ndarray):
            scalar = False
            if ix.size:
                lo, hi = int(ix.min()), int(ix.max())
                if lo < 0 or hi >= n:
                    bad = lo if lo < 0 else hi
                    raise SizerError(f"{what}: index {bad} out of range [0, {n}) on axis {axis}")
        else:
            i = int(ix)
            if not 0 <= i < n:
                raise SizerError(f"{what}: index {i} out of range [0, {n}) on axis {axis}")
    if scalar:
        return arr[tuple(int(i) for i in indices)].item()
    if arr.ndim == 1:
        return arr[indices[0]]
    idx = np.broadcast_arrays(*[np.asarray(i, dtype=np.int64) for i in indices])
    return arr[tuple(idx)]


class DictContext:
    """A ``SizeContext`` backed by plain containers (tests, CPU host eval).

    ``scalars``: mapping (or sequence) arg index -> number; ``ndarrays``:
    mapping arg index -> numpy array; ``fields``: mapping field id -> numpy
    array (a 0-d array for a scalar field); ``shapes``: optional mapping arg
    index -> shape tuple, for ndarrays whose shape is known but whose data is
    not (``ndarray_read`` of such an arg raises).
    """

    def __init__(self, scalars=None, ndarrays=None, fields=None, shapes=None):
        self.scalars = _as_mapping(scalars)
        self.ndarrays = {k: np.asarray(v) for k, v in _as_mapping(ndarrays).items()}
        self.fields = {k: np.asarray(v) for k, v in _as_mapping(fields).items()}
        self.shapes = {k: tuple(int(s) for s in v) for k, v in _as_mapping(shapes).items()}
        for k, v in self.ndarrays.items():
            self.shapes.setdefault(k, v.shape)

    def scalar_arg(self, i: int):
        try:
            return self.scalars[i]
        except KeyError:
            raise SizerError(f"ScalarArg({i}): no scalar argument {i}") from None

    def ndarray_shape(self, i: int, axis: int) -> int:
        shape = self.shapes.get(i)
        if shape is None:
            raise SizerError(f"NdarrayShape({i}, {axis}): no ndarray argument {i}")
        if not 0 <= axis < len(shape):
            raise SizerError(f"NdarrayShape({i}, {axis}): axis out of range for rank {len(shape)}")
        return shape[axis]

    def ndarray_read(self, i: int, indices: tuple):
        arr = self.ndarrays.get(i)
        if arr is None:
            raise SizerError(f"NdarrayRead({i}): no ndarray data for argument {i}")
        return _gather(arr, indices, f"NdarrayRead(arg {i})")

    def field_read(self, field_id: int, indices: tuple):
        arr = self.fields.get(field_id)
        if arr is None:
            raise SizerError(f"FieldLoad({field_id}): unknown field {field_id}")
        return _gather(arr, indices, f"FieldLoad(field {field_id})")

    def with_shapes_only(self) -> "DictContext":
        """A context exposing scalars and shapes but no array data."""
        return DictContext(self.scalars, None, None, self.shapes)

