"""`@kernel` and `@func`: argument checking, the per-signature program cache, and launching.

A kernel is compiled once per (init epoch, arch, layout version, argument signature): scalar
types, vector / matrix argument shapes, ndarray dtype / rank / element shape / needs_grad, and the
identity of template arguments (`spirad.compile.driver`); a signature with ndarrays is compiled
for the shapes of its first launch (passes/shape_specialise) and, for any other shapes, once
more shape-agnostic (`_specialised_shapes`); on the CPU, also for which ndarray storages share
memory (`_alias_partition`). The layout version (`state.layout_version`) changes when a
placement or gradient is added (`sd.root.lazy_grad()`), so the adjoint sees it.
Its adjoint is compiled at the first `kernel.grad(...)` for that signature, its forward-mode
program at the first launch inside `sd.ad.FwdMode`; both are kept on the forward program. Every
launch — forward, adjoint or forward mode — goes through `spirad.runtime.launch`: the kernel keeps the
last `LaunchPlan` of each mode and reuses it while the inputs are the same (one `same_args`
check); otherwise the signature is checked and a new plan is built.
"""
from __future__ import annotations

import dataclasses
import numbers
import typing
import weakref
from operator import is_ as _is, itemgetter

import numpy as np

from kernel_ir import dtypes as T
from kernel_ir.errors import (SpiradArgumentError, SpiradError, SpiradRuntimeError,
                              SpiradSyntaxError, SpiradTypeError,
                              SpiradValueError)

from .runtime import guard as _guard
from .runtime import shape_policy
from .runtime import launch as _launch
from .runtime import state as _state
from .compile.driver import (alias_specialised, compile_adjoint, compile_forward,
                             compile_forward_mode, compile_validation, held_weakly)
from .func import PyFunction, check_string_annotations
from . import options as _options
from passes.shape_specialise import specialisable
from .launch_graph import _Capture
from .recording.fwd_mode import FwdMode
from .data import storage_spans
from .data.ndarray import Ndarray, signature as ndarray_signature
from .recording.tape import Tape
from .runtime.program_hooks import materialize_if_needed
from .data.struct_args import is_struct_annotation, leaf_arrays, ndarray_leaves, struct_key
from .data.struct import Struct, StructType
from .data.struct_values import Snapshot, snapshots
from .tracebacks import api, api_class, reraise_stripped
from .types import MatrixType, NdarrayType, Template, VectorType


FORWARD, ADJOINT, FWD_MODE, VALIDATE = 0, 1, 2, 3  # launch modes: index of the kernel's last plan



