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

    def __init__(self, members: dict, name: str = "struct"):
        if not members:
            raise SpiradTypeError("a struct needs at least one member")
        self.members = dict(members)
        self.name = name

    def field(self, shape=None, needs_grad=False, name="", needs_dual=False,
              layout=None, offset=None) -> "StructField":
        """A struct field of this type: one field per member, all of `shape` (`needs_grad` gives
        every float member a gradient; `offset` as in `sd.field`, shared by the members).
        `layout` (Quadrants' `qd.Layout.SOA / AOS`): accepted; spirad stores members apart (SOA)
        either way, with the same values."""
        return StructField(self, shape, needs_grad, name, needs_dual, offset)

    def __call__(self, *a, **k):
        """Struct values exist only in kernels (`P(a=1.0)` there); from Python this raises."""
        from kernel_ir.errors import SpiradNotSupportedError
        raise SpiradNotSupportedError(f"{self.name}(...) struct values exist only inside kernels; "
                                      f"in Python scope use a {self.name}.field(...)")

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

    @property
    def shape(self):
        """The shape shared by every member field."""
        return next(iter(self.members.values())).shape

    @property
    def grad(self):
        """The gradients as a struct field (`s.grad[i].x` is `s.x.grad[i]`, as in Quadrants):
        the float members that have one; None when none has."""
        members = {m: f.grad for m, f in self.members.items()
                   if f.dtype.is_float and f.needs_grad}
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


def struct(**members) -> StructType:
    """`sd.types.struct(a=float, v=vec3)`: a StructType with these members, in order."""
    return StructType(members)


class Struct:
    """Taichi's `ti.Struct`: `sd.Struct.field({'a': float, 'v': vec3}, shape=n)`."""
    @staticmethod
    def field(members: dict, shape=None, needs_grad=False, name="", needs_dual=False,
              offset=None):
        """A struct field with `members` (name -> element type) of `shape` (`offset` as in
        `sd.field`)."""
        return StructType(members).field(shape, needs_grad, name, needs_dual, offset=offset)


def dataclass(cls) -> StructType:
    """`@sd.dataclass class P: x: float; v: vec3` -> a StructType (`P.field(shape=n)`).
    Methods are not carried over."""
    ann = dict(getattr(cls, "__annotations__", {}))
    import sys
    scope = dict(vars(sys.modules[cls.__module__])) if cls.__module__ in sys.modules else {}
    for k, v in ann.items():
        if isinstance(v, str):  # from __future__ import annotations
            ann[k] = eval(v, scope)  # noqa: S307 - the user's own annotation expression
    return StructType(ann, cls.__name__)


from .. import types as _types  # noqa: E402 - install the constructor behind sd.types.struct

_types._makers_struct[0] = StructType
