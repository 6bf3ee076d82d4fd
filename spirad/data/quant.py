"""Bit-packed fields of quantized types (Taichi's `ti.BitpackedFields`, `root.quant_array`).

A quantized field (`sd.field(dtype=sd.types.quant.int(13))`) owns no memory of its own: it is a
view over a *word field*, an ordinary unsigned field (u32; u64 with `max_num_bits=64`) placed
on the SNode the bit-pack is placed on. Each element of the quantized field is a bit-field of
one word: `(word index, bit offset, width)`, plus an exponent field for a `quant.float`.

* `BitpackedFields(max_num_bits)`: `place(a, b, ...)` packs one element of each field into one
  word, in placement order (a float: its exponent field, then its digits); `place(a, b,
  shared_exponent=True)` gives floats one shared exponent field (the largest exponent of
  theirs, Taichi's). `root.dense(...).place(bitpack)` then places the word field there.
* `node.quant_array(axes, shape, max_num_bits)`: `place(x)` packs a whole block of `shape` cells
  of one quantized int / fixed field into one word per cell of `node`.

Reads extract and decode; writes encode and replace the field's bits; `x[i] += v` on ints and
fixed point is an atomic wrapping add inside the bits. In kernels each write is one
compare-and-swap of the word on the member's bits (`GlobalRef.mask`), so members of one word
written concurrently never clobber each other; the kernel lowering is
`spirad.frontend.quant_ops`. Encode / decode are `spirad.data.quant_codec`, shared by both.
Quantized fields have no gradients (Taichi does not differentiate them).
"""
from __future__ import annotations

import numbers

import numpy as np

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradIndexError, SpiradSyntaxError, SpiradTypeError, SpiradValueError

from ..runtime import state as _state
from ..tracebacks import api_class
from . import field as _field
from . import quant_codec as C
from .field import Field, creation_name, resolve_dtype

A = C.NumpyArith()