class Kernel(PyFunction):
    """A compiled kernel (`@sd.kernel`). Call it to launch; `k.grad(*args)` runs its adjoint.
    Compiled once per argument signature, at the first call."""
    def __init__(self, fn):
        super().__init__(fn)
        self._cache: dict = {}      # (epoch, arch, layout version, signature key[, ndarray
                                    # shapes: a specialised program[, its ndarray alias
                                    # groups: `_alias_partition`]])
                                    # -> Compiled
        self._first_shapes: dict = {}  # that key without shapes -> the shapes of its first
                                       # launch (`_specialised_shapes`)
        self._first_aliases: dict = {}  # that key with shapes -> its first launch's ndarray
                                        # alias groups (`_alias_partition`)
        self._derived: dict = {}    # (that key, mode) -> the adjoint / forward-mode / validation
                                    # program of that forward program (`_derive`)
        self._plans = [None, None, None, None]  # the last LaunchPlan per mode
        self.params = None
        self._has_structs = True    # dataclass parameters? (True until `_annotations` knows)
        self._template_structs = False  # a template() parameter was given a dataclass of ndarrays
        self._nd_params = None      # indices of the types.ndarray() parameters
        self._struct_values = ()    # indices of the struct-typed parameters (`_annotations`)
        self._constant_params = ()  # those annotated needs_grad=False (`_gradless`)
        self._arrays = None         # interop.arrays.KernelArrays: aliases of numpy / torch arguments
        self._py_signature = None   # inspect.Signature, for keyword arguments at launch
        self._views = {}            # param index -> (ndarray, its view without .grad): _gradless
        self._last = [None, None, None, None]  # per mode: (arguments as given, their plan)
        self._fast = None           # (arguments as given, their forward plan, its launch
                                    # function `launch.eager_entry` or None, the argument
                                    # count): repeated eager launches (`__call__`)
        self._kw_orders = {}        # (positional count, keyword names) -> a function of the
                                    # keywords giving their values in parameter order
        _state.kernels.add(self)    # forget() at the next init()

    def forget(self) -> None:
        """Drop every compiled program and plan (a new init(): they hold the old memory)."""
        self._cache = {}
        self._derived = {}
        self._first_shapes = {}
        self._first_aliases = {}
        self._plans = [None] * len(self._plans)
        self._last = [None] * len(self._last)
        self._fast = None
        self._arrays = None
        self._views = {}

    # -- signature ----------------------------------------------------------------------------
    def _annotations(self):
        if self.params is None:
            import inspect
            sig = inspect.signature(self.fn)
            params = list(sig.parameters.values())
            self.params = [(p.name, Template() if (k == 0 and p.name == "self" and
                                                    p.annotation is inspect.Parameter.empty)
                            else self._resolve_annotation(p.annotation))
                           for k, p in enumerate(params)]  # a method's self: a template
            self._has_vectors = any(isinstance(a, (VectorType, MatrixType)) for _, a in self.params)
            self._struct_values = tuple(k for k, (_, a) in enumerate(self.params)
                                        if isinstance(a, StructType))
            self._set_struct_params()
        return self.params

    def _set_struct_params(self):
        """The parameters `_expand` flattens: the dataclass-annotated ones, and the template()
        ones once one was given a dataclass holding ndarrays (`_struct_arg`; until then a
        launch looks at no template() argument)."""
        self._struct_params = tuple(k for k, (_, a) in enumerate(self.params)
                                    if is_struct_annotation(a) or
                                    self._template_structs and _is_template(a))
        self._has_structs = bool(self._struct_params)

    def __get__(self, obj, objtype=None):
        """A kernel defined in a class (`@sd.data_oriented`) is called as `obj.k(...)`: `self`
        is passed as a template argument."""
        return self if obj is None else BoundKernel(self, obj)

    def _resolve_annotation(self, ann):
        """String annotations (`from __future__ import annotations`) are evaluated in the
        kernel's module and closure, as Python would evaluate them. `Annotated[T, a]` (PEP 593)
        means `a`: a type checker reads `T` (`sd.Ndarray`, `float`), spirad reads `a`
        (`sd.types.ndarray()`, `sd.f32`), so typed programs can annotate kernels."""
        if not isinstance(ann, str):
            return _spirad_annotation(ann)
        scope = dict(self.fn.__globals__)
        if self.fn.__closure__:
            for name, cell in zip(self.fn.__code__.co_freevars, self.fn.__closure__):
                try:
                    scope[name] = cell.cell_contents
                except ValueError:
                    pass
        try:
            resolved = eval(ann, scope)  # noqa: S307 - the user's own annotation expression
        except Exception as e:
            raise SpiradTypeError(f"cannot evaluate the annotation {ann!r} of kernel "
                                  f"{self.fn.__name__}: {e}") from None
        return _spirad_annotation(resolved)

    def _arg_error(self, cls, msg, index=None):
        """A user error about the arguments, quoting the kernel's parameter (or its def line)."""
        from kernel_ir.source import user_error
        try:
            src = self.source()
        except Exception:  # no source to quote (interactive definition): plain message
            return cls(msg)
        fdef = src.func_def
        node = fdef.args.args[index] if index is not None and index < len(fdef.args.args) else fdef
        return user_error(cls, msg, src.loc(node))

    def _expand(self, args):
        """Dataclass arguments: their ndarrays appended as hidden arguments (struct_args)."""
        if not self._has_structs:  # the common case, decided without a call (every launch)
            return args
        params = self._annotations()
        if len(args) != len(params) or not self._has_structs:
            return args
        extra = ()
        for k in self._struct_params:
            a = args[k]
            if dataclasses.is_dataclass(a) and _struct_arg(params[k][1], a):
                extra += leaf_arrays(a)
        return tuple(args) + extra if extra else args

    def _signature(self, args, st):
        params = self._annotations()
        kname = self.fn.__name__
        hidden = []
        if self._has_structs and len(args) > len(params):
            for (name, ann), a in zip(params, args):
                if _struct_arg(ann, a):
                    hidden.extend((f"{name}.{'.'.join(path)}", NdarrayType())
                                  for path, _ in ndarray_leaves(a))
            params = list(params) + hidden
        if len(args) != len(params):
            what = "Too many arguments" if len(args) > len(params) else \
                self._taichi_words(f"missing a required argument: '{params[len(args)][0]}'")
            raise self._arg_error(SpiradArgumentError, f"{what}: kernel {kname} takes "
                                  f"{len(params)} argument(s) "
                                  f"({', '.join(p for p, _ in params)}), got {len(args)}")
        key, specs = [], []
        for i, ((name, ann), a) in enumerate(zip(params, args)):
            if isinstance(ann, NdarrayType):
                if not isinstance(a, Ndarray):
                    raise self._arg_error(SpiradTypeError, f"argument '{name}' of {kname} must be an "
                                          f"sd.ndarray, got {type(a).__name__}; create it with "
                                          f"sd.ndarray(dtype, shape) (fields go to sd.template() "
                                          f"parameters)", i)
                if a.epoch != st.epoch:
                    raise self._arg_error(SpiradValueError, f"ndarray argument '{name}' belongs to a "
                                          f"previous sd.init(); create it again after the last init()", i)
                from .data.arg_texts import ndarray_mismatch  # Taichi's classes and texts
                bad = ndarray_mismatch(name, ann, a.dtype, a.comp_shape, a.shape, a._foreign)
                if bad is not None:
                    raise self._arg_error(type(bad), str(bad), i)
                if ann.needs_grad is not None and bool(ann.needs_grad) != a.needs_grad:
                    raise self._arg_error(SpiradTypeError, f"argument '{name}' is annotated "
                                          f"needs_grad={bool(ann.needs_grad)} but the ndarray was "
                                          f"created with needs_grad={a.needs_grad}", i)
                same = next((j for j, b in enumerate(args[:i])
                             if b is a and isinstance(params[j][1], NdarrayType)), None)
                if same is not None:  # one ndarray passed twice: one buffer in the program
                    spec = ("ndarray_alias", same)
                else:
                    spec = ndarray_signature(a)
                specs.append(spec)
                key.append(spec)
            elif isinstance(ann, (VectorType, MatrixType)):
                dtype, comp = self._vector_value(ann, a, name, i, st)
                specs.append(("vector", dtype, comp))
                key.append(("vector", dtype, comp))
            elif _is_template(ann) and not _struct_arg(ann, a):
                specs.append(("template", a))
                key.append(("template", _template_key(a)))
            elif isinstance(ann, StructType):  # a compile-time constant (data/struct_values)
                if not isinstance(a, Snapshot):
                    raise self._arg_error(SpiradTypeError, f"argument '{name}' of {kname} must be "
                                          f"a {ann.name} struct value, got {type(a).__name__}", i)
                specs.append(("template", a))
                key.append(("struct value", id(ann), a.key))
            elif is_struct_annotation(ann) or _is_template(ann):
                if not self._template_structs and _is_template(ann):
                    self._template_structs = True  # from now on `_expand` looks at templates
                    self._set_struct_params()
                    raise _FlattenTemplates()
                if getattr(ann, "_texture_annotation", False):  # spirad.texture
                    try:
                        ann.check(a, name)
                    except (SpiradTypeError, SpiradRuntimeError) as e:
                        raise self._arg_error(type(e), str(e), i) from None
                if not dataclasses.is_dataclass(a):
                    raise self._arg_error(SpiradTypeError, f"argument '{name}' of {kname} must be a "
                                          f"{ann.__name__} (a dataclass), got {type(a).__name__}", i)
                first = len(self.params) + sum(len(sp[2]) for sp in specs if sp[0] == "struct")
                paths = tuple((path, first + k) for k, (path, _) in enumerate(ndarray_leaves(a)))
                specs.append(("struct", a, paths))
                key.append(("struct", struct_key(a)))
            elif _is_tensor_annotation(ann):  # sd.Tensor: a field (template) or an ndarray
                if isinstance(a, Ndarray):
                    spec = ndarray_signature(a)
                    specs.append(spec)
                    key.append(spec)
                else:
                    specs.append(("template", a))
                    key.append(("template", _template_key(a)))
            else:
                try:
                    dtype = _scalar_annotation(ann, st, name, kname)
                except SpiradTypeError as e:
                    raise self._arg_error(SpiradTypeError, str(e), i) from None
                if not isinstance(a, (numbers.Number, np.generic)) or isinstance(a, complex):
                    raise self._arg_error(SpiradTypeError, f"argument '{name}' of {kname} must be a "
                                          f"number ({dtype}), got {type(a).__name__}", i)
                if dtype.is_int and isinstance(a, (float, np.floating)):
                    raise self._arg_error(SpiradTypeError, f"argument '{name}' of {kname} is {dtype} but "
                                          f"got the float {a!r}; pass an int (Taichi: Argument "
                                          f"({i},) (type={type(a)}) cannot be converted into "
                                          f"required type {dtype})", i)
                if dtype.is_int and not np.iinfo(dtype.np).min <= int(a) <= np.iinfo(dtype.np).max \
                        and not _launch.wraps_int_arg(a, dtype):  # wrapped by the launch plan
                    raise self._arg_error(SpiradValueError, f"argument '{name}' = {a} does not fit "
                                          f"{dtype}; annotate it with a wider type (sd.i64)", i)
                specs.append(("scalar", dtype))
                key.append(("scalar", dtype))
        return tuple(key), specs

    def _taichi_words(self, python_msg: str) -> str:
        """Taichi's words for one of Python's argument-binding messages ("Parameter `a : i32`
        missing", "Unexpected argument 'c'", "Too many arguments", "Multiple values for
        argument 'a'")."""
        import re
        m = re.search(r"missing a required argument: '(\w+)'", python_msg)
        if m:
            ann = dict(self._annotations()).get(m.group(1))
            ann_s = getattr(ann, "name", None) or getattr(ann, "__name__", None)
            return f"Parameter `{m.group(1)}" + (f" : {ann_s}`" if ann_s else "`") + " missing"
        m = re.search(r"unexpected keyword argument '(\w+)'", python_msg)
        if m:
            return f"Unexpected argument '{m.group(1)}'"
        m = re.search(r"multiple values for argument '(\w+)'", python_msg)
        if m:
            return f"Multiple values for argument '{m.group(1)}'"
        return "Too many arguments" if "too many" in python_msg else "Wrong arguments"

    def _vector_value(self, ann, a, name, i, st):
        """A vector / matrix argument (`v: sd.math.vec3`): its scalar type and shape, checked."""
        comp = ann.comp_shape
        dtype = T.from_python(ann.dtype, st.default_fp, st.default_ip)
        try:
            arr = np.asarray(a, dtype=np.float64 if dtype.is_float else np.int64)
        except (TypeError, ValueError):
            arr = None
        if arr is None or arr.shape != comp:
            raise self._arg_error(SpiradTypeError, f"argument '{name}' of {self.fn.__name__} must "
                                  f"be a vector / matrix of shape {comp}, got {a!r}", i)
        return dtype, comp

    def flat(self, args) -> tuple:
        """The launch arguments: vector / matrix arguments spread into their components."""
        params = self._annotations()
        if not self._has_vectors:
            return args
        out = []
        for (_, ann), a in zip(params, args):
            if isinstance(ann, (VectorType, MatrixType)):
                out.extend(np.asarray(a).reshape(-1).tolist())
            else:
                out.append(a)
        out.extend(args[len(params):])  # hidden ndarrays of dataclass arguments
        return tuple(out)

    # -- compile ------------------------------------------------------------------------------
    def compile(self, args) -> _launch.Compiled:
        """The forward program for these arguments' signature (compiled on first use)."""
        return self._forward(args)[1]

    def _forward(self, args) -> tuple:
        """(its cache key, the forward program) for these arguments' signature (and shapes:
        `_specialised_shapes`; and alias groups: `_alias_partition`)."""
        st = _state.current()
        key, specs = self._signature(args, st)
        ck = (st.epoch, st.arch, st.layout_version, key)
        if any(k[0] != st.epoch or k[2] != st.layout_version for k in self._cache):
            # programs of a previous init() are dead; a new placement / gradient (layout_version)
            # changes what the adjoint differentiates, so those programs are rebuilt too
            self._cache = {k: v for k, v in self._cache.items() if k[0] == ck[0] and k[2] == ck[2]}
            self._derived = {k: v for k, v in self._derived.items() if k[0] in self._cache}
            self._first_shapes = {k: v for k, v in self._first_shapes.items()
                                 if k[0] == ck[0] and k[2] == ck[2]}
            self._first_aliases = {k: v for k, v in self._first_aliases.items()
                                   if k[0] == ck[0] and k[2] == ck[2]}
        flat = self.flat(args)
        shapes = self._specialised_shapes(ck, flat)
        if shapes is not None:
            ck += (tuple(sorted(shapes.items())),)
        aliases = None if shapes is None else self._alias_partition(ck, st, flat)
        if aliases is not None:
            ck += (("ndarray alias groups", aliases),)
        c = self._cache.get(ck)
        if c is None:
            c = self._cache[ck] = compile_forward(self, specs, st, shapes, aliases)
            for sp in specs:
                if sp[0] == "template" and held_weakly(sp[1]):
                    weakref.finalize(sp[1], _forget, weakref.ref(self), ck)
        return ck, c

    def _specialised_shapes(self, ck, flat):
        """The ndarray shapes (flat argument index -> the storage's full shape) the program of
        signature `ck` is specialised on for launch arguments `flat` (passes/shape_specialise),
        or None: the generic program.
        A signature's first launch decides: its shapes get the specialised program, every other
        shape set the generic one (compiled once, at the first such launch: a kernel taking
        index arrays of varying lengths compiles at most twice). SPIRAD_SHAPE_SPECIALISE=0:
        always the generic one; so inside `runtime.shape_policy.shape_agnostic()` (callers that
        launch a program outside the launch path). Sound as a plan is reused only for the same
        ndarray objects (`launch.same_args`, `rebind`, `_repeat`), whose shapes are fixed at
        creation."""
        shapes = {i: tuple(a.storage_shape) for i, a in enumerate(flat)
                  if isinstance(a, Ndarray)}
        if (not specialisable(shapes) or not _options.get("SPIRAD_SHAPE_SPECIALISE")
                or shape_policy.agnostic()):
            return None
        first = self._first_shapes.setdefault(ck, shapes)
        return shapes if first == shapes else None

    def _alias_partition(self, ck, st, flat):
        """The groups of ndarray buffers sharing memory (`data.storage_spans.alias_groups`:
        () where none does) that the program of key `ck` (its shapes included) is specialised
        on for launch arguments `flat`, or None: the program that assumes nothing of them
        (passes/independent_loops rule 5). A signature's first launch's partition and the
        disjoint one () get programs of their own; any other the generic program (compiled
        once), so a signature has at most two programs more than before. Only with a program
        specialised on its shapes (`_specialised_shapes`: never inside `shape_agnostic()`,
        nor with SPIRAD_SHAPE_SPECIALISE=0, so the GPU sizer, the device bundle and
        shape-varying launches keep the generic partition), and only where the pass runs
        (`driver.alias_specialised`). Sound as the shapes are: a plan is reused only for the
        same ndarray objects (`launch.same_args`, `rebind`), whose storages were bound when
        the plan was made; decided when a plan is made, never at a launch reusing one."""
        if not alias_specialised(st):
            return None
        groups = storage_spans.alias_groups(
            (i, a) for i, a in enumerate(flat) if isinstance(a, Ndarray))
        if groups is None:
            return None
        first = self._first_aliases.setdefault(ck, groups)
        return groups if groups == first or not groups else None

    def _derive(self, args, mode: int, make) -> _launch.Compiled:
        """The program of `mode` derived from this signature's forward one by `make(forward)`,
        compiled on first use and kept beside it (programs are frozen: nothing is attached to
        the forward program)."""
        ck, fwd = self._forward(args)
        c = self._derived.get((ck, mode))
        if c is None:
            c = self._derived[(ck, mode)] = make(fwd)
        return c

    def compile_adjoint(self, args) -> _launch.Compiled:
        """The adjoint program for these arguments' signature (compiled on first use)."""
        return self._derive(args, ADJOINT, lambda fwd: compile_adjoint(
            fwd, self.flat(args), _state.current()))

    def compile_forward_mode(self, args) -> _launch.Compiled:
        """The forward-mode program for these arguments' signature (compiled on first use)."""
        return self._derive(args, FWD_MODE, lambda fwd: compile_forward_mode(
            fwd, self.flat(args), _state.current()))

    def compile_validation(self, args) -> _launch.Compiled:
        """The forward program instrumented for Tape(validation=True) (compiled on first use)."""
        return self._derive(args, VALIDATE, lambda fwd: compile_validation(fwd, _state.current()))

    def _plan(self, args, mode: int) -> _launch.LaunchPlan:
        p = self._plans[mode]
        st = _state.current()
        epoch = (st.epoch, st.layout_version)  # a plan is valid for one init() and one layout
        flat = self.flat(args)
        if p is not None and p.epoch == epoch:
            if _launch.same_args(p, flat):
                return p  # the same inputs as the last launch: everything is known
            q = _launch.rebind(p, flat)  # only scalar values changed (`step(t)`)
            if q is not None:
                self._plans[mode] = q
                return q
        c = (self.compile, self.compile_adjoint, self.compile_forward_mode,
             self.compile_validation)[mode](args)
        p = self._plans[mode] = _launch.plan(c, flat, epoch)
        return p

    def release_plans(self) -> None:
        """Forget the last launch plans: they keep their arguments alive (kernel_function binds
        new buffers at every call, which may then be reused)."""
        self._plans = [None] * len(self._plans)
        self._last = [None] * len(self._last)
        self._fast = None

    def _foreign_args(self, args):
        """numpy arrays / torch tensors given to types.ndarray() parameters replaced by their
        aliases (`spirad.interop.arrays`); also those that must be copied back after the launch."""
        nd = self._nd_params
        if nd is None:
            params = self._annotations()
            nd = self._nd_params = tuple(i for i, (_, a) in enumerate(params)
                                         if isinstance(a, NdarrayType))
            self._constant_params = tuple(i for i in nd if params[i][1].needs_grad is False)
        const = self._constant_params
        if len(args) < len(self.params):  # a wrong argument count: _signature reports it
            nd = [i for i in nd if i < len(args)]
            const = [i for i in const if i < len(args)]
        if const:  # found once per kernel: most have none, and this runs at every launch
            args = self._gradless(args, const)
        arrays = self._arrays
        if arrays is None:
            for i in nd:  # a loop, not all(<generator>): this runs at every launch
                if not isinstance(args[i], Ndarray):
                    break
            else:
                return args, None
            from .interop.arrays import KernelArrays
            arrays = self._arrays = KernelArrays()
        return arrays.convert(self, args, nd)

    def _gradless(self, args, const):
        """An sd.ndarray with a `.grad` given to a parameter annotated `needs_grad=False` (the
        indices `const`) is passed as a view without one: a constant for the adjoint (Taichi's
        meaning)."""
        out = None
        for i in const:
            a = args[i]
            if isinstance(a, Ndarray) and a.grad is not None:
                views = self._views
                v = views.get(i)
                if v is None or v[0] is not a:
                    v = views[i] = (a, Ndarray._alias(a._storage(), a.dtype, a.shape,
                                                      comp_shape=a.comp_shape, layout=a.layout))
                v[1].generation += 1  # the caller may have written `a` since the last launch
                out = list(args) if out is None else out
                out[i] = v[1]
        return args if out is None else tuple(out)

    def _run(self, args, mode: int, tape=None):
        if not _state.state.materialized:  # fields declared since the last materialize hook
            materialize_if_needed()  # spirad.runtime.program_hooks: the hook deferred work runs at
        with _guard.LOCK:  # one launch at a time per process (spirad.runtime.guard)
            p = self._repeat(args, mode)
            if p is not None:  # the arguments of the last launch again: its plan as it is
                if mode == FORWARD and tape is None and _Capture.active is None and (
                        self._fast is None or self._fast[1] is not p):
                    # a second launch in a row: the next ones take `__call__`'s shortcut
                    self._fast = (args, p, _launch.eager_entry(p), len(args))
                if _Capture.active is not None:
                    _Capture.active.record(self, p, False)
                if tape is not None:
                    tape.launching(p)
                return _launch.run(p)
            given = args
            args, copies = self._foreign_args(args)
            if self._struct_values:  # struct values: their frozen snapshots (struct_values)
                args = snapshots(args, self._struct_values, self.params)
            foreign = args is not given  # numpy / torch / grad-less views replaced some
            if self._has_structs:  # most kernels: no call
                args = self._expand(args)
            try:
                p = self._plan(args, mode)
            except _FlattenTemplates:  # a dataclass of ndarrays given to a template() parameter
                args = self._expand(args)
                p = self._plan(args, mode)
            if foreign and self._arrays is not None and self._arrays.leaves:
                self._arrays.check_writes(self, given, p.compiled.writes)  # torch leaves: refused
            self._last[mode] = None if foreign or p.mutable or not _repeatable(given) \
                else (given, p)
            if _Capture.active is not None:  # sd.Graph.capture()
                _Capture.active.record(self, p, foreign)
            if tape is not None:
                tape.launching(p)  # before the launch (checkpoint: save what it overwrites)
            value = _launch.run(p)  # interrupts deferred in there
            if copies:
                from .interop.arrays import copy_out
                copy_out(copies, args, p.compiled.writes)
            return value

    def _repeat(self, args, mode: int):
        """The plan of the last launch in `mode` when `args` are its arguments as given, the
        same objects (before numpy / torch conversion and dataclass flattening: a Genesis
        launch passes ~10 dataclasses holding ~200 ndarrays), else None. Only remembered for
        arguments whose identity decides the plan (`_repeatable`): no foreign arrays, no list /
        dict, no mutable dataclass; and the plan must still be the kernel's current one, of
        this init() and layout. One C loop over the given arguments."""
        last = self._last[mode]
        if last is None:
            return None
        given, p = last
        if p is not self._plans[mode] or len(given) != len(args) or \
                not all(map(_is, given, args)):
            return None
        st = _state.state
        if p.epoch != (st.epoch, st.layout_version):
            return None
        return p

    # -- launch -------------------------------------------------------------------------------
    def bind(self, args, kwargs) -> tuple:
        """Keyword arguments at launch (`k(x, dt=0.1)`): bound to positions, as Python would.
        Python's `Signature.bind` runs once per (positional count, keyword names); when it
        binds every parameter up to the last given one, later calls with the same names
        reuse its order (one `itemgetter` call: a Genesis step passes keywords to a kernel)."""
        if not kwargs:
            return args
        key = (len(args), tuple(kwargs))
        values = self._kw_orders.get(key)
        if values is not None:
            return args + values(kwargs)
        sig = self._py_signature
        if sig is None:
            import inspect
            sig = self._py_signature = inspect.signature(self.fn)
        try:
            ba = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise self._arg_error(SpiradArgumentError, f"{self._taichi_words(str(e))}: kernel "
                                  f"{self.fn.__name__}: {e}") from None
        bound = tuple(ba.args)
        names = list(sig.parameters)
        if len(bound) == len(args) + len(kwargs) and all(
                sig.parameters[n].kind == sig.parameters[n].POSITIONAL_OR_KEYWORD
                for n in names[:len(bound)]) and set(names[len(args):len(bound)]) == set(kwargs):
            order = names[len(args):len(bound)]  # (itemgetter of one name: that value alone)
            self._kw_orders[key] = itemgetter(*order) if len(order) > 1 else \
                lambda kw, name=order[0]: (kw[name],)
        return bound

    def __call__(self, *args, **kwargs):
        """Launch the kernel (compiled for these arguments' types at the first call); keyword
        arguments are bound to positions (Quadrants)."""
        try:
            if kwargs:
                args = self.bind(args, kwargs)
            f = self._fast
            if f is not None and f[2] is not None and len(args) == f[3] and \
                    all(map(_is, f[0], args)) and f[1] is self._plans[FORWARD] and \
                    not _guard.RECORDING and _state.PROFILER is None and f[2]():
                # the arguments (the same objects) of the last two launches again, no Tape,
                # forward mode or capture in any thread, nothing to time: the backend's record
                # of their plan (`launch.eager_entry`)
                return None
            tape = Tape.active
            mode = FWD_MODE if FwdMode.active is not None else \
                VALIDATE if tape is not None and tape.validation and not tape.suspended else FORWARD
            value = self._run(args, mode, tape)
            if Tape.active is not None:
                Tape.active.record(self, args)
            return value
        except SpiradError as e:  # user frames only (spirad.tracebacks)
            reraise_stripped(e)
            raise

    @api
    def grad(self, *args, **kwargs):
        """Run the adjoint kernel: gradients accumulate into the `.grad` of what the kernel reads;
        a store consumes (zeroes) its target's `.grad`, an atomic add leaves it (docs/autodiff.md).
        numpy / torch arguments have no `.grad`: they are constants here."""
        if kwargs:
            args = self.bind(args, kwargs)
        self._run(args, ADJOINT)
        if not self._plans[ADJOINT].compiled.writes_user_data:
            from .tracebacks import called_from_user, warn_user
            if called_from_user():
                warn_user(f"{self.fn.__name__}.grad() computed nothing: no field or ndarray that "
                          f"kernel {self.fn.__name__} reads or writes has a gradient. Create the "
                          f"values to differentiate with needs_grad=True (fields, sd.ndarray) or "
                          f"call sd.root.lazy_grad()")


