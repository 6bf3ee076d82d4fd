"""Fields (global arrays with a static shape) and their placement (`root.dense(...).place(...)`).

A field's memory is one buffer owned by the backend, allocated on first use. Element layout is C
order over `shape + comp_shape` (vector/matrix components last). `x.grad` is a field of the same
shape created by `needs_grad=True`. Every host write bumps `generation` (the adstack sizing cache
uses it to notice changed loop bounds).
"""
from __future__ import annotations

import numbers

import numpy as np

from . import guard as _guard
from . import state as _state
from kernel_ir.errors import SpiradTypeError, SpiradValueError
from kernel_ir import dtypes as T
from kernel_ir.nodes import GlobalRef
from .types import MatrixType, VectorType


def resolve_dtype(dtype) -> tuple[T.DType, tuple]:
    """(scalar dtype, component shape) of a user dtype: sd.f32, float, int, vector types."""
    st = _state.current()
    if isinstance(dtype, (VectorType, MatrixType)):
        base, _ = resolve_dtype(dtype.dtype)
        return base, dtype.comp_shape
    if isinstance(dtype, T.DType):
        return dtype, ()
    if dtype is float:
        return st.default_fp, ()
    if dtype is int:
        return st.default_ip, ()
    if dtype is bool:
        return T.u1, ()
    raise SpiradTypeError(f"unsupported dtype {dtype!r}; use sd.f32, sd.f64, sd.i32, sd.i64, sd.u32 or sd.u1")


def normalize_shape(shape) -> tuple:
    if shape is None:
        return None
    if isinstance(shape, numbers.Integral):
        shape = (int(shape),)
    try:
        shape = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise SpiradValueError(f"shape must be an int or a tuple of ints, got {shape!r}") from None
    if any(s < 0 for s in shape):
        raise SpiradValueError(f"shape {shape} has a negative extent")
    return shape


HOST_ELEMENT = [None]  # spirad.matrix.host_element (set there: matrix imports this module)