@api_class
class QuantField:
    """A field of a quantized type (`sd.types.quant.int / fixed / float`): place it with
    `sd.BitpackedFields` or `root.quant_array(...)`. Read and write it in kernels and from Python
    (`x[i]`, `to_numpy`, `from_numpy`, `fill`) like any field; it has no gradient."""
    _kind = "field"
    _quant = True

    def __init__(self, qtype, name=""):
        st = _state.current()
        qtype = with_compute(qtype)
        self.qtype = qtype
        self.dtype = qtype.compute
        self.comp_shape = ()
        self.id = st.new_id()
        self.epoch = st.epoch
        self.name = name or creation_name() or f"field{self.id}"
        self.shape = None
        self.word = None       # the Field of packed words, once placed
        self.offset = ()       # Taichi's index offset (none for quantized fields)
        self.bit = None        # bit offset of the digits in the word (bit-packs)
        self.exp_bit = None    # bit offset of the exponent field (floats)
        self.group = None      # the fields sharing this one's exponent (shared_exponent=True)
        self.array = None      # (per field axis: cells per word along it, word axis or None)
        self.array_axes = ()   # field axes packed by quant_array, in packing order
        self.array_extent = ()  # cells per word along each of those
        self.extents = ()      # (axis, extent) from the root down to the cells (struct-for)

    @property
    def needs_grad(self) -> bool:
        """Quantized fields have no gradient."""
        return False

    @property
    def offset_bits(self):
        return self.bit

    # -- where an element lives -----------------------------------------------------------------
    def _check(self):
        if self.epoch != _state.current().epoch:
            raise SpiradValueError(f"field {self.name} belongs to a previous sd.init(); create it "
                                   f"again after the last init()")
        if self.word is None:
            raise SpiradValueError(f"quantized field {self.name} is not placed: place it with "
                                   f"sd.BitpackedFields(...) or root.quant_array(...)")

    def locate(self, index: tuple, shr, mod, div, mul, add, c):
        """(word index, bit offset of the digits) of element `index`, written over the given
        integer ops so that host (ints) and kernels (IR nodes) share it."""
        if self.array is None:
            return tuple(index), c(self.bit)
        widx = []
        for (n, word_axis), i in zip(self.array, index):
            if word_axis is not None:
                widx.append(i if n == 1 else div(i, n))
        local = c(0)
        for ax, n in zip(self.array_axes, self.array_extent):
            local = add(mul(local, n), mod(index[ax], n))
        return tuple(widx), mul(local, self.qtype.width)

    def _key(self, key) -> tuple:
        if key is None:
            key = ()
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) != len(self.shape):
            raise SpiradIndexError(f"field {self.name} of shape {self.shape} needs "
                                   f"{len(self.shape)} indices, got {len(key)}")
        for k, n in zip(key, self.shape):
            if not isinstance(k, numbers.Integral) or not 0 <= k < n:
                raise SpiradIndexError(f"index {key} is out of range for field {self.name} of "
                                       f"shape {self.shape}")
        return tuple(int(k) for k in key)

    def _host_locate(self, key):
        return self.locate(key, None, lambda a, b: a % b, lambda a, b: a // b,
                           lambda a, b: a * b, lambda a, b: a + b, lambda v: v)

    # -- host reads and writes ------------------------------------------------------------------
    def _wdt(self):
        return self.word.dtype

    def _decode(self, w, off):
        """Values of the elements at bit `off` of words `w` (numpy arrays of the word type)."""
        q, wdt = self.qtype, self._wdt()
        digits = C.extract(A, w, A.c(off, wdt) if np.isscalar(off) else off.astype(wdt.np),
                           q.width, q.signed and not isinstance(q, C.QuantFloat), wdt)
        if isinstance(q, C.QuantFloat):
            e = C.extract(A, w, A.c(self.exp_bit, wdt), q.exp, False, wdt)
            return C.decode(A, q, digits, e, shared=self.group is not None)
        return C.decode(A, q, digits)

    def _encode_into(self, w, off, values, others=None):
        """Words `w` with the elements at bit `off` set to `values` (and, for a shared exponent,
        the other members re-encoded to the new exponent; `others`: new values of some of them,
        stored in the same write)."""
        q, wdt = self.qtype, self._wdt()
        wide = lambda x: A.cast(x, wdt)  # noqa: E731
        shl = lambda x, o: A.shl(wide(x), A.c(o, wdt) if np.isscalar(o) else o.astype(wdt.np))  # noqa: E731

        def put(w, bits, o, width):
            m = shl(A.c((1 << width) - 1, T.u32) if width < 32 else A.c(0xFFFFFFFF, T.u32), o)
            return A.or_(A.and_(w, ~m), A.and_(shl(bits, o), m))
        if self.group is not None:
            others = {**(others or {}), self: values}
            vals = [others[f] if f in others else f._decode(w, f.bit) for f in self.group]
            exp, digits = C.encode_shared(A, [f.qtype for f in self.group], vals)
            w = put(w, exp, self.exp_bit, q.exp)
            for f, d in zip(self.group, digits):
                w = put(w, d, f.bit, f.qtype.width)
            return w
        if isinstance(q, C.QuantFloat):
            digits, exp = C.encode(A, q, values)
            w = put(w, exp, self.exp_bit, q.exp)
            return put(w, digits, off, q.width)
        return put(w, C.encode(A, q, values), off, q.width)

    @staticmethod
    def _py(v):
        return v.item() if hasattr(v, "item") else v

    def __getitem__(self, key):
        """The element at `key`, a Python number."""
        self._check()
        widx, off = self._host_locate(self._key(key))
        w = self._wdt().np.type(self.word[widx])
        return self._py(self._decode(w, off))

    def __setitem__(self, key, value):
        """Set the element at `key` to `value` (encoded: rounded, wrapped, flushed as Taichi)."""
        self._check()
        widx, off = self._host_locate(self._key(key))
        w = self._wdt().np.type(self.word[widx])
        v = np.asarray(value)
        if v.dtype.kind not in "biuf" or v.shape != ():
            raise SpiradValueError(f"cannot store {value!r} in quantized field {self.name}")
        v = v.astype(np.int64 if v.dtype.kind in "biu" else np.float64)
        self.word[widx] = int(self._encode_into(w, off, v))

    def _all_locations(self):
        grid = np.indices(self.shape).reshape(len(self.shape), -1) if self.shape else \
            np.zeros((0, 1), np.int64)
        idx = tuple(grid[k] for k in range(len(self.shape)))
        widx, off = self.locate(idx, None, lambda a, b: a % b, lambda a, b: a // b,
                                lambda a, b: a * b, lambda a, b: a + b,
                                lambda v: np.full(grid.shape[1], v, np.int64))
        return widx, np.asarray(off, np.int64)

    def to_numpy(self, dtype=None) -> np.ndarray:
        """A numpy copy of the decoded values."""
        self._check()
        W = self.word.to_numpy()
        widx, off = self._all_locations()
        out = np.empty(off.shape, self.dtype.np)
        for o in np.unique(off):
            sel = off == o
            w = W[tuple(i[sel] for i in widx)] if widx else np.broadcast_to(W, (int(sel.sum()),))
            out[sel] = self._decode(np.asarray(w, self._wdt().np), int(o))
        out = out.reshape(self.shape)
        return out if dtype is None else out.astype(dtype)

    def from_numpy(self, arr) -> None:
        """Encode `arr` (the field's shape) into the packed words."""
        self._check()
        arr = np.asarray(arr)
        if arr.shape != tuple(self.shape):
            raise SpiradValueError(f"from_numpy: array of shape {arr.shape} does not match "
                                   f"field shape {self.shape}")
        W = np.array(self.word.to_numpy(), copy=True)
        widx, off = self._all_locations()
        flat = arr.reshape(-1).astype(self.dtype.np if self.dtype.is_float else np.int64)
        for o in np.unique(off):
            sel = off == o
            where = tuple(i[sel] for i in widx) if widx else ()
            W[where] = self._encode_into(np.asarray(W[where], self._wdt().np), int(o),
                                         flat[sel] if widx else flat[sel][-1])
        self.word.from_numpy(W)

    def fill(self, value) -> None:
        """Set every element to `value`."""
        self.from_numpy(np.full(self.shape, value))

    @property
    def snode(self):
        """The SNode of the word field (the node the bit-pack / quant array was placed on)."""
        self._check()
        return self.word.snode

    def parent(self, n: int = 1):
        """The node `n` levels above the packed words' cells."""
        return self.snode.parent(n)

    def __repr__(self):
        return f"<spirad quantized field {self.name} {self.qtype} shape={self.shape}>"


