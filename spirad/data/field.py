"""Fields (global arrays with a static shape) and their placement (`root.dense(...).place(...)`).

A field's memory is a storage owned by the backend (`allocate_field`: a buffer of its own, or a
slice of a shared root buffer on the SPIR-V backends), allocated on first use. Element layout is
Taichi's for the SNode tree the field is placed on (`snode_layout`): C order over `shape +
comp_shape` (vector/matrix components last) for every field whose levels name its axes in order
(`shape=`, `dense(ij, ...)`), hierarchy order for the others, components apart for
`layout=SOA`. `x.grad` is a field of the same shape created by `needs_grad=True`. Every host
write bumps `generation` (the adstack sizing cache uses it to notice changed loop bounds).
"""
from __future__ import annotations

import itertools
import numbers
import re
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from ..runtime import guard as _guard
from ..runtime import state as _state
from ..runtime import write_marks as _write_marks
from kernel_ir.errors import (SpiradBoundsError, SpiradGradDtypeError, SpiradIndexError,
                              SpiradNotSupportedError,
                              SpiradShapeError, SpiradSyntaxError, SpiradTypeError,
                              SpiradValueError)
from kernel_ir import dtypes as T
from kernel_ir.nodes import GlobalRef
from .tensor_surface import TensorSurface
from ..tracebacks import api, api_class
from ..types import MatrixType, VectorType
from .matrix_members import ComponentField, place_component


def resolve_dtype(dtype) -> tuple[T.DType, tuple]:
    """(scalar dtype, component shape) of a user dtype: sd.f32, float, int, vector types."""
    st = _state.current()
    if isinstance(dtype, (VectorType, MatrixType)):
        base, _ = resolve_dtype(dtype.dtype)
        return base, dtype.comp_shape
    dtype = T.from_python(dtype, st.default_fp, st.default_ip)
    if isinstance(dtype, T.DType):
        return dtype, ()
    raise SpiradTypeError(f"unsupported dtype {dtype!r}; use sd.f32, sd.f64, sd.i32, sd.i64, sd.u32 or sd.u1")


NDARRAY_MAX_ELEMENTS = 2**31 - 1  # ndarray extents are 32-bit words of the argument buffer


def check_elements(shape, comp_shape, what: str, ndarray: bool = False) -> None:
    """Refuse, when it is created, an array more elements than the backend indexes (fields:
    `Backend.max_elements`, 64-bit on the CPU; ndarrays: 2**31-1 everywhere)."""
    if shape is None:
        return
    n = int(np.prod(tuple(shape) + tuple(comp_shape), dtype=object))
    if n <= 2**31 - 1:
        return
    if ndarray:
        raise SpiradShapeError(f"{tuple(shape)} is not a valid shape for ndarray: it has {n:,} elements; an sd.ndarray "
                               f"holds at most {NDARRAY_MAX_ELEMENTS:,} (its extents are 32-bit "
                               f"words of the argument buffer): use a field (the CPU indexes "
                               f"fields in 64 bits) or split the array")
    be = _state.backend()
    if n > be.max_elements:
        raise SpiradValueError(f"{what} of shape {tuple(shape)} has {n:,} elements; the {be.name} "
                               f"backend indexes at most {be.max_elements:,} elements per field "
                               f"(32-bit indices): split it into several fields, or use "
                               f"arch=sd.cpu, which indexes in 64 bits")


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


HOST_ELEMENT = [None]  # spirad.data.matrix.host_element (set there: matrix imports this module)
def _grad_dtype_error(dtype, name=None) -> SpiradGradDtypeError:
    """A gradient (or dual) of a non-float field: Taichi's text, spirad's reason."""
    of = f" ({name})" if name else ""
    return SpiradGradDtypeError(f"{dtype}{of} is not supported for field with `needs_grad=True` "
                                f"or `needs_dual=True`: gradients need a float dtype")


class _QuantHooks:
    """spirad.data.quant's entry points, set there: quant imports this module (and matrix), so
    field and matrix reach quantized fields through these names instead of an import circle."""
    quant_field = quant_vector_field = place_bitpacked = QuantArray = None


QUANT = _QuantHooks()


_NAMES: dict = {}  # (code object, instruction offset) -> the assigned name, or None
_TARGET = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)\s*(?::[^=]*)?=\s*$")


