"""Taichi's argument packs: `ti.types.argpack(a=ti.i32, arr=ti.types.ndarray(...), s=S)`, a
kernel parameter that bundles scalars, vectors, structs, ndarrays and nested packs.

An argpack type is a frozen dataclass type (built here), so a pack argument is flattened as
spirad flattens every dataclass argument (`struct_args`): its ndarrays become hidden run-time
arguments of the launch, and its other members are compile-time constants of the kernel (one
compiled program per distinct value of them: documented in docs/coming_from_taichi.md). Values
are converted to the member types when the pack is built (`pack_type(a=1.7)` of an i32 member
holds 1, a vector member a vector value, a struct member a struct value).
"""
from __future__ import annotations

import dataclasses

from kernel_ir.errors import SpiradTypeError


class ArgPackType(type):
    """The metaclass of argpack types: Taichi's repr (`<ti.ArgPackType a=i32, b=u1>`)."""

    def __repr__(cls):
        return "<ti.ArgPackType " + ", ".join(f"{m}={_type_name(t)}"
                                              for m, t in cls._members.items()) + ">"


def _type_name(t) -> str:
    from kernel_ir import dtypes as T
    from ..runtime import state as _state
    st = _state.current()
    dt = T.from_python(t, st.default_fp, st.default_ip)
    return dt.name if isinstance(dt, T.DType) else repr(t)


def _convert(t, v, name):
    from .ndarray import Ndarray
    from .struct import StructType, _host_member
    from ..types import NdarrayType
    if isinstance(t, NdarrayType):
        if not isinstance(v, Ndarray):
            raise SpiradTypeError(f"argpack member {name!r} is an ndarray; got {type(v).__name__}")
        return v
    if isinstance(t, ArgPackType):
        if not isinstance(v, t):
            raise SpiradTypeError(f"argpack member {name!r} is a {t!r}; got {type(v).__name__}")
        return v
    if isinstance(t, StructType):
        return _host_member(t, v)
    return _host_member(t, v)


class ArgPack:
    """Taichi's `ti.ArgPack`: the class of every argument pack (`types.argpack(...)(...)` is an
    instance); `keys` / `items` (properties, as Taichi's) and `to_dict()`."""

    @property
    def keys(self) -> list:
        """The member names, in declaration order."""
        return list(type(self)._members)

    @property
    def items(self):
        """(name, value) of each member, as `dict.items()`."""
        return {m: getattr(self, m) for m in type(self)._members}.items()

    def to_dict(self) -> dict:
        """The members as a dict: nested packs as dicts, vectors / matrices as lists."""
        import numpy as np
        return {m: v.to_dict() if isinstance(v, ArgPack) else
                v.tolist() if isinstance(v, np.ndarray) else v for m, v in self.items}


def _post_init(self):
    for m, t in type(self)._members.items():
        object.__setattr__(self, m, _convert(t, getattr(self, m), m))


def argpack(**members) -> ArgPackType:
    """`types.argpack(name=type, ...)`: an argument-pack type (scalar types, vector / matrix
    types, struct types, `types.ndarray(...)`, other argpack types); call it with the members
    to build a pack, annotate a kernel parameter with it to pass one."""
    if not members:
        raise SpiradTypeError("an argpack needs at least one member")
    ns = {"__annotations__": {m: object for m in members}, "_members": dict(members),
          "_is_argpack": True, "__post_init__": _post_init, "__module__": __name__,
          "__doc__": "An argument pack (`types.argpack`)."}
    cls = ArgPackType("ArgPack", (ArgPack,), ns)
    return dataclasses.dataclass(frozen=True)(cls)


def is_argpack_type(t) -> bool:
    """Whether `t` is an argpack type."""
    return isinstance(t, ArgPackType)


from .. import types as _types  # noqa: E402 - install the constructor behind sd.types.argpack

_types._makers_argpack[0] = argpack