@api_class
class QuantVectorField:
    """A vector / matrix field of a quantized type (`sd.Vector.field(2, dtype=quant...)`): one
    quantized field per component (`get_scalar_field(i)`), placed together or apart;
    `BitpackedFields.place(x, shared_exponent=True)` gives its components one exponent."""
    _quant_vector = True

    def __init__(self, qtype, comp_shape, name=""):
        self.name = name or creation_name() or "field"
        comp_shape = tuple(comp_shape)
        types = _component_types(qtype, comp_shape)
        if len({t.compute for t in types}) != 1:
            from kernel_ir.errors import SpiradRuntimeError
            raise SpiradRuntimeError("Member fields of a matrix field must have the same compute "
                                     f"type (Taichi's rule): got {[str(t.compute) for t in types]}")
        self.qtype, self.dtype, self.comp_shape = types[0], types[0].compute, comp_shape
        self.members = [QuantField(t, f"{self.name}[{', '.join(map(str, k))}]")
                        for t, k in zip(types, np.ndindex(*self.comp_shape))]

    @property
    def shape(self):
        return self.members[0].shape

    @property
    def n(self) -> int:
        """Rows of an element."""
        return self.comp_shape[0]

    @property
    def m(self) -> int:
        """Columns of an element (1 for a vector)."""
        return self.comp_shape[1] if len(self.comp_shape) == 2 else 1

    def get_scalar_field(self, *indices) -> QuantField:
        """The quantized field of component `indices` (Taichi's)."""
        if len(indices) != len(self.comp_shape) or not all(
                isinstance(i, numbers.Integral) and 0 <= i < n
                for i, n in zip(indices, self.comp_shape)):
            raise SpiradIndexError(f"get_scalar_field{indices}: field {self.name} has elements "
                                   f"of shape {self.comp_shape}")
        return self.members[int(np.ravel_multi_index(indices, self.comp_shape))]

    def __getitem__(self, key):
        """A copy of the element at `key` that writes through (`x[i][c] = v`), as Taichi's."""
        vals = np.array([m[key] for m in self.members], self.dtype.np).reshape(self.comp_shape)
        return _field.HOST_ELEMENT[0](self, key, vals)  # spirad.data.matrix.host_element

    def __setitem__(self, key, value):
        """Set the element at `key`: members sharing an exponent are encoded together."""
        vals = np.broadcast_to(np.asarray(value), self.comp_shape).reshape(-1)
        for m0 in self.members:
            m0._check()
        by_word = {}
        for m, v in zip(self.members, vals):
            by_word.setdefault(id(m.word), []).append((m, v))
        for pairs in by_word.values():
            m0 = pairs[0][0]
            widx, _ = m0._host_locate(m0._key(key))
            w = m0._wdt().np.type(m0.word[widx])
            new = {m: np.asarray(v, self.dtype.np) for m, v in pairs}
            done = set()
            for m, v in pairs:
                if m in done:
                    continue
                w = m._encode_into(w, m._host_locate(m._key(key))[1], new[m], new)
                done.update(m.group or (m,))
            m0.word[widx] = int(w)

    def to_numpy(self, dtype=None) -> np.ndarray:
        """The decoded values, component axes last."""
        out = np.stack([m.to_numpy() for m in self.members], -1)
        out = out.reshape(tuple(self.shape) + self.comp_shape)
        return out if dtype is None else out.astype(dtype)

    def from_numpy(self, arr) -> None:
        """Encode `arr` (shape + element shape), component by component."""
        arr = np.asarray(arr)
        flat = arr.reshape(tuple(self.shape) + (-1,))
        for k, m in enumerate(self.members):
            m.from_numpy(flat[..., k])

    def fill(self, value) -> None:
        """Set every element to `value`."""
        for m in self.members:
            m.fill(value)

    def __repr__(self):
        return f"<spirad quantized field {self.name} {self.qtype} {self.comp_shape} shape={self.shape}>"