class _HostArray:
    """Shared host-side behaviour of fields and ndarrays: to/from numpy, fill, element access."""

    dtype: T.DType
    comp_shape: tuple

    @property
    def full_shape(self) -> tuple:
        return tuple(self.shape) + tuple(self.comp_shape)

    def _storage(self):
        raise NotImplementedError

    def _check_live(self):
        if self.epoch != _state.current().epoch:
            raise SpiradValueError(f"{self._kind} {self._label()} belongs to a previous sd.init(); "
                                   f"create it again after the last init()")

    def _label(self) -> str:
        return getattr(self, "name", "") or f"of shape {self.shape}"

    def _synced(self):
        """The backend, at a host read's sync point: pending work finished, kernel prints
        printed, failed asserts raised."""
        self._check_live()  # the memory of a previous init() may be gone with its backend
        be = _state.backend()
        with _guard.launching():
            be.sync()
        st = _state.current()
        if st.prints is not None and st.prints.dirty:  # a host read is a sync point: print
            from .printing import flush
            flush(st)
        if st.asserts is not None:  # a host read is a sync point: report failed asserts
            from .asserts import check
            check(st)
        return be

    def _view(self) -> np.ndarray:
        """A numpy view of the live memory (the backend has finished all pending work); on a
        device-memory backend (`host_views` False) a read-only copy."""
        return self._synced().view(self._storage(), self.dtype.np, self.full_shape)

    def _store(self, value, key=None):
        """Host write of `value` (already in the storage dtype) to element `key` (an index tuple
        from `_index`; None: every element). Through the live view where the backend has one;
        else one copy queued on the device's stream (no wait)."""
        be = _state.backend()
        if be.host_views:
            view = self._view()
            if key is None:
                view[...] = value
            else:
                view[key] = value
        else:
            self._check_live()
            shape, offset = self.full_shape, 0
            if key is not None:
                shape = self.comp_shape
                offset = self._element_offset(key)
            data = np.ascontiguousarray(np.broadcast_to(value, shape), dtype=self.dtype.np)
            be.write(self._storage(), data, offset)
        self._host_written()

    def _element_offset(self, key) -> int:
        """Byte offset of element `key` (components included) in the storage."""
        flat = int(np.ravel_multi_index(key, self.shape)) if self.shape else 0
        return flat * int(np.prod(self.comp_shape, dtype=np.int64)) * self.dtype.nbytes

    def _host_written(self):
        self.generation += 1

    @_guard.locked
    def to_numpy(self) -> np.ndarray:
        view = self._view()
        if _state.backend().host_views:
            out = np.array(view, copy=True)
        else:  # a fresh download: ours to hand out
            out = view
            out.flags.writeable = True
        return out.astype(bool) if self.dtype == T.u1 else out

    @_guard.locked
    def from_numpy(self, arr) -> None:
        arr = np.asarray(arr)
        if arr.shape != self.full_shape:
            raise SpiradValueError(f"from_numpy: array of shape {arr.shape} does not match "
                                   f"{self._kind} shape {self.full_shape}")
        if arr.dtype.kind not in "biuf":
            raise SpiradValueError(f"from_numpy: unsupported array dtype {arr.dtype}")
        if self.dtype.is_int and arr.dtype.kind in "iu" and arr.size:
            info = np.iinfo(self.dtype.np)
            lo, hi = arr.min(), arr.max()
            if lo < info.min or hi > info.max:
                raise SpiradValueError(f"from_numpy: values in [{lo}, {hi}] do not fit {self.dtype}")
        if self.dtype.is_int and arr.dtype.kind == "f":
            raise SpiradValueError(f"from_numpy: float array into {self.dtype} {self._kind}; "
                                   f"convert it explicitly with arr.astype(...)")
        self._store(self._to_storage(arr))

    def _to_storage(self, value):
        """`value` (scalar or array) converted to this array's element type; u1 becomes 0/1 and
        integers out of the dtype's range are an error (numpy would wrap them or overflow)."""
        if self.dtype == T.u1:
            return (np.asarray(value) != 0).astype(self.dtype.np)
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise SpiradValueError(f"cannot store {value!r} in a {self.dtype} {self._kind}")
        if self.dtype.is_int and arr.size:
            info = np.iinfo(self.dtype.np)
            lo, hi = arr.min(), arr.max()
            if not (np.isfinite(lo) and np.isfinite(hi)) or lo < info.min or hi > info.max:
                raise SpiradValueError(f"values in [{lo}, {hi}] do not fit {self.dtype}")
        return arr.astype(self.dtype.np)

    def copy_from(self, other) -> None:
        """Copy another field's / ndarray's values (same shape)."""
        self.from_numpy(other.to_numpy())

    def to_torch(self, device=None):
        """A torch tensor copy (needs torch installed)."""
        import torch
        t = torch.from_numpy(self.to_numpy())
        return t if device is None else t.to(device)

    def from_torch(self, tensor) -> None:
        self.from_numpy(tensor.detach().cpu().numpy())

    @_guard.locked
    def fill(self, value) -> None:
        self._store(self._to_storage(value))

    def _index(self, key):
        if key is None:
            key = ()
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) != len(self.shape):
            raise SpiradValueError(f"{self._kind} of shape {self.shape} needs {len(self.shape)} "
                                   f"indices, got {len(key)}")
        for k, n in zip(key, self.shape):
            if not isinstance(k, numbers.Integral) or not 0 <= k < n:
                raise SpiradValueError(f"index {key} out of range for shape {self.shape}")
        return tuple(int(k) for k in key)

    @_guard.locked
    def __getitem__(self, key):
        index = self._index(key)
        if _state.backend().host_views:
            v = self._view()[index]
        else:  # device memory: read this element only
            n = int(np.prod(self.comp_shape, dtype=np.int64)) * self.dtype.nbytes
            raw = self._synced().read(self._storage(), n, self._element_offset(index))
            v = raw.view(self.dtype.np).reshape(self.comp_shape)
            if not self.comp_shape:
                v = v[()]
        if self.comp_shape:  # a copy that writes through: `x[i][c] = v` changes x, as in Taichi
            return HOST_ELEMENT[0](self, index, v)
        return bool(v) if self.dtype == T.u1 else v.item()

    @_guard.locked
    def __setitem__(self, key, value):
        self._store(self._to_storage(value), self._index(key))


