"""Struct fields: Taichi's `ti.Struct.field({...})`, `ti.types.struct(...)` and `@ti.dataclass`.

A struct field is one field per member, all of the same shape (struct-of-arrays): `s.a` is the
member field, and in kernels `s[i].a` is the element of `s.a` at `i` (readable, assignable,
`+=`-able, differentiable like any field element). `for i in s` / `grouped(s)` loop over the shape;
`needs_grad=True` gives every float member its gradient. In kernels, `P(a=1.0)` (members not given
are zero) and `p = s[i]` make struct values (`StructVal`: one local per member, copied on
assignment); `s[i] = p` stores them.
"""
from __future__ import annotations

from kernel_ir.errors import SpiradTypeError

from ..tracebacks import api_class


class StructType:
    """`sd.types.struct(a=float, v=sd.math.vec3)`: member name -> element type, in order."""

    def __init__(self, members: dict, name: str = "struct", methods: dict | None = None):
        for t in members.values():
            if getattr(t, "_is_argpack", False):  # Taichi's ValueError and text
                raise ValueError(f"Invalid data type {t!r}")
        self.members = dict(members)
        self.name = name
        # `@sd.dataclass` methods: name -> function (an @sd.func, or a Python function), called
        # on a value or an element as `p.area()` in kernels (inlined, `self` the struct by
        # reference) and in Python scope
        self.methods = dict(methods or {})

    def field(self, shape=None, needs_grad=False, name="", needs_dual=False,
              layout=None, offset=None) -> "StructField":
        """A struct field of this type: one field per member, all of `shape` (`needs_grad` gives
        every float member a gradient; `offset` as in `sd.field`, shared by the members).
        `layout` (Quadrants' `qd.Layout.SOA / AOS`): accepted; spirad stores members apart (SOA)
        either way, with the same values."""
        if not self.members:
            raise SpiradTypeError(f"struct {self.name} has no members: a field of it would hold "
                                  f"nothing")
        return StructField(self, shape, needs_grad, name, needs_dual, offset)

    def __call__(self, *args, **kwargs):
        """A struct value of this type (in kernels: a kernel-local struct, `frontend/expr.py`):
        members from the positional arguments in order, then the keywords; members not given
        are zero; values converted to the member types (`2.5` of an int member is 2; a scalar
        of a vector member fills it)."""
        names = list(self.members)
        if len(args) > len(names) or any(k not in names for k in kwargs):
            raise SpiradTypeError(f"{self.name}() takes the members {names}")
        values = dict(zip(names, args))
        values.update(kwargs)
        return Struct._typed(self, {m: _host_member(t, values.get(m, 0))
                                    for m, t in self.members.items()})

    def __repr__(self):
        return f"<spirad struct {self.name} {list(self.members)}>"


@api_class
class StructField:
    """A struct field: `members` maps each name to its Field."""

    _struct_members = True

    def __init__(self, stype: StructType, shape, needs_grad=False, name="", needs_dual=False,
                 offset=None):
        from .field import Field
        self.stype = stype
        from .field import creation_name
        self.name = name or creation_name() or stype.name
        self.members = {}
        for m, dt in stype.members.items():
            if isinstance(dt, StructType):  # a struct member: a struct field of its own
                self.members[m] = StructField(dt, shape, needs_grad, f"{self.name}.{m}",
                                              needs_dual, offset)
                continue
            f = Field(dt, shape, name=f"{self.name}.{m}", needs_dual=False, offset=offset)
            if needs_grad and f.dtype.is_float:
                f._add_grad()
            if needs_dual and f.dtype.is_float:
                f._add_dual()
            self.members[m] = f

    def __getattr__(self, name):
        members = self.__dict__.get("members", {})
        if name in members:
            return members[name]
        raise AttributeError(f"struct field {self.__dict__.get('name')} has no member {name!r}")

    def leaves(self) -> list:
        """Every member field, nested struct fields' members in their place (member order):
        what `place` places, and where the shared node, shape and offset are read."""
        return [x for f in self.members.values()
                for x in (f.leaves() if isinstance(f, StructField) else (f,))]

    @property
    def shape(self):
        """The shape shared by every member field."""
        return self.leaves()[0].shape

    @property
    def grad(self):
        """The gradients as a struct field (`s.grad[i].x` is `s.x.grad[i]`, as in Quadrants):
        the float members that have one; None when none has."""
        members = {m: f.grad for m, f in self.members.items()
                   if (f.grad is not None if isinstance(f, StructField) else
                       f.dtype.is_float and f.needs_grad)}
        if not members:
            return None
        g = object.__new__(StructField)
        g.stype, g.name, g.members = self.stype, self.name + ".grad", members
        return g

    def to_numpy(self) -> dict:
        """Member name -> numpy array of that member."""
        return {m: f.to_numpy() for m, f in self.members.items()}

    def from_numpy(self, d: dict) -> None:
        """Fill members from a dict member name -> array (members not given keep their values)."""
        for m, v in d.items():
            self.members[m].from_numpy(v)

    def to_torch(self, device=None) -> dict:
        """Member name -> torch tensor of that member (needs torch installed)."""
        return {m: f.to_torch(device) for m, f in self.members.items()}

    def from_torch(self, d: dict) -> None:
        """Fill members from a dict member name -> torch tensor (as `from_numpy`)."""
        for m, t in d.items():
            self.members[m].from_torch(t)

    def copy_from(self, other) -> None:
        """Copy another struct field's values, member by member (same members and shape)."""
        if not isinstance(other, StructField) or set(other.members) != set(self.members):
            raise SpiradTypeError(f"struct field {self.name}.copy_from takes a struct field with "
                                  f"the members {list(self.members)}, got {other!r}")
        for m, f in self.members.items():
            f.copy_from(other.members[m])

    def fill(self, value) -> None:
        """Set every element of every member to `value`."""
        for f in self.members.values():
            f.fill(value)

    def __getitem__(self, key):
        """The element at `key`: member name -> value (a `HostStruct`, which writes through)."""
        return HostStruct(self, key)

    def __setitem__(self, key, value):
        """Set the members `value` (a dict, or an element read before) names at `key`."""
        for m, v in dict(value).items():
            if m not in self.members:
                raise SpiradTypeError(f"struct field {self.name} has no member {m!r} "
                                      f"(members: {list(self.members)})")
            self.members[m][key] = v

    def __repr__(self):
        return f"<spirad struct field {self.name} shape={self.shape} {list(self.members)}>"