def _component_types(qtype, comp_shape) -> list:
    """One resolved quantized type per component: `qtype` for all, or a (nested) list of them
    in the element's shape (Taichi's matrix fields of different quantized types)."""
    if isinstance(qtype, C.QUANT_TYPES):
        return [with_compute(qtype)] * int(np.prod(comp_shape))
    flat = list(np.array(qtype, dtype=object).reshape(-1)) if \
        np.array(qtype, dtype=object).shape == comp_shape else None
    if flat is None or not all(isinstance(t, C.QUANT_TYPES) for t in flat):
        raise SpiradTypeError(f"a matrix field of quantized types takes one type or a list of "
                              f"them shaped as its elements {comp_shape}, got {qtype!r}")
    return [with_compute(t) for t in flat]


def quant_vector_field(qtype, comp_shape, shape=None, needs_grad=False, name="",
                       needs_dual=False, offset=None):
    """`sd.Vector.field(n, dtype=<quantized type>)` / `Matrix.field`: placed through bit-packs."""
    _refusals(qtype, shape, needs_grad, needs_dual, offset)
    return QuantVectorField(qtype, comp_shape, name)


def _refusals(qtype, shape, needs_grad, needs_dual, offset) -> None:
    if needs_grad or needs_dual:
        raise SpiradTypeError(f"quantized fields ({qtype}) have no gradients: Taichi does not "
                              f"differentiate them; use a float field for values you "
                              f"differentiate")
    if shape is not None or offset is not None:
        raise SpiradValueError("a quantized field is placed through a bit-pack: create it "
                               "without shape= / offset= and place it with "
                               "sd.BitpackedFields(...).place(x) or root.quant_array(...).place(x)")