class Field(_HostArray):
    _kind = "field"

    def __init__(self, dtype, shape=None, needs_grad=False, name="", _is_grad=False,
                 needs_dual=False):
        self.dtype, self.comp_shape = resolve_dtype(dtype)
        st = _state.current()
        self.id = st.new_id()
        self.epoch = st.epoch
        self.name = name or f"field{self.id}"
        self.shape = normalize_shape(shape)
        self.generation = 0
        self._buf = None
        self._grad = None      # the gradient field, once the field has one
        self._pending = None   # unplaced float field: its not-yet-enabled `.grad` (see `grad`)
        self._primal = None    # a gradient field: the field it belongs to
        self._dtype_arg = dtype
        self.dual = None
        self._user = not _is_grad  # a user's field (gradient, dual and internal fields are not)
        if _is_grad:
            return  # a gradient / dual field is listed through its primal (state.field_map)
        if needs_grad:
            if not self.dtype.is_float:
                raise SpiradTypeError(f"needs_grad=True requires a float dtype, got {self.dtype}")
            self._add_grad()
        if needs_dual:
            if not self.dtype.is_float:
                raise SpiradTypeError(f"needs_dual=True requires a float dtype, got {self.dtype}")
            self._add_dual()
        st.fields.append(self)

    @property
    def grad(self):
        """The gradient field. As in Taichi every real field has one: until it is enabled
        (`needs_grad=True`, `place(x.grad)` — also in a later place() call —, `lazy_grad()`)
        it is an unplaced slot that kernels and host reads refuse; `needs_grad` tells which.
        None for integer fields and for gradient / internal fields."""
        if self._grad is not None:
            return self._grad
        if self.dtype.is_float and self._user:
            if self._pending is None:
                self._pending = Field(self._dtype_arg, None, name=self.name + ".grad", _is_grad=True)
                self._pending._primal = self
            self._pending.shape = self.shape
            return self._pending
        return None

    def _add_grad(self):
        """Give this field its gradient (`needs_grad=True`, `place(x.grad)`, `root.lazy_grad()`);
        kernels compiled before see it at their next launch (state.layout_version)."""
        g = self._pending or Field(self._dtype_arg, self.shape, name=self.name + ".grad",
                                   _is_grad=True)
        if g.epoch != _state.current().epoch:  # a stale slot of a previous init()
            g = Field(self._dtype_arg, self.shape, name=self.name + ".grad", _is_grad=True)
        g.shape = self.shape
        g._primal = self
        self._grad, self._pending = g, None
        _state.current().layout_version += 1

    def _add_dual(self):
        """Give this field its forward-mode dual (`needs_dual=True`, `root.lazy_dual()`)."""
        self.dual = Field(self.dtype if not self.comp_shape else _comp_type(self), self.shape,
                          name=self.name + ".dual", _is_grad=True)

    @property
    def needs_grad(self) -> bool:
        return self._grad is not None

    @property
    def n(self) -> int:
        """Rows of a vector / matrix field's elements (Taichi's MatrixField.n)."""
        if not self.comp_shape:
            raise AttributeError(f"field {self.name} has scalar elements: no .n")
        return self.comp_shape[0]

    @property
    def m(self) -> int:
        """Columns of a matrix field's elements; 1 for a vector field (Taichi's MatrixField.m)."""
        if not self.comp_shape:
            raise AttributeError(f"field {self.name} has scalar elements: no .m")
        return self.comp_shape[1] if len(self.comp_shape) == 2 else 1

    @property
    def needs_dual(self) -> bool:
        return self.dual is not None

    def _check_live(self):
        super()._check_live()
        if self._primal is not None and self._primal._grad is not self and self._primal.dual is not self:
            raise SpiradValueError(f"field {self._primal.name} has no gradient: create it with "
                                   f"needs_grad=True, place it (place(x, x.grad)) or call "
                                   f"sd.root.lazy_grad()")
        if self.shape is None:
            raise SpiradValueError(f"field {self.name} has no shape: pass shape= or place it "
                                   f"with sd.root.dense(...).place(...)")

    @_guard.locked
    def _storage(self):
        if self._buf is None:
            self._check_live()
            nbytes = int(np.prod(self.full_shape, dtype=np.int64)) * self.dtype.nbytes
            self._buf = _state.backend().allocate(nbytes)
        return self._buf

    def ref(self) -> GlobalRef:
        self._check_live()
        return GlobalRef("field", self.id, self.dtype, len(self.full_shape), self.full_shape,
                         self.name, False)

    def __repr__(self):
        return f"<spirad field {self.name} {self.dtype} shape={self.shape}>"