class HostStruct(dict):
    """`s[i]` of a struct field read from Python: member name -> value, that writes through as
    Taichi's host `Struct` does: `s[i].m = v`, `s[i]["m"] = v` and (vector members are host
    elements) `s[i].pos[0] = v` change the member fields; `s[i].m` reads a member. A plain
    dict here lost those writes silently (issue #35)."""

    def __init__(self, sf: StructField, key):
        super().__init__((m, f[key]) for m, f in sf.members.items())
        object.__setattr__(self, "_at", (sf, key))

    def __getattr__(self, name):
        if name in self:
            return self[name]
        method = _method(self.__dict__["_at"][0].stype, name, self)
        if method is not None:
            return method
        raise AttributeError(f"struct element has no member {name!r} (members: {list(self)})")

    def __setattr__(self, name, value):
        if name not in self:
            raise AttributeError(f"struct element has no member {name!r} (members: {list(self)})")
        self[name] = value

    def __setitem__(self, name, value):
        sf, key = self.__dict__["_at"]
        if name not in sf.members:
            raise KeyError(name)
        sf.members[name][key] = value
        dict.__setitem__(self, name, sf.members[name][key])


class StructElem:
    """`s[i]` in a kernel: member access gives the member field's element."""

    def __init__(self, sf: StructField, idx):
        self.sf, self.idx = sf, idx

    @property
    def stype(self):
        return self.sf.stype


class StructVal:
    """A struct value local to a kernel (`p = Particle(mass=1.0)`, `p = s[i]`): one local
    (frontend Slot) per member; assigning it copies, `s[i] = p` stores every member."""

    def __init__(self, stype: StructType, members: dict):
        self.stype, self.members = stype, members


def _method(stype, name: str, obj):
    """`obj.name` of a dataclass method in Python scope: the function bound to `obj`."""
    import types
    fn = stype.methods.get(name) if stype is not None else None
    if fn is None:
        return None
    return types.MethodType(fn, obj)  # an @sd.func: its Python-scope error


def struct(**members) -> StructType:
    """`sd.types.struct(a=float, v=vec3)`: a StructType with these members, in order."""
    return StructType(members)


def _host_member(t, v):
    """`v` as a Python-scope value of member type `t`: a number of the type, a vector / matrix
    value (`MatrixValue`), or a nested struct value."""
    import numpy as np
    from kernel_ir import dtypes as T
    from ..types import MatrixType, VectorType
    from ..runtime import state as _state
    if isinstance(t, StructType):
        if isinstance(v, Struct):
            v = v.to_dict()
        return t(**v) if isinstance(v, dict) else t(v)
    if isinstance(t, (VectorType, MatrixType)):
        from .matrix import matrix_value
        flat = t.flat_values([v])
        return matrix_value(np.array(flat, dtype=float).reshape(t.comp_shape), t.dtype)
    st = _state.current()
    dt = T.from_python(t, st.default_fp, st.default_ip)
    if not isinstance(dt, T.DType):
        raise SpiradTypeError(f"unsupported struct member type {t!r}")
    if isinstance(v, np.ndarray) and v.shape == ():
        v = v.item()
    if dt == T.u1:
        return int(bool(v))
    if dt.is_int:  # wrapped into the type, as a cast in Taichi does
        x = int(v) & ((1 << dt.bits) - 1)
        return x - (1 << dt.bits) if dt.is_signed and x >> (dt.bits - 1) else x
    return float(np.array(v, dtype=dt.np))