def quant_field(qtype, shape=None, needs_grad=False, name="", needs_dual=False, offset=None):
    """`sd.field(dtype=<quantized type>)`: a field placed later through a bit-pack."""
    if not isinstance(qtype, C.QUANT_TYPES):
        raise SpiradTypeError(f"sd.field takes one quantized type, got {qtype!r}: a list of "
                              f"them (one per component) makes a sd.Vector.field / Matrix.field")
    _refusals(qtype, shape, needs_grad, needs_dual, offset)
    return QuantField(qtype, name)


def with_compute(qtype):
    """`qtype` with its compute type resolved (None: Taichi's defaults, default_ip / u32 for
    ints, default_fp for fixed point; floats compute in f32)."""
    from dataclasses import replace
    c = qtype.compute
    if c is None:
        st = _state.current()
        c = (st.default_ip if qtype.signed else T.u32) if isinstance(qtype, C.QuantInt) else \
            (st.default_fp if isinstance(qtype, C.QuantFixed) else T.f32)
    else:
        c = resolve_dtype(c)[0]
    if isinstance(qtype, C.QuantInt) and not c.is_int or not isinstance(qtype, C.QuantInt) and \
            not c.is_float:
        raise SpiradTypeError(f"{qtype}: compute type {c} is not an "
                              f"{'integer' if isinstance(qtype, C.QuantInt) else 'float'} type")
    return replace(qtype, compute=c)


def _word_dtype(max_num_bits) -> T.DType:
    if max_num_bits not in (8, 16, 32, 64):
        raise SpiradValueError(f"max_num_bits must be 8, 16, 32 or 64, got {max_num_bits!r}")
    return T.u64 if max_num_bits == 64 else T.u32


def _quant_members(fields, what):
    out = []
    fields = [m for f in fields for m in (f.members if getattr(f, "_quant_vector", False) else (f,))]
    for f in fields:
        if not isinstance(f, QuantField):
            raise SpiradTypeError(f"{what} places quantized fields (sd.field(dtype="
                                  f"sd.types.quant...)), got {type(f).__name__}"
                                  + (" (vector fields of quantized types are not supported; "
                                     "use one scalar field per component)"
                                     if hasattr(f, "comp_shape") else ""))
        if f.word is not None or f in getattr(f, "_packed", ()):
            raise SpiradValueError(f"field {f.name} is already placed")
        out.append(f)
    return out


@api_class
class BitpackedFields:
    """Taichi's `ti.BitpackedFields(max_num_bits)`: quantized fields packed into one word (u32;
    u64 for 64) per cell: `bp.place(a, b)`, `bp.place(c, d, shared_exponent=True)`, then
    `sd.root.dense(sd.i, n).place(bp)`."""
    _bitpacked = True

    def __init__(self, max_num_bits):
        self.max_num_bits = max_num_bits
        self.wdt = _word_dtype(max_num_bits)
        self.fields = []
        self.used = 0
        self.word = None

    def _take(self, width):
        at = self.used
        self.used += width
        if self.used > self.max_num_bits:
            raise SpiradValueError(f"BitpackedFields(max_num_bits={self.max_num_bits}) is full: "
                                   f"the fields placed need {self.used} bits")
        return at

    def place(self, *fields, shared_exponent=False) -> None:
        """Pack `fields` into the word, in order; `shared_exponent=True`: the quant.float fields
        among them share one exponent field (at least 2 fields, one exponent width)."""
        if self.word is not None:
            raise SpiradValueError("BitpackedFields is already placed on an SNode")
        fields = _quant_members(fields, "BitpackedFields.place")
        if shared_exponent:
            if len(fields) < 2:
                raise SpiradSyntaxError("At least 2 fields need to be placed when "
                                        "shared_exponent=True")
            if not all(isinstance(f.qtype, C.QuantFloat) for f in fields) or \
                    len({f.qtype.exp for f in fields}) != 1:
                raise SpiradTypeError("shared_exponent=True needs quant.float fields of one "
                                      "exponent width")
            e = self._take(fields[0].qtype.exp)
            for f in fields:
                f.exp_bit, f.bit, f.group = e, self._take(f.qtype.width), fields
        else:
            for f in fields:
                if isinstance(f.qtype, C.QuantFloat):
                    f.exp_bit = self._take(f.qtype.exp)
                f.bit = self._take(f.qtype.width)
        self.fields.extend(fields)

    def _word_field(self, node) -> Field:
        if self.word is not None:
            raise SpiradValueError("BitpackedFields is already placed on an SNode")
        if not self.fields:
            raise SpiradValueError("BitpackedFields has no fields: place() some first")
        self.word = Field(self.wdt, None, name="_bits_" + "_".join(f.name for f in self.fields))
        for f in self.fields:
            f.word = f.word or self.word
        return self.word