@api_class
class BoundKernel:
    """`obj.kernel`: calls (and `.grad`) pass `obj` as the kernel's first argument."""

    def __init__(self, kernel, obj):
        self.kernel, self.obj = kernel, obj
        self.__name__ = kernel.fn.__name__

    def __call__(self, *args, **kwargs):
        self._check_class()
        return self.kernel(self.obj, *args, **kwargs)

    def grad(self, *args, **kwargs):
        """The adjoint of the kernel method, with the object as its first argument."""
        self._check_class()
        return self.kernel.grad(self.obj, *args, **kwargs)

    def _check_class(self):
        cls = type(self.obj)
        if not getattr(cls, "_data_oriented", False):
            raise SpiradSyntaxError(f"Please decorate class {cls.__name__} with "
                                    f"@ti.data_oriented (sd.data_oriented): kernel "
                                    f"{self.__name__} is one of its methods")


class _FlattenTemplates(Exception):
    """`_signature` met a template() argument to flatten before `_expand` flattened any: `_run`
    expands the arguments again and plans anew."""


def _repeatable(args) -> bool:
    """Whether the identity of `args` decides their launch plan (`Kernel._repeat`): no list or
    dict (changed in place) and no dataclass that is not frozen (a member may be reassigned;
    a frozen one's members are fixed, as `struct_args.ndarray_leaves` also assumes)."""
    for a in args:
        t = type(a)
        if t is list or t is dict or isinstance(a, Struct):  # changed in place
            return False
        params = getattr(t, "__dataclass_params__", None)
        if params is not None and not params.frozen:
            return False
    return True