def creation_name() -> str | None:
    """The Python variable a field is being created for: `x` in `x = sd.field(...)`, the
    attribute name in `self.x = sd.Vector.field(...)` (data-oriented classes), else None.

    Errors then speak of `x`, not of an internal number. Read from the user's call site (the
    innermost frame outside spirad): the source text before the call's column must be one
    assignment target. Python 3.11+ knows the column of the running call; older versions give
    no name."""
    from ..tracebacks import internal_file
    import sys
    f = sys._getframe(1)
    while f is not None and internal_file(f.f_code.co_filename):
        f = f.f_back
    if f is None or not hasattr(f.f_code, "co_positions"):
        return None
    key = (f.f_code, f.f_lasti)
    if key in _NAMES:
        return _NAMES[key]
    name = None
    pos = next(itertools.islice(f.f_code.co_positions(), f.f_lasti // 2, None), None)
    if pos is not None and pos[0] is not None and pos[2] is not None:
        import linecache
        line = linecache.getline(f.f_code.co_filename, pos[0], f.f_globals)
        m = _TARGET.match(line[:pos[2]])
        name = m.group(1) if m else None
    if len(_NAMES) < 4096:
        _NAMES[key] = name
    return name


@api_class
class _HostArray(TensorSurface):
    """Shared host-side behaviour of fields and ndarrays: to/from numpy, fill, element access
    (and Quadrants' tensor methods: spirad.data.tensor_surface.TensorSurface)."""

    dtype: T.DType
    comp_shape: tuple

    if TYPE_CHECKING:  # for type checkers only: no iteration on the host
        def __iter__(self) -> Iterator[Any]:
            """`for i in x:` in a kernel, the parallel loop over x's indices (the frontend
            lowers it; declared so that type checkers accept it)."""

    @property
    def full_shape(self) -> tuple:
        """`shape` followed by the element shape of vector / matrix elements."""
        return tuple(self.shape) + tuple(self.comp_shape)

    @property
    def generation(self) -> int:
        """The write generation: changes whenever the data may have been written (a host write,
        a launch whose program may write it); the adstack sizing cache keys on it. Launches mark
        what they may write and the marks are counted here, when read
        (`spirad.runtime.write_marks`)."""
        if _write_marks.PENDING:
            _write_marks.flush()
        return self._generation

    @generation.setter
    def generation(self, value: int) -> None:
        self._generation = value

    def _storage(self):
        raise NotImplementedError

    def _check_live(self):
        if self.epoch != _state.current().epoch:
            raise SpiradValueError(f"{self._kind} {self._label()} belongs to a previous sd.init(); "
                                   f"create it again after the last init()")

    def _label(self) -> str:
        return getattr(self, "name", "") or f"of shape {self.shape}"

    @staticmethod
    def _materialized():
        """Run the materialize hook first when fields were declared since it last ran, as a
        launch does: Taichi's and Quadrants' host accessors (element reads and writes,
        to_numpy / from_numpy / fill) materialize before they touch memory, so deferred work
        registered there (Genesis fills fresh constant fields in it) is done before the value
        is read, not only before the next kernel launch."""
        if not _state.current().materialized:
            from ..runtime.program_hooks import materialize_if_needed
            materialize_if_needed()

    def _synced(self):
        """The backend, at a host read's sync point: pending work finished, kernel prints
        printed, failed asserts raised."""
        self._check_live()  # the memory of a previous init() may be gone with its backend
        self._materialized()
        be = _state.backend()
        with _guard.launching():
            be.sync()
        st = _state.current()
        if st.prints is not None and st.prints.dirty:  # a host read is a sync point: print
            from ..printing import flush
            flush(st)
        if st.asserts is not None:  # a host read is a sync point: report failed asserts
            from ..runtime.asserts import check
            check(st)
        return be

    def _view(self) -> np.ndarray:
        """A numpy view of the live memory (the backend has finished all pending work); on a
        device-memory backend (`host_views` False) a read-only copy. A field in Taichi's
        hierarchical layout (`_perm`): a copy in index order."""
        perm = self._perm()
        if perm is not None:
            return self._flat_view()[perm]
        return self._synced().view(self._storage(), self.dtype.np, self.full_shape)

    def _flat_view(self) -> np.ndarray:
        """The live memory (as `_view`) as one axis, in storage order."""
        return self._synced().view(self._storage(), self.dtype.np,
                                   (int(np.prod(self.full_shape, dtype=np.int64)),))

    def _components_apart(self) -> bool:
        """Are an element's components apart in storage (Taichi's Layout.SOA)?"""
        return False

    def _perm(self):
        """The storage element of each element (`spirad.data.snode_layout.Layout.permutation`)
        where the storage is not C order, else None."""
        return None

    def _store(self, value, key=None):
        """Host write of `value` (already in the storage dtype) to element `key` (an index tuple
        from `_index`; None: every element). Through the live view where the backend has one;
        else one copy queued on the device's stream (no wait)."""
        be = _state.backend()
        perm = self._perm()
        if be.host_views and perm is not None:  # Taichi's layout: through the permutation
            flat = self._flat_view()  # _synced: the materialize hook first
            flat[perm if key is None else perm[key]] = value
        elif be.host_views:
            view = self._view()  # _synced: the materialize hook first
            if key is None:
                view[...] = value
            else:
                view[key] = value
        else:
            self._check_live()
            self._materialized()
            shape, offset = self.full_shape, 0
            if key is not None:
                shape = self.comp_shape
                offset = self._element_offset(key)
            data = np.ascontiguousarray(np.broadcast_to(value, shape), dtype=self.dtype.np)
            if perm is not None and key is None:  # into storage order
                data, ordered = np.empty(data.size, self.dtype.np), data
                data[perm.ravel()] = ordered.ravel()
            if perm is not None and key is not None and self._components_apart():
                for elem, v in zip(np.ravel(perm[key]), data.ravel()):  # SOA: one by one
                    be.write(self._storage(), v.reshape(1), int(elem) * self.dtype.nbytes)
            else:
                be.write(self._storage(), data, offset)
        self._host_written()

    def _element_offset(self, key) -> int:
        """Byte offset of element `key` (components included) in the storage."""
        perm = self._perm()
        if perm is not None:  # the first component (the others follow it unless SOA)
            return int(np.asarray(perm[key]).flat[0]) * self.dtype.nbytes
        flat = int(np.ravel_multi_index(key, self.shape)) if self.shape else 0
        return flat * int(np.prod(self.comp_shape, dtype=np.int64)) * self.dtype.nbytes

    def _host_written(self):
        self.generation += 1

    @_guard.locked
    def to_numpy(self, dtype=None, *, copy=True) -> np.ndarray:
        """A numpy copy of the values (waits for pending launches); `dtype`: converted."""
        view = self._view()
        if _state.backend().host_views:
            out = np.array(view, copy=True)
        else:  # a fresh download: ours to hand out
            out = view
            out.flags.writeable = True
        out = out.astype(bool) if self.dtype == T.u1 else out
        return out if dtype is None else out.astype(dtype)

    @_guard.locked
    def from_numpy(self, arr) -> None:
        """Copy `arr` (same shape, a numeric dtype that fits) into the array."""
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
            # an unsigned type also takes the negative values of its width, wrapped (two's
            # complement, as its literals: `b[0] = -128` stores 128 in a u8, as in Taichi), and
            # a signed type the unsigned ones (`a[0] = 0xFFFF` stores -1 in an i16, as Taichi's
            # struct fields do); a value wider than the type is an error, never wrapped
            low = -(int(info.max) + 1) // 2 if info.min == 0 else int(info.min)
            high = int(info.max) if info.min == 0 else 2 * int(info.max) + 1
            if not (np.isfinite(lo) and np.isfinite(hi)) or lo < low or hi > high:
                raise SpiradValueError(f"values in [{lo}, {hi}] do not fit {self.dtype}")
            if lo < 0 and info.min == 0:
                return arr.astype(np.int64).astype(self.dtype.np)
            if hi > info.max and arr.dtype.kind in "iu":  # the bit pattern, read as signed
                wide = arr.astype(np.uint64 if arr.dtype.kind == "u" else np.int64)
                return wide.astype(f"u{np.dtype(self.dtype.np).itemsize}").view(self.dtype.np)
        return arr.astype(self.dtype.np)

    def copy_from(self, other) -> None:
        """Copy another field's / ndarray's values (same shape)."""
        if not isinstance(other, _HostArray):  # Taichi's TypeError: numpy goes to from_numpy
            raise SpiradTypeError(f"copy_from takes a field or an ndarray, got "
                                  f"{type(other).__name__}; use from_numpy / from_torch")
        self.from_numpy(other.to_numpy())

    def to_torch(self, device=None, *, copy=True):
        """A torch tensor copy (needs torch installed). `copy=False` (Quadrants): the live memory
        itself where it is host memory (stays valid: CPU launches are synchronous; u1 elements
        are their 0/1 int32 words), TypeError where that is impossible (device memory);
        `copy=None`: zero-copy when possible (u1: a bool copy)."""
        import torch
        if copy is not True and (device is None or str(device) == "cpu"):
            view = self._zero_copy_view(words_for_bools=copy is False)
            if view is not None:
                return torch.from_numpy(view)
            if copy is False:
                raise TypeError(f"{self._kind} {self._label()} lives in device memory: it cannot "
                                f"be shared without a copy; pass copy=True")
        t = torch.from_numpy(self.to_numpy())
        return t if device is None else t.to(device)

    def from_torch(self, tensor) -> None:
        """Copy a torch tensor's values (same shape) into the array."""
        self.from_numpy(tensor.detach().cpu().numpy())

    @_guard.locked
    def fill(self, value) -> None:
        """Set every element to `value`."""
        self._store(self._to_storage(value))

    @property
    def n(self) -> int:
        """Rows of a vector / matrix element (Taichi's MatrixField.n, Vector/MatrixNdarray.n)."""
        if not self.comp_shape:
            raise AttributeError(f"{self._kind} {self._label()} has scalar elements: no .n")
        return self.comp_shape[0]

    @property
    def m(self) -> int:
        """Columns of a matrix element (Taichi's MatrixField.m, MatrixNdarray.m); 1 for a vector
        field. A vector ndarray has none (Taichi's VectorNdarray has only `n`)."""
        if not self.comp_shape or (len(self.comp_shape) == 1 and self._kind == "ndarray"):
            raise AttributeError(f"{self._kind} {self._label()} has "
                                 f"{'vector' if self.comp_shape else 'scalar'} elements: no .m")
        return self.comp_shape[1] if len(self.comp_shape) == 2 else 1

    def _index_offset(self) -> tuple:
        """The index of the first element along each axis (a field's `offset=`; zeros here)."""
        return (0,) * len(self.shape)

    def _index(self, key):
        """The storage index (from 0) of the user's index `key` (offset fields: shifted)."""
        if key is None:
            key = ()
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) != len(self.shape):  # Taichi's texts (a field's: an AssertionError too)
            named = f"{self._kind} {getattr(self, 'name', '') or ''}".rstrip()
            need = f"{named} of shape {self.shape} needs {len(self.shape)} indices, got {len(key)}"
            if self._kind == "field":
                raise SpiradBoundsError(f"Slicing is not supported on ti.field: {need}")
            raise SpiradIndexError(f"{len(self.shape)}d ndarray indexed with {len(key)}d "
                                   f"indices: {key}: {need}")
        offset = self._index_offset()
        for k, n, o in zip(key, self.shape, offset):
            if not isinstance(k, numbers.Integral):
                taichi = f"Detected illegal element of type: {type(k).__name__}. Please be " \
                         f"aware that slicing a ti.field is not supported so far. " \
                    if isinstance(k, slice) else ""
                raise SpiradTypeError(f"{taichi}{self._kind} {self._label()} is indexed with "
                                      f"integers, got {k!r} ({type(k).__name__})")
            if not o <= k < o + n:
                where = f" of shape {self.shape}" + (f" and offset {offset}" if any(offset) else "")
                raise SpiradBoundsError(f"index {key} is out of range for {self._kind} "
                                       f"{self._label()}{where}")
        return tuple(int(k) - o for k, o in zip(key, offset))

    @_guard.locked
    def __getitem__(self, key):
        """The element at `key` (a tuple of ints): a Python number, or for vector / matrix
        elements a copy that writes through (`x[i][c] = v` changes x, as in Taichi)."""
        index = self._index(key)
        perm = self._perm()
        if _state.backend().host_views and perm is not None:
            v = self._flat_view()[perm[index]]
        elif _state.backend().host_views:
            v = self._view()[index]
        elif perm is not None and self._components_apart():  # device memory, SOA: each one
            be = self._synced()
            v = np.array([be.read(self._storage(), self.dtype.nbytes,
                                  int(e) * self.dtype.nbytes).view(self.dtype.np)[0]
                          for e in np.ravel(perm[index])]).reshape(self.comp_shape)
        else:  # device memory: read this element only
            n = int(np.prod(self.comp_shape, dtype=np.int64)) * self.dtype.nbytes
            raw = self._synced().read(self._storage(), n, self._element_offset(index))
            v = raw.view(self.dtype.np).reshape(self.comp_shape)
            if not self.comp_shape:
                v = v[()]
        if self.comp_shape:  # a copy that writes through: `x[i][c] = v` changes x, as in Taichi
            user = tuple(k + o for k, o in zip(index, self._index_offset()))  # x[user] = ...
            return HOST_ELEMENT[0](self, user, v)
        return bool(v) if self.dtype == T.u1 else v.item()

    @_guard.locked
    def __setitem__(self, key, value):
        """Set the element at `key` to `value`."""
        self._store(self._to_storage(value), self._index(key))


_ORDER = itertools.count()  # creation / placement order of fields and SNodes


@api_class
class Field(_HostArray):
    """A global array with a static shape, created by `sd.field` / `sd.Vector.field` / placement.
    Read and write it in kernels (`x[i]`) and from Python (`x[i]`, `to_numpy`, `from_numpy`,
    `fill`); `x.grad` is its gradient field."""
    _kind = "field"

    def __init__(self, dtype, shape=None, needs_grad=False, name="", _is_grad=False,
                 needs_dual=False, offset=None):
        self.dtype, self.comp_shape = resolve_dtype(dtype)
        self._order = next(_ORDER)  # creation order (spirad.data.snode_bytes)
        self._tree_id = _state.current().snode_trees  # Taichi's SNode tree (`_snode_tree_id`)
        self._offset = check_offset(shape, offset)  # None: from 0 (or set when placed)
        st = _state.current()
        self.id = st.new_id()
        self.epoch = st.epoch
        self.name = name or (not _is_grad and creation_name()) or f"field{self.id}"
        self.shape = normalize_shape(shape)
        check_elements(self.shape, self.comp_shape, f"field {self.name}")
        self.generation = 0
        self._buf = None
        self._grad = None      # the gradient field, once the field has one
        self._pending = None   # unplaced float field: its not-yet-enabled `.grad` (see `grad`)
        self._primal = None    # a gradient field: the field it belongs to
        self._dtype_arg = dtype
        self._dual = None          # the forward-mode dual field, once the field has one
        self._dual_pending = None  # float field: its not-yet-enabled `.dual` (see `dual`)
        self._dual_of = None       # a dual field (enabled or not): the field it belongs to
        self._user = not _is_grad  # a user's field (gradient, dual and internal fields are not)
        self._tree = None  # the FieldsBuilder tree it is placed in (spirad.data.fields_builder)
        self._snode = None  # the SNode it is placed on (place()); None: its own dense node
        self._soa = False   # components apart (Taichi's Layout.SOA: spirad.data.snode_layout)
        self._members = None  # components placed apart: {component: (SNode, order)} (matrix_members)
        if _is_grad:
            return  # a gradient / dual field is listed through its primal (state.field_map)
        if needs_grad:
            if not self.dtype.is_float:
                raise _grad_dtype_error(self.dtype)
            self._add_grad()
        if needs_dual:
            if not self.dtype.is_float:
                raise _grad_dtype_error(self.dtype)
            self._add_dual()
        st.fields.append(self)
        st.materialized = False  # the materialize hook runs before the next launch (spirad.runtime.program_hooks)

    @property
    def snode(self):
        """The SNode of this field's cells (Taichi's `x.snode`): `x.snode.parent()` is the node
        it was placed on (`x.parent()`)."""
        from .field import SNode
        owner = self._primal or self._dual_of or self
        node = owner._snode or SNode(tuple((k, n) for k, n in enumerate(self.shape or ())))
        cells = SNode(node.extents, node.sparse, node)
        cells._name = self.name  # Taichi's `x.snode._name`: the field's name
        cells._field = owner
        return cells

    @property
    def _name(self) -> str:
        """Taichi's `x._name`: the field's name."""
        return self.name

    def __iter__(self):
        """`for i in x:` is the parallel loop over x's indices in kernels only; in Python scope
        it would read elements until one is out of range (Taichi refuses it too)."""
        raise SpiradNotSupportedError(f"Struct for is only available in Taichi scope: `for i in "
                                      f"{self.name}:` runs in kernels; in Python use "
                                      f"np.ndindex({self.name}.shape) or {self.name}.to_numpy()")

    def parent(self, n: int = 1):
        """The node `n` levels above the field's cells: 1 is the node it was placed on."""
        return self.snode.parent(n)

    @_guard.locked
    def fill(self, value) -> None:
        """Set every element to `value` (below a sparse node: every active one, as Taichi)."""
        from .sparse_layout import host_fill, is_sparse_primal
        if is_sparse_primal(self):
            host_fill(self, value, lambda arr: _HostArray.from_numpy(self, arr))
        else:
            _HostArray.fill(self, value)

    def _column_shape(self, keep_dims: bool):
        """Taichi's host shape of an n x 1 matrix / n-vector field: `shape + (n,)`, or with
        `keep_dims=True` `shape + (n, 1)` (a vector is an n x 1 matrix there); None for the
        other fields, whose host shape is `full_shape`."""
        cs = tuple(self.comp_shape)
        if len(cs) == 1 or len(cs) == 2 and cs[1] == 1:
            return tuple(self.shape) + ((cs[0], 1) if keep_dims else (cs[0],))
        return None

    def to_numpy(self, dtype=None, *, copy=True, keep_dims=False) -> np.ndarray:
        """A numpy copy of the values. As Taichi's, an n x 1 matrix field gives `shape + (n,)`
        unless `keep_dims=True`, which gives every vector / matrix field `shape + (n, m)`."""
        out = _HostArray.to_numpy(self, dtype, copy=copy)
        cols = self._column_shape(keep_dims)
        return out if cols is None else out.reshape(cols)

    def to_torch(self, device=None, *, copy=True, keep_dims=False):
        """A torch tensor of the values (`copy` as in `_HostArray.to_torch`; `keep_dims` as in
        `to_numpy`)."""
        t = _HostArray.to_torch(self, device, copy=copy)
        cols = self._column_shape(keep_dims)
        return t if cols is None else t.reshape(cols)

    @_guard.locked
    def from_numpy(self, arr) -> None:
        """Copy `arr` into the field (below a sparse node: every cell becomes active). An n x 1
        matrix / n-vector field takes `shape + (n,)` and `shape + (n, 1)` alike, as Taichi's (a
        vector field also `shape + (1, n)`: the same values in C order)."""
        arr = np.asarray(arr)
        cols = self._column_shape(False)
        if cols is not None and (arr.shape in (cols, self._column_shape(True)) or len(
                self.comp_shape) == 1 and arr.shape == tuple(self.shape) + (1, cols[-1])):
            arr = arr.reshape(self.full_shape)
        _HostArray.from_numpy(self, arr)
        from .sparse_layout import activate_everything, is_sparse_primal
        if is_sparse_primal(self):
            activate_everything(self)

    @_guard.locked
    def __setitem__(self, key, value):
        """Set the element at `key` to `value` (activating it under a sparse node)."""
        index = self._index(key)
        self._store(self._to_storage(value), index)
        from .sparse_layout import host_activate, levels_of
        if levels_of(self):
            host_activate(self, index)

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

    @property
    def dual(self):
        """The forward-mode dual field. As in Taichi every real field has one: until it is
        enabled (`needs_dual=True`, `place(x.dual)` — also in a later place() call —,
        `lazy_dual()`) it is an unplaced slot that kernels and host reads refuse; `needs_dual`
        tells which. None for integer fields and for gradient / internal fields."""
        if self._dual is not None:
            return self._dual
        if self.dtype.is_float and self._user:
            if self._dual_pending is None:
                self._dual_pending = self._new_dual()
            self._dual_pending.shape = self.shape
            return self._dual_pending
        return None

    def _new_dual(self):
        d = Field(self.dtype if not self.comp_shape else _comp_type(self), self.shape,
                  name=self.name + ".dual", _is_grad=True)
        d._dual_of = self
        return d

    def no_companion_message(self, what: str) -> str:
        """Why `x.grad` / `x.dual` cannot be used (kernels and host access refuse the slot of
        a gradient not enabled), and how to give the field one."""
        if what == "dual":
            return (f"field '{self.name}' has no dual: create it with needs_dual=True, place "
                    f"{self.name}.dual (sd.root.dense(...).place({self.name}, {self.name}.dual)) "
                    f"or call sd.root.lazy_dual()")
        if not self.dtype.is_float:
            return (f"field '{self.name}' has no gradient: it is {self.dtype}, and only float "
                    f"fields have gradients")
        return (f"field '{self.name}' has no gradient: create it with needs_grad=True, place "
                f"{self.name}.grad (sd.root.dense(...).place({self.name}, {self.name}.grad)) or "
                f"call sd.root.lazy_grad() before using it (Taichi: Gradient {self.name}.grad has "
                f"not been placed, check whether `needs_grad=True`)")

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
        """Give this field its forward-mode dual (`needs_dual=True`, `place(x.dual)`,
        `root.lazy_dual()`); kernels compiled before see it at their next launch."""
        d = self._dual_pending
        if d is None or d.epoch != _state.current().epoch:  # none, or a previous init()'s
            d = self._new_dual()
        d.shape = self.shape
        self._dual, self._dual_pending = d, None
        _state.current().layout_version += 1

    @property
    def offset(self) -> tuple:
        """The index of the first element along each axis (Taichi's `offset=`): indices run
        over [offset, offset + shape) in kernels, struct-for loops and Python scope; storage,
        `to_numpy` and `from_numpy` are the same as without one. A gradient / dual field has
        its primal's."""
        owner = self._primal or self._dual_of
        if owner is not None:
            return owner.offset
        return self._offset if self._offset is not None else (0,) * len(self.shape or ())

    def _index_offset(self) -> tuple:
        return self.offset

    @property
    def needs_grad(self) -> bool:
        """Whether the field has a gradient field (`x.grad`)."""
        return self._grad is not None

    @property
    def needs_dual(self) -> bool:
        """Whether the field has a forward-mode dual (`x.dual`)."""
        return self._dual is not None

    def _check_live(self):
        super()._check_live()
        if self._primal is not None and self._primal._grad is not self:
            raise SpiradValueError(self._primal.no_companion_message("grad"))
        if self._dual_of is not None and self._dual_of._dual is not self:
            raise SpiradValueError(self._dual_of.no_companion_message("dual"))
        if self.shape is None:
            raise SpiradValueError(f"field {self.name} has no shape: pass shape= or place it "
                                   f"with sd.root.dense(...).place(...)")
        owner = self._primal or self._dual_of or self
        if owner._members is not None:
            from .matrix_members import check_components
            check_components(owner)
        tree = self._tree_of()
        if tree is not None and not (tree.finalized and not tree.destroyed):
            from kernel_ir.errors import SpiradRuntimeError
            if tree.destroyed:
                raise SpiradRuntimeError(f"field {self.name} was destroyed with its FieldsBuilder "
                                         f"tree (SNode tree {tree.id}.destroy()): its memory is "
                                         f"gone; place a new field in a new FieldsBuilder")
            raise SpiradRuntimeError(f"field {self.name} is placed on a FieldsBuilder that is not "
                                     f"finalized: call finalize() on it before using the field")

    def get_scalar_field(self, *indices):
        """Taichi's `v.get_scalar_field(i, j)`: component (i, j) of this vector / matrix field
        as a scalar field, to place apart (`root.dense(...).place(v.get_scalar_field(0))`) or
        to read (spirad.data.matrix_members)."""
        from .matrix_members import component
        return component(self, indices)

    def _get_dynamic_index_stride(self):
        """Taichi's bytes between consecutive components of this vector / matrix field in
        Taichi's memory, None where they are not evenly spaced (spirad.data.matrix_members)."""
        from .matrix_members import dynamic_index_stride
        return dynamic_index_stride(self)

    def _components_apart(self) -> bool:
        from .snode_layout import layout_of
        layout = layout_of(self)
        return layout is not None and layout.soa

    def _axis_order(self):
        from .snode_layout import layout_of
        layout = layout_of(self)
        return None if layout is None else layout.axis_order()

    @property
    def layout(self):
        """Quadrants' `layout`: the axes in storage order (outermost first) where the storage
        only permutes them (`sd.tensor(layout=...)`, Taichi's `order=`), None where it is the
        canonical order or not a permutation of whole axes (as `Ndarray.layout`)."""
        order = self._axis_order()
        return None if order is None or order == tuple(range(len(order))) else order

    def _perm(self):
        from .snode_layout import layout_of
        layout = layout_of(self)
        if layout is None:
            return None
        cached = self.__dict__.get("_taichi_perm")
        if cached is None or cached[0] != (layout.key(), layout.shape, layout.comp_shape):
            cached = ((layout.key(), layout.shape, layout.comp_shape), layout.permutation())
            self._taichi_perm = cached
        return cached[1]

    def _tree_of(self):
        """The FieldsBuilder tree this field's memory belongs to (a gradient's and a dual's:
        their field's), or None (the default root)."""
        owner = self._primal or self._dual_of or self
        return owner._tree

    @_guard.locked
    def _storage(self):
        if self._buf is None:
            self._check_live()
            nbytes = int(np.prod(self.full_shape, dtype=np.int64)) * self.dtype.nbytes
            self._buf = _state.backend().allocate_field(nbytes, self.id, self.name,
                                                        tree=self._tree_of())
        return self._buf

    def ref(self) -> GlobalRef:
        """Internal: the IR reference of this field (checks that it is live and has a shape)."""
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
    from ..types import MatrixType, VectorType
    cs = f.comp_shape
    return VectorType(cs[0], f.dtype) if len(cs) == 1 else MatrixType(cs[0], cs[1], f.dtype)


def is_quant_dtype(dtype) -> bool:
    """A quantized type (`sd.types.quant...`), or a list of them (one per component of a
    matrix field): its fields are spirad.data.quant's."""
    from ..types import QUANT_TYPES
    if isinstance(dtype, (list, tuple)) and dtype:  # a matrix field's per-component types
        return all(is_quant_dtype(d) for d in dtype)
    return isinstance(dtype, QUANT_TYPES)


def check_offset(shape, offset, placed: bool = False):
    """`offset=` of a field (or of `place`) as a tuple of ints, or None when not given; Taichi's
    errors for one without a shape or of another length than the shape."""
    if offset is None or (placed and offset == ()):
        return None
    if shape is None and not placed:
        raise SpiradSyntaxError("shape cannot be None when offset is set")
    if isinstance(offset, numbers.Integral):
        offset = (offset,)
    if not isinstance(offset, (tuple, list)) or \
            not all(isinstance(o, numbers.Integral) for o in offset):
        raise SpiradTypeError(f"offset must be an int or a tuple of ints, got {offset!r}")
    dim = len(normalize_shape(shape))
    if dim != len(offset):
        raise SpiradSyntaxError(f"The dimensionality of shape and offset must be the same "
                                f"({dim} != {len(offset)})")
    return tuple(int(o) for o in offset)


@api
def field(dtype, shape=None, needs_grad=False, name="", needs_dual=False, offset=None,
          order=None, layout=None) -> Field:
    """A field of `dtype` (`sd.f32`, `float`, `sd.math.vec3`, ...) and `shape` (an int or tuple;
    None: placed later with `sd.root.dense(...).place(x)`). `needs_grad=True` creates `x.grad`
    (reverse mode), `needs_dual=True` `x.dual` (forward mode); `name` is for messages (default:
    the variable it is assigned to). `offset` (an int or a tuple, one per axis; Taichi's): the
    indices run over [offset, offset + shape). `order` (Taichi's, e.g. `"ji"`): the axes laid
    out in memory in that order, outermost first (one dense level per axis, as Taichi places
    it: spirad.data.snode_layout); `layout` is accepted. A quantized dtype
    (`sd.types.quant...`) gives a field placed through a bit-pack (spirad.data.quant)."""
    if is_quant_dtype(dtype):
        if order is not None:
            raise SpiradSyntaxError("order= is not supported for quantized fields")
        return QUANT.quant_field(dtype, shape, needs_grad, name, needs_dual, offset)
    return placed_field(dtype, shape, needs_grad, name, needs_dual, offset, order, soa=False)


def placed_field(dtype, shape, needs_grad, name, needs_dual, offset, order, soa,
                 per_axis: bool = False) -> Field:
    """`sd.field` / `Vector.field` / `Matrix.field`: a field of its own shape, or, with Taichi's
    `order=` or components apart (`layout=SOA`), one placed as Taichi places it (one dense level
    per axis in that order) in hierarchical storage (spirad.data.snode_layout). `per_axis`
    (Quadrants' `layout=`, `sd.tensor`): its accesses go through the storage's shape with the
    indices permuted, each checked on its own axis (`snode_layout.Layout.per_axis`)."""
    if order is None and not soa:
        return Field(dtype, shape, needs_grad, name, needs_dual=needs_dual, offset=offset)
    if shape is None:
        if order is None:  # placed later: its SNode gives the shape, components apart
            f = Field(dtype, None, needs_grad, name, needs_dual=needs_dual, offset=offset)
            f._soa = True
            return f
        raise SpiradSyntaxError("shape cannot be None when order is set")
    shape = normalize_shape(shape)
    if order is None:
        order = "ijklmnop"[:len(shape)]
    if not shape:
        return Field(dtype, shape, needs_grad, name, needs_dual=needs_dual, offset=offset)
    check_offset(shape, offset)
    if not isinstance(order, str) or len(order) != len(shape):
        raise SpiradSyntaxError(f"The dimensionality of shape and order must be the same "
                                f"({len(shape)} != "
                                f"{len(order) if isinstance(order, str) else repr(order)})")
    if len(set(order)) != len(order):
        raise SpiradSyntaxError("The axes in order must be different")
    node = root
    for ch in order:
        axis = ord(ch) - ord("i")
        if not 0 <= axis < len(shape):
            raise SpiradSyntaxError(f"Invalid axis {ch}")
        node = node.dense(Axis(axis), shape[axis])
    f = Field(dtype, None, needs_grad, name or creation_name() or "", needs_dual=needs_dual)
    f._soa = soa
    f._per_axis = per_axis
    node.place(f, offset=offset)
    return f


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


_SPARSE_HINT = ("spirad has dense, bitmasked, pointer and dynamic nodes only; use sd.root.dense(...) (or a field with shape=) "
                "sized for the largest extent, and keep an element count or an active mask in "
                "another field")


_MISSING_NODES = {  # Taichi SNode kinds spirad lacks -> what to use (SNode.__getattr__)
    "hash": _SPARSE_HINT,
    "bit_struct": "it is Taichi's older spelling: pack quantized fields with bp = "
                  "sd.BitpackedFields(max_num_bits=32); bp.place(x, y); root.dense(...).place(bp)",
}


class _MissingNode(SpiradNotSupportedError, AttributeError):
    """`root.hash`: an AttributeError (hasattr is False) whose text says what to use."""


@api_class
class SNode:
    """Dense placement: `root.dense(sd.ij, (n, m)).place(x, y)` gives x and y shape (n, m).

    Placing a field fixes its shape; placing `x.grad` (or `place(x, needs_grad=True)`, or
    `root.lazy_grad()`) gives x its gradient, also after kernels using x were compiled."""

    def __init__(self, extents=(), sparse=(), parent=None):
        self.extents = extents  # ((axis number, extent), ...) from the root down
        self.sparse = sparse    # the sparse levels from the root down (spirad.data.sparse_layout)
        self.level = None       # this node's own, where it is sparse
        self._parent = parent
        self._order = next(_ORDER)  # creation order: a cell's members (spirad.data.snode_bytes)
        self._field = None      # `x.snode`: the field whose cells this is (Taichi's place node)
        self._is_root = False   # `sd.root` (set below): where `shape=` fields hang (snode_bytes)

    def parent(self, n: int = 1):
        """The node `n` levels above this one (Taichi's `snode.parent()`); None above the root."""
        node = self
        for _ in range(n):
            node = node._parent if node is not None else None
        return node

    @property
    def _cell_size_bytes(self) -> int:
        """Taichi's bytes of one cell of this node (spirad.data.snode_bytes)."""
        from .snode_bytes import cell_size_bytes
        return cell_size_bytes(self)

    @property
    def _offset_bytes_in_parent_cell(self) -> int:
        """Taichi's byte offset of this node in its parent's cell (spirad.data.snode_bytes)."""
        from .snode_bytes import offset_bytes_in_parent_cell
        return offset_bytes_in_parent_cell(self)

    @property
    def _snode_tree_id(self) -> int:
        """Taichi's SNode tree of this node: fields declared between two launches share one
        (0 before the first launch that follows fields, then 1, ...)."""
        if self._field is not None:
            return self._field._tree_id
        for f in _state.current().fields:
            n = f._snode
            while n is not None and n is not self:
                n = n._parent
            if n is self:
                return f._tree_id
        raise SpiradValueError("no field is placed below this SNode: it belongs to no tree")

    def _physical_index_position(self) -> dict:
        """Taichi's map from the position of an index to the axis it runs along (`x[a, b]` of
        a field on axes i and l: {0: 0, 1: 3})."""
        return dict(enumerate(sorted({a for a, _ in self.extents})))

    def deactivate_all(self) -> None:
        """Deactivate every cell of every sparse node at or below this one (Taichi's); the
        fields below them read 0 again."""
        from .sparse_layout import deactivate_all
        deactivate_all(self)

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
        """A dense block of `shape` along `axes` (`sd.i`, `sd.ij`, ...) under this one:
        `root.dense(sd.ij, (n, m)).place(x)` gives x shape (n, m)."""
        dims = _axis_dims(axes)
        if len(set(dims)) != len(dims):
            raise SpiradValueError(f"dense(): an axis appears twice in {axes!r}")
        n = len(dims)
        if isinstance(shape, numbers.Integral):
            shape = (int(shape),) * n  # Taichi: dense(ti.ij, n) is n along every axis
        shape = normalize_shape(shape)
        if len(shape) == 1 and n > 1:
            shape = shape * n  # Taichi: a one-element shape, (n,), is n along every axis too
        if len(shape) != n:
            raise SpiradValueError(f"dense(): {n} axes but shape {shape}")
        return self._child(self.extents + tuple(zip(dims, shape)))

    def _child(self, extents) -> "SNode":
        """A node below this one with these (axis, extent) pairs from the root."""
        return SNode(extents, self.sparse, self)

    def _sparse_node(self, kind, axes, shape, chunk_size=None) -> "SNode":
        from .sparse_layout import make_level
        dense = self.dense(axes, shape)
        return make_level(self, kind, dense.extents[len(self.extents):], internal_field,
                          chunk_size)

    def pointer(self, axes, shape) -> "SNode":
        """A pointer block (Taichi's): semantically a bitmasked one; spirad allocates its
        memory up front (spirad.data.sparse_layout says why and what it bounds)."""
        return self._sparse_node("pointer", axes, shape)

    def bitmasked(self, axes, shape) -> "SNode":
        """A dense block with one activation bit per cell: a write activates a cell, an
        inactive cell reads 0, struct-for visits active cells only (`sd.is_active`,
        `sd.activate`, `sd.deactivate`)."""
        return self._sparse_node("bitmasked", axes, shape)

    def dynamic(self, axis, capacity, chunk_size=None) -> "SNode":
        """A list of at most `capacity` cells along `axis` per cell of this node
        (`sd.append`, `sd.length`, `sd.deactivate`); `chunk_size` is accepted (spirad
        allocates the whole capacity)."""
        if isinstance(capacity, (tuple, list)):
            capacity = capacity[0]
        return self._sparse_node("dynamic", axis, int(capacity), chunk_size)

    def quant_array(self, axes, shape, max_num_bits):
        """Taichi's quant_array: `place(x)` packs the `shape` cells of one quantized int / fixed
        field into one word (`max_num_bits`: 32 or 64) per cell of this node (spirad.data.quant)."""
        return QUANT.QuantArray(self, axes, shape, max_num_bits)

    def __getattr__(self, name):
        """Taichi SNode kinds spirad has not (`hash`; Taichi's older `bit_struct`): an
        AttributeError (as Taichi 1.7.4, which has neither) that says what to use instead."""
        hint = _MISSING_NODES.get(name)
        if hint is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        raise _MissingNode(f"root.{name}(...) is not supported: {hint}")

    def place(self, *fields, needs_grad=False, offset=None) -> "SNode":
        """Give `fields` this node's shape; placing `x.grad` (or `needs_grad=True`) gives `x` its
        gradient, also after kernels using `x` were compiled. `offset` (Taichi's): the placed
        fields' indices run over [offset, offset + shape)."""
        offset = check_offset(self.shape, offset, placed=True)
        if any(getattr(f, "_bitpacked", False) or getattr(f, "_quant", False) or
               getattr(f, "_quant_vector", False) for f in fields):
            fields = QUANT.place_bitpacked(self, fields)  # sd.BitpackedFields: its word field goes here
        fields = [m for f in fields for m in  # a struct field: its members, here together
                  (f.leaves() if getattr(f, "_struct_members", False) else (f,))]
        for f in fields:
            if isinstance(f, ComponentField):  # v.get_scalar_field(i): v's first one places v
                f = place_component(self, f, next(_ORDER))
                if f is None:
                    continue
            if offset is not None and isinstance(f, Field) and f._primal is None \
                    and f._dual_of is None:  # a gradient / dual has its primal's offset
                f._offset = offset
            if not isinstance(f, Field):
                raise SpiradTypeError(f"place() expects fields, got {type(f).__name__}")
            # x.dual / x.grad: enable x's dual / gradient slot, with x's shape
            owner, slot, add = (f._dual_of, "_dual", "_add_dual") if f._dual_of is not None else \
                (f._primal, "_grad", "_add_grad")
            if owner is not None:
                if getattr(owner, slot) is None:
                    if owner.shape is not None and owner.shape != self.shape:
                        raise SpiradValueError(f"{f.name} must be placed with the shape of "
                                               f"{owner.name}, {owner.shape}; got {self.shape}")
                    getattr(owner, add)()
                if owner.shape is None:
                    owner.shape = self.shape
                elif owner.shape != self.shape:
                    raise SpiradValueError(f"{f.name} must have the shape of {owner.name}, "
                                           f"{owner.shape}; got {self.shape}")
                f.shape = owner.shape
                continue
            if f.shape is not None and f.shape != self.shape:
                raise SpiradValueError(f"field {f.name} already has shape {f.shape}")
            check_elements(self.shape, f.comp_shape, f"field {f.name}")
            f.shape = self.shape
            f._snode = self
            f._place_order = next(_ORDER)
            if self.sparse:
                from .sparse_layout import placed
                placed(self, f)
            if needs_grad and f._grad is None:
                if not f.dtype.is_float:
                    raise _grad_dtype_error(f.dtype, f.name)
                f._add_grad()
            if f._grad is not None:
                f._grad.shape = self.shape
            if f._pending is not None:
                f._pending.shape = self.shape
            for d in (f._dual, f._dual_pending):
                if d is not None:
                    d.shape = self.shape
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
            if f._dual is None and f.dtype.is_float:
                f._add_dual()
        _state.current().layout_version += 1


root = SNode()
root._is_root = True
i, j, k, l = Axis(0), Axis(1), Axis(2), Axis(3)
ij, ijk, ijkl = Axis(0, 1), Axis(0, 1, 2), Axis(0, 1, 2, 3)
ik, il, jk, jl, kl = Axis(0, 2), Axis(0, 3), Axis(1, 2), Axis(1, 3), Axis(2, 3)
ijl, ikl, jkl = Axis(0, 1, 3), Axis(0, 2, 3), Axis(1, 2, 3)