def place_bitpacked(node, fields) -> list:
    """`node.place(..., bitpack, ...)`: each bit-pack replaced by its word field (placed on
    `node` by the caller); the packed fields take `node`'s shape."""
    out = []
    for f in fields:
        if getattr(f, "_bitpacked", False):
            out.append(f._word_field(node))
            for q in f.fields:
                q.shape, q.extents = node.shape, node.extents
        elif isinstance(f, (QuantField, QuantVectorField)):
            raise SpiradTypeError(f"quantized field {f.name} is placed through "
                                  f"sd.BitpackedFields(...) or root.quant_array(...), not directly")
        else:
            out.append(f)
    return out


@api_class
class QuantArray:
    """`node.quant_array(axes, shape, max_num_bits)` (Taichi's): `place(x)` packs the `shape`
    cells of one quantized int / fixed field into one word per cell of `node`."""

    def __init__(self, node, axes, shape, max_num_bits):
        self.node = node
        self.block = node.dense(axes, shape)  # the cells' index space (not placed on)
        self.extents = self.block.extents[len(node.extents):]
        self.wdt = _word_dtype(max_num_bits)
        self.max_num_bits = max_num_bits
        self.placed = False

    def place(self, *fields) -> "QuantArray":  # noqa: D417
        """Place one quantized int / fixed field: its cells, packed."""
        fields = _quant_members(fields, "quant_array().place")
        if self.placed or len(fields) != 1:
            raise SpiradValueError("a quant_array holds exactly one quantized field")
        f = fields[0]
        if isinstance(f.qtype, C.QuantFloat):
            raise SpiradTypeError("quant_array holds quant.int / quant.fixed fields (as Taichi); "
                                  "pack quant.float fields with sd.BitpackedFields")
        cells = int(np.prod([n for _, n in self.extents]))
        if cells * f.qtype.width > self.max_num_bits:
            raise SpiradValueError(f"quant_array of {cells} cells of {f.qtype.width} bits needs "
                                   f"{cells * f.qtype.width} bits; max_num_bits is "
                                   f"{self.max_num_bits}")
        word = Field(self.wdt, None, name=f"_bits_{f.name}")
        self.node.place(word)
        self.placed = True
        f.word, f.shape, f.extents = word, self.block.shape, self.block.extents
        axes = sorted({a for a, _ in self.block.extents})
        per = {a: 1 for a in axes}
        for a, n in self.extents:
            per[a] *= n
        parent_axes = {a for a, _ in self.node.extents}
        f.array = tuple((per[a], a if a in parent_axes else None) for a in axes)
        f.array_axes = tuple(axes.index(a) for a, _ in self.extents)
        f.array_extent = tuple(n for _, n in self.extents)
        return self


def is_quant_dtype(dtype) -> bool:
    return isinstance(dtype, C.QUANT_TYPES)


# spirad.data.field and .matrix reach this module through QUANT (it imports them)
_field.QUANT.quant_field, _field.QUANT.quant_vector_field = quant_field, quant_vector_field
_field.QUANT.place_bitpacked, _field.QUANT.QuantArray = place_bitpacked, QuantArray