def _forget(kernel_ref, ck) -> None:
    """A template argument held weakly died: drop the programs compiled for it (cache key
    `ck`) and those derived from them."""
    k = kernel_ref()
    if k is not None:
        k._cache.pop(ck, None)
        k._first_shapes.pop(ck[:4], None)  # (the signature without shapes)
        k._derived = {key: v for key, v in k._derived.items() if key[0] != ck}


def _is_template(ann) -> bool:
    return isinstance(ann, Template) or ann is Template


def _struct_arg(ann, a) -> bool:
    """Whether argument `a` of a parameter annotated `ann` is flattened (`struct_args`): a
    dataclass parameter's, or a dataclass instance holding ndarrays passed as a template()
    (Quadrants: its ndarrays are run-time arguments, its other members compile-time values)."""
    if not dataclasses.is_dataclass(a) or isinstance(a, type):
        return False
    return is_struct_annotation(ann) or _is_template(ann) and bool(ndarray_leaves(a))


def data_oriented(cls):
    """Taichi's `@ti.data_oriented`: kernels and funcs defined in the class work as methods
    (`self` is a compile-time template argument). The class is returned marked (its
    subclasses inherit the mark); a kernel method of an unmarked class is refused, as in
    Taichi and Quadrants. The programs compiled for an object hold it weakly and are dropped
    with it, so a program that makes objects as it goes does not keep them alive."""
    cls._data_oriented = True
    return cls