class Struct:
    """Taichi's `ti.Struct`: `sd.Struct.field({'a': float, 'v': vec3}, shape=n)` makes a struct
    field; `sd.Struct(a=1, v=sd.Vector([...]))` or `sd.Struct({'a': 1, ...})` a struct value
    (Python scope or kernels), whose members are attributes. A struct type called in Python
    (`P(a=1.0)`) gives one too, with the members converted to their types. Struct values are
    passed to kernel parameters annotated with their type, returned by kernels whose return
    type is one, and captured by kernels as constants."""

    def __init__(self, *args, **kwargs):
        if len(args) == 1 and isinstance(args[0], dict) and not kwargs:
            entries = dict(args[0])
        elif not args:
            entries = dict(kwargs)
        else:
            raise SpiradTypeError("sd.Struct(...) takes a dict of members or members as keywords")
        for m, v in entries.items():
            if isinstance(v, dict):
                entries[m] = Struct(v)
            elif isinstance(v, (list, tuple)):
                from .matrix import matrix_value
                entries[m] = matrix_value(v)
        object.__setattr__(self, "_entries", entries)
        object.__setattr__(self, "_stype", None)

    @classmethod
    def _typed(cls, stype, entries: dict) -> "Struct":
        s = object.__new__(cls)
        object.__setattr__(s, "_entries", entries)
        object.__setattr__(s, "_stype", stype)
        return s

    def __getattr__(self, name):
        entries = self.__dict__.get("_entries", {})
        if name in entries:
            return entries[name]
        method = _method(self.__dict__.get("_stype"), name, self)
        if method is not None:
            return method
        raise AttributeError(f"struct has no member {name!r} (members: {list(entries)})")

    def __setattr__(self, name, value):
        if name not in self._entries:
            raise AttributeError(f"struct has no member {name!r} (members: {list(self._entries)})")
        t = self._stype.members[name] if self._stype is not None else None
        self._entries[name] = _host_member(t, value) if t is not None else value

    def __getitem__(self, name):
        """The member `name` (`s["a"]` is `s.a`)."""
        return self._entries[name]

    def __setitem__(self, name, value):
        """Set member `name`, converted to its type (`s["a"] = v` is `s.a = v`)."""
        self.__setattr__(name, value)

    def keys(self):
        """The member names, in order."""
        return self._entries.keys()

    def items(self):
        """(member name, value) pairs, in order."""
        return self._entries.items()

    @property
    def entries(self) -> dict:
        """Member name -> value (Taichi's `Struct.entries`)."""
        return self._entries

    @property
    def methods(self) -> dict:
        """Method name -> function of the struct's type (`@sd.dataclass` methods; Taichi's
        `Struct.methods`); empty for a struct built from members."""
        st = self.__dict__.get("_stype")
        return dict(st.methods) if st is not None else {}

    def to_dict(self) -> dict:
        """Member name -> value, nested structs as dicts."""
        return {m: v.to_dict() if isinstance(v, Struct) else v for m, v in self._entries.items()}

    def __eq__(self, other):
        if isinstance(other, Struct):
            other = other.to_dict()
        if not isinstance(other, dict) or list(other) != list(self._entries):
            return False
        import numpy as np
        return all(np.all(np.asarray(self.to_dict()[m]) == np.asarray(other[m])) for m in other)

    __hash__ = None

    def __repr__(self):
        return f"Struct({self.to_dict()!r})"

    @staticmethod
    def field(members: dict, shape=None, needs_grad=False, name="", needs_dual=False,
              offset=None):
        """A struct field with `members` (name -> element type) of `shape` (`offset` as in
        `sd.field`)."""
        return StructType(members).field(shape, needs_grad, name, needs_dual, offset=offset)


def dataclass(cls) -> StructType:
    """`@sd.dataclass class P: x: float; v: vec3` -> a StructType (`P.field(shape=n)`). The
    class's methods (`@sd.func` or plain) are the struct's: `p.area()` on a value or an element,
    in kernels and in Python scope. A member with a default value is an error (Taichi's)."""
    from kernel_ir.errors import SpiradSyntaxError
    ann = dict(getattr(cls, "__annotations__", {}))
    for k in ann:
        if hasattr(cls, k):
            raise SpiradSyntaxError("Default value in @dataclass is not supported.")
    methods = {k: getattr(cls, k) for k in dir(cls)
               if not k.startswith("__") and callable(getattr(cls, k))}
    import sys
    scope = dict(vars(sys.modules[cls.__module__])) if cls.__module__ in sys.modules else {}
    for k, v in ann.items():
        if isinstance(v, str):  # from __future__ import annotations
            ann[k] = eval(v, scope)  # noqa: S307 - the user's own annotation expression
    return StructType(ann, cls.__name__, methods)


from .. import types as _types  # noqa: E402 - install the constructor behind sd.types.struct

_types._makers_struct[0] = StructType