def internal_field(dtype, shape, name) -> Field:
    """A field spirad itself binds (kernel return values, print buffers): not listed among the
    user's fields (`state.fields`), so Tapes, FwdMode and lazy_grad / lazy_dual leave it alone."""
    return Field(dtype, shape, name=name, _is_grad=True)


def _comp_type(f):
    from .types import MatrixType, VectorType
    cs = f.comp_shape
    return VectorType(cs[0], f.dtype) if len(cs) == 1 else MatrixType(cs[0], cs[1], f.dtype)


def field(dtype, shape=None, needs_grad=False, name="", needs_dual=False, offset=None,
          order=None, layout=None) -> Field:
    if offset is not None:
        from kernel_ir.errors import SpiradNotSupportedError
        raise SpiradNotSupportedError("field(..., offset=) is not supported: index from 0 and add "
                                      "the offset in the kernel")
    return Field(dtype, shape, needs_grad, name, needs_dual=needs_dual)  # order / layout: C order


class Axis:
    """Axis labels of a layout: `sd.i` is axis 0, `sd.jk` axes 1 and 2, `sd.axes(0, 3)`."""

    def __init__(self, *dims):
        self.dims = tuple(int(d) for d in dims)

    def __repr__(self):
        return "sd." + ("".join("ijkl"[d] for d in self.dims) if all(d < 4 for d in self.dims)
                        else f"axes{self.dims}")


def axes(*dims) -> Axis:
    """Taichi's `ti.axes(0, 1)`: the axes with these numbers (`sd.ij` is `axes(0, 1)`)."""
    if not dims or any(not isinstance(d, numbers.Integral) or not 0 <= d < 8 for d in dims):
        raise SpiradValueError(f"axes() needs axis numbers in [0, 8), got {dims}")
    return Axis(*dims)


def _axis_dims(axes_) -> tuple:
    if isinstance(axes_, Axis):
        return axes_.dims
    if isinstance(axes_, (list, tuple)) and axes_ and all(isinstance(a, Axis) for a in axes_):
        return tuple(d for a in axes_ for d in a.dims)
    raise SpiradTypeError(f"dense() needs axis labels such as sd.i, sd.ij or sd.axes(0, 2), "
                          f"got {axes_!r}")


_SPARSE_HINT = ("spirad has dense layouts only; use sd.root.dense(...) (or a field with shape=) "
                "sized for the largest extent, and keep an element count or an active mask in "
                "another field")