def _scalar_annotation(ann, st, name, kname):
    ann = T.from_python(ann, st.default_fp, st.default_ip)
    if isinstance(ann, T.DType):
        return ann
    import inspect
    if ann is inspect.Parameter.empty:
        raise SpiradTypeError(f"argument '{name}' of kernel {kname} needs a type annotation "
                              f"(sd.f32, int, sd.types.ndarray(), sd.template(), ...)")
    hint = _ANNOTATION_HINTS.get(getattr(ann, "__module__", "").split(".")[0], {}).get(
        getattr(ann, "__name__", None))
    raise SpiradTypeError(f"argument '{name}' of kernel {kname} has unsupported annotation "
                          f"{_annotation_name(ann)}" + (f"; {hint}" if hint else
                          "; use a dtype (sd.f32, int, float), sd.types.ndarray(), "
                          "sd.template() or a vector / matrix type"))


_ARRAY_HINT = ("annotate array parameters with sd.types.ndarray() (optionally "
               "sd.types.ndarray(dtype=sd.f32, ndim=1)); numpy arrays and torch tensors are passed "
               "to it as they are")
_ANNOTATION_HINTS = {"numpy": {"ndarray": _ARRAY_HINT, "float32": "use sd.f32",
                               "float64": "use sd.f64", "int32": "use sd.i32", "int64": "use sd.i64"},
                     "torch": {"Tensor": _ARRAY_HINT}}


