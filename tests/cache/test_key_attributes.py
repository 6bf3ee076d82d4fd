"""A cache key describes an object by the attributes its kernel's code names
(`spirad.frontend.deps`). Only names that Python's default attribute lookup can find are tried
(`_lookup_keys`); these cases check that this finds exactly what trying every name finds, for
every way an attribute can exist (instance, class, base, metaclass, slots, properties, a
module's or a class's `__getattr__`), so the keys are those of trying every name."""
import dataclasses
import types

from spirad.frontend import deps


class Meta(type):
    meta_value = 5

    def meta_method(cls):
        return cls.__name__


class Base:
    base_value = 1

    def method(self):
        return 2


class Plain(Base, metaclass=Meta):
    class_value = 3

    def __init__(self):
        self.own = 4

    @property
    def prop(self):
        return self.own * 2

    @property
    def broken(self):
        raise ValueError("a property that raises is not read")


class Slotted:
    __slots__ = ("a", "unset")

    def __init__(self):
        self.a = 6


class Dynamic:
    """Any name is an attribute: every name must still be tried."""

    def __getattr__(self, name):
        return len(name)


@dataclasses.dataclass
class Params:
    scale: float = 2.0
    n: int = 3


def _module():
    m = types.ModuleType("pep562_mod")
    m.present = 7
    m.__getattr__ = lambda name: f"lazy {name}"  # PEP 562: the module answers any name
    return m


def _every_name(d, obj):
    """`_Describer.attrs` as it was: every name tried."""
    out = []
    for n in sorted(d.names):
        if n.startswith("__"):
            continue
        try:
            v = getattr(obj, n)
        except Exception:  # noqa: BLE001
            continue
        out.append((n, d.value(v)))
    return tuple(out)


NAMES = frozenset(("own", "prop", "broken", "method", "base_value", "class_value", "meta_value",
                   "meta_method", "mro", "a", "unset", "present", "scale", "n", "missing",
                   "other", "__dict__", "__class__"))


def test_the_names_tried_find_what_every_name_finds():
    # no field among these objects: the describer needs no spirad state
    objects = [Plain(), Plain, Base, Meta, Slotted(), Dynamic(), Params(), _module(), types]
    for obj in objects:
        d = deps._Describer(NAMES, None)
        want = _every_name(deps._Describer(NAMES, None), obj)
        got = d.attrs(obj)
        assert got == want, obj
    # and the fast path is taken where it can be: a plain object tries only its own names
    d = deps._Describer(NAMES, None)
    assert d._readable(Plain()) == ["base_value", "broken", "class_value", "method", "own",
                                    "prop"]
    assert d._readable(Slotted()) == ["a", "unset"]
    assert d._readable(Dynamic()) == d.plain_sorted  # __getattr__: every name
    assert d._readable(_module()) == d.plain_sorted  # a module's __getattr__: every name
    assert "meta_method" in d._readable(Plain) and "mro" in d._readable(Plain)
