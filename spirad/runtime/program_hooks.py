"""The program object and its two hooks: `materialize` and `clear`.

Quadrants builds its field memory lazily and "materializes" it before the first kernel launch
after new fields were declared; programs hook that moment to run deferred work — Genesis fills
freshly declared scalar fields there, since a fill in Quadrants would close the SNode tree still
collecting fields. spirad has no such tree (each field owns its memory, filled at any time), but
keeps the same moments so that such programs run unchanged, through a public hook:

* `Program.materialize(prog)` is called before a kernel launch (and before a field's memory is
  exported through `to_torch(copy=False)` / DLPack) whenever fields were declared since the last
  call;
* `Program.clear(prog)` is called when `sd.init()` / `sd.reset()` drops the state.

Both are looked up on the class at each call, so assigning `Program.materialize = f` (wrapping
the original) takes effect at once, as Genesis does with `quadrants.lang.impl.PyQuadrants`.
`prog.prog.synchronize()` waits for launched work (`sd.sync`).
"""
from __future__ import annotations

from kernel_ir import dtypes as T

from . import state as _state


class Program:
    def materialize(self) -> None:
        """Nothing to build here; wrap it to run work at this moment (see the module)."""

    def clear(self) -> None:
        """Nothing to free here; wrap it to drop work that `materialize` would have done."""

    @property
    def prog(self):
        return self

    @property
    def default_fp(self):
        return _state.current().default_fp

    @default_fp.setter
    def default_fp(self, dtype) -> None:
        # Taichi's runtime keeps them as plain attributes: `impl.get_runtime().default_ip = t`
        # types the literals of kernels compiled from then on, as set_default_* does
        self.set_default_fp(dtype)

    @property
    def default_ip(self):
        return _state.current().default_ip

    @default_ip.setter
    def default_ip(self, dtype) -> None:
        self.set_default_ip(dtype)

    def set_default_fp(self, dtype) -> None:
        """Taichi's `impl.get_runtime().set_default_fp(t)`: the type of float literals and of
        `float` from now on, as `init(default_fp=t)`; every kernel is compiled again."""
        st = _state_for_default("default_fp", dtype, "is_float")
        st.default_fp = st.options.default_fp = dtype  # the option is in the offline cache's key
        st.layout_version += 1  # kernels compiled with the old default are compiled again

    def set_default_ip(self, dtype) -> None:
        """Taichi's `impl.get_runtime().set_default_ip(t)`, for integer literals and `int`."""
        st = _state_for_default("default_ip", dtype, "is_int")
        st.default_ip = st.options.default_ip = dtype  # the option is in the offline cache's key
        st.layout_version += 1

    def get_num_compiled_functions(self) -> int:
        """How many kernel programs this init() compiled, counted as Taichi counts its kernel
        instances: one per kernel and argument signature (a program specialised on ndarray
        shapes and that signature's generic one count once: `Kernel._specialised_shapes`;
        adjoints not counted)."""
        st = _state.current()
        return sum(len({key[:4] for key in getattr(k, "_cache", {}) if key[0] == st.epoch})
                   for k in list(_state.kernels))

    def config(self):
        """The current init()'s arch and debug flag (Taichi's `prog.config()`)."""
        import types
        st = _state.current()
        return types.SimpleNamespace(arch=st.arch, debug=st.debug, default_fp=st.default_fp,
                                     default_ip=st.default_ip)

    def synchronize(self) -> None:
        st = _state.current()
        if st.backend is not None:
            st.backend.sync()


def _state_for_default(what, dtype, kind):
    """The current state, once `dtype` is checked to be a float / integer type (`kind`). The
    setters change the state's value and the init option alike: the option is what the
    offline cache keys on, so a kernel compiled under the old default is not loaded again."""
    if not isinstance(dtype, T.DType) or not getattr(dtype, kind) or dtype == T.u1:
        from kernel_ir.errors import SpiradTypeError
        raise SpiradTypeError(f"set_{what}({dtype!r}): give "
                              f"{'a float' if kind == 'is_float' else 'an integer'} dtype")
    return _state.current()


_program = Program()


def get_runtime() -> Program:
    return _program


# Checks of the declared fields that Taichi makes at this moment, registered by the layer that
# knows the fields (spirad.data.matrix_members: a matrix field's components of one shape); each
# takes the list of fields and raises.
LAUNCH_CHECKS: list = []


def materialize_if_needed() -> None:
    """The hook, when fields were declared since it last ran (`State.materialized`, cleared by
    a field's declaration; a new state starts cleared). A launch reads the flag itself and
    calls this only when it is clear: one attribute test per launch."""
    st = _state.current()
    if not st.materialized:
        st.materialized = True  # first: fields the hook declares call it again next launch
        type(_program).materialize(_program)
        _refuse_unplaced(st)
        for check in LAUNCH_CHECKS:
            check(st.fields)
        if any(getattr(f, "_tree_id", -1) == st.snode_trees for f in st.fields):
            st.snode_trees += 1  # Taichi's tree ids: fields declared after this launch, the next


def _refuse_unplaced(st) -> None:
    """A launch while a declared field has no shape yet (`sd.field(dtype)` never placed) is an
    error, as Taichi's materialize check makes it: a kernel compiled then could not see the
    field's layout, and the field's data would silently be missing. Checked only when fields
    were declared since the last launch."""
    unplaced = [f for f in st.fields if f.shape is None]
    if unplaced:
        from kernel_ir.errors import SpiradRuntimeError
        st.materialized = False  # still unplaced at the next launch
        names = ", ".join(f"'{f.name}'" for f in unplaced)
        raise SpiradRuntimeError(f"These field(s) are not placed: {names}. Give each a shape "
                                 f"(sd.field(dtype, shape=...)) or place it "
                                 f"(sd.root.dense(sd.i, n).place(x)) before launching a kernel")


def cleared() -> None:
    type(_program).clear(_program)


_state.RESET_HOOKS.append(cleared)