def _annotation_name(ann) -> str:
    if isinstance(ann, type):
        mod = ann.__module__
        short = {"numpy": "np", "builtins": ""}.get(mod.split(".")[0], mod)
        return f"{short}.{ann.__qualname__}" if short else ann.__qualname__
    return repr(ann)


def _template_key(a):
    """Cache key of a template argument: plain values by value (a new float may reuse a dead
    one's id), lists, tuples and dicts by their contents (a list mutated between two calls is
    compiled again: `launch.same_args` never reuses a plan for a mutable container), everything
    else (fields, modules, functions, objects) by identity."""
    if isinstance(a, (bool, numbers.Number, str, T.DType)) or a is None:
        return ("value", type(a), a)
    if isinstance(a, (tuple, list)):
        return (type(a).__name__,) + tuple(_template_key(x) for x in a)
    if isinstance(a, dict):
        return ("dict",) + tuple((_template_key(k), _template_key(v)) for k, v in a.items())
    return ("id", id(a))


KERNEL_OPTIONS = ("fastcache", "graph")


def _spirad_annotation(ann):
    """The spirad annotation of `Annotated[T, a, ...]`: `a` (see Kernel._resolve_annotation)."""
    if typing.get_origin(ann) is typing.Annotated:
        return ann.__metadata__[0]
    return ann