class SNode:
    """Dense placement: `root.dense(sd.ij, (n, m)).place(x, y)` gives x and y shape (n, m).

    Placing a field fixes its shape; placing `x.grad` (or `place(x, needs_grad=True)`, or
    `root.lazy_grad()`) gives x its gradient, also after kernels using x were compiled."""

    def __init__(self, extents=()):
        self.extents = extents  # ((axis number, extent), ...) from the root down

    @property
    def shape(self) -> tuple:
        """The placed fields' shape: one dimension per axis used, in axis order (Taichi's: the
        index of `x[a, b]` follows the axis numbers, not the nesting order of `dense` calls);
        an axis split over several levels has the product of their extents."""
        sizes = {}
        for axis, n in self.extents:
            sizes[axis] = sizes.get(axis, 1) * n
        return tuple(sizes[a] for a in sorted(sizes))

    def dense(self, axes, shape) -> "SNode":
        dims = _axis_dims(axes)
        if len(set(dims)) != len(dims):
            raise SpiradValueError(f"dense(): an axis appears twice in {axes!r}")
        n = len(dims)
        if isinstance(shape, numbers.Integral):
            shape = (int(shape),) * n  # Taichi: dense(ti.ij, n) is n along every axis
        shape = normalize_shape(shape)
        if len(shape) != n:
            raise SpiradValueError(f"dense(): {n} axes but shape {shape}")
        return SNode(self.extents + tuple(zip(dims, shape)))

    def _sparse(self, what):
        from kernel_ir.errors import SpiradNotSupportedError
        raise SpiradNotSupportedError(f"root.{what}(...) (sparse SNodes) is not supported: "
                                      f"{_SPARSE_HINT}")

    def pointer(self, *a, **k):
        self._sparse("pointer")

    def bitmasked(self, *a, **k):
        self._sparse("bitmasked")

    def dynamic(self, *a, **k):
        self._sparse("dynamic")

    def hash(self, *a, **k):
        self._sparse("hash")

    def bit_struct(self, *a, **k):
        self._sparse("bit_struct")

    def place(self, *fields, needs_grad=False, offset=None) -> "SNode":
        if offset is not None:
            from kernel_ir.errors import SpiradNotSupportedError
            raise SpiradNotSupportedError("place(..., offset=) is not supported: index from 0 "
                                          "and add the offset in the kernel")
        for f in fields:
            if not isinstance(f, Field):
                raise SpiradTypeError(f"place() expects fields, got {type(f).__name__}")
            primal = f._primal
            if primal is not None and primal.dual is not f:  # x.grad: enable x's gradient
                if primal._grad is None:
                    if primal.shape is not None and primal.shape != self.shape:
                        raise SpiradValueError(f"{f.name} must be placed with the shape of "
                                               f"{primal.name}, {primal.shape}; got {self.shape}")
                    primal._add_grad()
                if primal.shape is None:
                    primal.shape = self.shape
                elif primal.shape != self.shape:
                    raise SpiradValueError(f"{f.name} must have the shape of {primal.name}, "
                                           f"{primal.shape}; got {self.shape}")
                f.shape = primal.shape
                continue
            if f.shape is not None and f.shape != self.shape:
                raise SpiradValueError(f"field {f.name} already has shape {f.shape}")
            f.shape = self.shape
            if needs_grad and f._grad is None:
                if not f.dtype.is_float:
                    raise SpiradTypeError(f"needs_grad=True requires a float dtype; field "
                                          f"{f.name} is {f.dtype}")
                f._add_grad()
            if f._grad is not None:
                f._grad.shape = self.shape
            if f._pending is not None:
                f._pending.shape = self.shape
            if f.dual is not None:
                f.dual.shape = self.shape
            _state.current().layout_version += 1
        return self

    def lazy_grad(self) -> None:
        """Give every float field that has none a gradient (Taichi's `root.lazy_grad()`)."""
        for f in _state.current().fields:
            if f._grad is None and f.dtype.is_float:
                f._add_grad()

    def lazy_dual(self) -> None:
        """Give every float field that has none a dual (Taichi's `root.lazy_dual()`)."""
        for f in _state.current().fields:
            if f.dual is None and f.dtype.is_float:
                f._add_dual()
        _state.current().layout_version += 1


root = SNode()
i, j, k, l = Axis(0), Axis(1), Axis(2), Axis(3)
ij, ijk, ijkl = Axis(0, 1), Axis(0, 1, 2), Axis(0, 1, 2, 3)
ik, il, jk, jl, kl = Axis(0, 2), Axis(0, 3), Axis(1, 2), Axis(1, 3), Axis(2, 3)
ijl, ikl, jkl = Axis(0, 1, 3), Axis(0, 2, 3), Axis(1, 2, 3)