@typing.overload
def kernel(fn: typing.Callable[..., typing.Any], **options: typing.Any) -> Kernel: ...


@typing.overload
def kernel(fn: None = None, **options: typing.Any) -> typing.Callable[
    [typing.Callable[..., typing.Any]], Kernel]: ...


def kernel(fn=None, **options):
    """Decorator: compile `fn` as a kernel. Its outermost `for` runs in parallel; arguments are
    annotated (`sd.f32`, `int`, `sd.types.ndarray()`, `sd.template()`, vector types); `-> type`
    declares a return value. Also `@sd.kernel(fastcache=True, graph=False)` (Quadrants' options:
    accepted; spirad's own offline cache is always on, and a launch is already one submission)."""
    unknown = sorted(set(options) - set(KERNEL_OPTIONS))
    if unknown:
        raise SpiradTypeError(f"kernel() got unknown option(s) {unknown}; known: {list(KERNEL_OPTIONS)}")
    if fn is None:
        return lambda f: kernel(f)
    ret = getattr(fn, "__annotations__", {}).get("return")
    if getattr(ret, "_is_argpack", False):  # Taichi refuses it at definition
        from kernel_ir.errors import SpiradSyntaxError
        raise SpiradSyntaxError(f"kernel {fn.__name__}: an argpack cannot be a return type; "
                                f"return its members (a tuple or a struct)")
    check_string_annotations(fn, "kernel")
    return Kernel(fn)


def _is_tensor_annotation(ann) -> bool:
    from .data.tensor import Tensor
    return isinstance(ann, type) and issubclass(ann, Tensor)
