"""Taichi's compute graphs (`ti.graph`): a sequence of kernel launches declared once with named
symbolic arguments, then run many times with only the values that change.

    sym = sd.graph.Arg(sd.graph.ArgKind.NDARRAY, "pos", sd.f32, ndim=1)
    g = sd.graph.GraphBuilder(); g.dispatch(init, sym); g.dispatch(step, sym, 0.1)
    graph = g.compile(); graph.run({"pos": arr})

Taichi compiles such a graph for its AOT runtime; here a run is the launches themselves, in
order, each through the kernel's ordinary launch path (its compiled program and plan are
reused from the second run on, as any repeated launch; spirad's own `sd.Graph` capture, in
launch_graph.py, is the way to replay without the launch path). What Taichi checks is checked at
the same points: at `dispatch`, each symbolic argument against the kernel's annotation (kind,
dtype, ndim) and a name reused with another meaning; at `run`, each value against its
symbolic argument (an ndarray's dtype and ndim) and the value types Taichi accepts (int,
float, Matrix / Vector, ndarray, texture). Kernels compile at their first run, not at dispatch.
TEXTURE / RWTEXTURE arguments take `sd.Texture`s (spirad.texture): `ndim`, and an RWTEXTURE's
`fmt`, checked at dispatch against the kernel and at the launch against the texture."""
from __future__ import annotations

import enum
import numbers

import numpy as np

from kernel_ir.errors import SpiradRuntimeError, SpiradTypeError

from ..data.matrix import MatrixValue
from ..data.field import resolve_dtype
from ..data.ndarray import Ndarray
from ..kernel import Kernel
from ..texture import Format, RWTextureType, Texture, TextureType
from ..types import MatrixType, NdarrayType, Template, VectorType


class ArgKind(enum.Enum):
    """What a symbolic graph argument stands for (Taichi's `ti.graph.ArgKind`)."""
    SCALAR = 0
    NDARRAY = 1
    MATRIX = 2
    TEXTURE = 3
    RWTEXTURE = 4


_POSITIONAL = ("tag", "name", "dtype", "ndim", "field_dim", "element_shape", "channel_format",
               "shape", "num_channels")
_ALLOWED = {ArgKind.SCALAR: ("tag", "name", "dtype"),
            ArgKind.NDARRAY: ("tag", "name", "dtype", "ndim", "element_shape"),
            ArgKind.MATRIX: ("tag", "name", "dtype"),
            ArgKind.TEXTURE: ("tag", "name", "ndim"),
            ArgKind.RWTEXTURE: ("tag", "name", "ndim", "fmt")}


def _texture_kwargs(tag, kwargs) -> None:
    """Taichi's checks of the keywords of a texture argument (its removed ones included)."""
    if "dtype" in kwargs:
        import warnings
        warnings.warn("The dtype argument for texture will be deprecated in v1.6.0, use format "
                      "instead.", DeprecationWarning, stacklevel=3)
        del kwargs["dtype"]
    if "shape" in kwargs:
        raise SpiradRuntimeError("The shape argument for texture is deprecated in v1.6.0, and it "
                                 "is removed in v1.7.0. Please use ndim instead. (Note that you "
                                 "no longer need the exact texture size.)")
    if "channel_format" in kwargs or "num_channels" in kwargs:
        if "fmt" in kwargs:
            raise SpiradRuntimeError("channel_format and num_channels are deprecated, please do "
                                     "not specify channel_format/num_channels and fmt at the "
                                     "same time.")
        if tag is ArgKind.RWTEXTURE:
            raise SpiradRuntimeError("The channel_format and num_channels arguments for texture "
                                     "are deprecated in v1.6.0, and they are removed in v1.7.0. "
                                     "Please use fmt instead.")
        raise SpiradRuntimeError("The channel_format and num_channels arguments are no longer "
                                 "required for non-RW textures since v1.6.0, and they are "
                                 "removed in v1.7.0. Please remove them.")


class Arg:
    """A named symbolic argument of a graph: `Arg(tag, name, dtype, ndim=...)` (Taichi's
    positional order: tag, name, dtype, ndim, field_dim, element_shape, ...). An NDARRAY's
    dtype may be a vector / matrix type (its element); `field_dim` is the old name of `ndim`
    (a DeprecationWarning, as Taichi)."""

    def __init__(self, *args, **kwargs):
        if len(args) > len(_POSITIONAL):
            raise SpiradRuntimeError(f"Unexpected {len(_POSITIONAL)}th positional argument")
        kwargs.update(zip(_POSITIONAL, args))
        tag = kwargs.get("tag")
        if not isinstance(tag, ArgKind):
            raise SpiradRuntimeError(f"tag must be a ArgKind variant, but found {type(tag)}.")
        if tag in (ArgKind.TEXTURE, ArgKind.RWTEXTURE):
            _texture_kwargs(tag, kwargs)
        if "field_dim" in kwargs:
            import warnings
            warnings.warn("The field_dim argument for ndarray will be deprecated in v1.6.0, use "
                          "ndim instead.", DeprecationWarning, stacklevel=2)
            if "ndim" in kwargs:
                raise SpiradRuntimeError("field_dim is deprecated, please do not specify "
                                         "field_dim and ndim at the same time.")
            kwargs["ndim"] = kwargs.pop("field_dim")
        if "element_shape" in kwargs:
            if tag is ArgKind.SCALAR:
                raise SpiradRuntimeError("The element_shape argument for scalar is deprecated in "
                                         "v1.6.0, and is removed in v1.7.0. Please remove them.")
            raise SpiradRuntimeError("The element_shape argument for ndarray is deprecated in "
                                     "v1.6.0, and it is removed in v1.7.0. Please use vector or "
                                     "matrix data type instead.")
        for k, v in kwargs.items():
            if k not in _ALLOWED[tag]:
                raise SpiradRuntimeError(f"Invalid argument: {k}, you can only create a graph "
                                         f"argument with: {list(_ALLOWED[tag])}")
        if not isinstance(kwargs.get("name"), str):
            raise SpiradRuntimeError(f"name must be a string, but found {type(kwargs.get('name'))}.")
        dtype = kwargs.get("dtype")
        compound = isinstance(dtype, (VectorType, MatrixType))
        if tag is ArgKind.SCALAR and compound:
            raise SpiradRuntimeError(f"Tag ArgKind.SCALAR must specify a scalar type, but found "
                                     f"{dtype}.")
        if tag is ArgKind.MATRIX and not compound:
            raise SpiradRuntimeError(f"Tag ArgKind.MATRIX must specify matrix type, but got {dtype}.")
        self.fmt = kwargs.get("fmt")
        if tag is ArgKind.RWTEXTURE and (self.fmt is None or self.fmt is Format.unknown):
            raise SpiradRuntimeError(f"Tag ArgKind.RWTEXTURE must specify a valid color format, "
                                     f"but found {self.fmt}.")
        self.tag, self.name = tag, kwargs["name"]
        self.dtype = dtype.dtype if compound and tag is ArgKind.NDARRAY else dtype
        self.element_shape = tuple(dtype.comp_shape) if compound and tag is ArgKind.NDARRAY else ()
        if tag is ArgKind.NDARRAY and self.dtype is not None:  # `float` in `vec4`: the default
            self.dtype = resolve_dtype(self.dtype)[0]
        self.ndim = kwargs.get("ndim", 0 if tag is ArgKind.NDARRAY else None)

    def _spec(self):
        return self.tag, self.dtype, self.ndim, self.element_shape, self.fmt

    def __repr__(self):
        return f"graph.Arg({self.tag.name}, {self.name!r}, {self.dtype}, ndim={self.ndim})"


def _check_against(kernel: Kernel, args) -> None:
    """Taichi's dispatch-time checks of symbolic arguments against the kernel's annotations."""
    params = kernel._annotations()
    if len(args) != len(params):
        raise SpiradTypeError(f"{kernel.fn.__name__} takes {len(params)} arguments, the graph "
                              f"dispatches {len(args)}")
    for (pname, anno), arg in zip(params, args):
        if not isinstance(arg, Arg):
            continue                     # a value fixed in the graph
        where = f"graph argument {arg.name!r} (kernel {kernel.fn.__name__}, parameter {pname})"
        if isinstance(anno, NdarrayType):
            if arg.tag is not ArgKind.NDARRAY:
                raise SpiradTypeError(f"{where}: the kernel takes an ndarray, the argument is "
                                      f"{arg.tag.name}")
            if anno.ndim is not None and anno.ndim != arg.ndim:
                raise SpiradTypeError(f"{where}: ndim {arg.ndim} doesn't match kernel's "
                                      f"annotated ndim {anno.ndim}")
            want = anno.dtype
            if want is not None:
                wdt, wshape = ((want.dtype, tuple(want.comp_shape))
                               if isinstance(want, (VectorType, MatrixType)) else (want, ()))
                if (wdt, wshape) != (arg.dtype, arg.element_shape):
                    raise SpiradTypeError(f"{where}: dtype {arg.dtype} doesn't match kernel's "
                                          f"annotated dtype {want}")
        elif isinstance(anno, (VectorType, MatrixType)):
            if arg.tag is not ArgKind.MATRIX or arg.dtype != anno:
                raise SpiradTypeError(f"{where}: {arg.tag.name} {arg.dtype} doesn't match "
                                      f"kernel's annotated dtype {anno}")
        elif isinstance(anno, TextureType):
            kind = ArgKind.RWTEXTURE if isinstance(anno, RWTextureType) else ArgKind.TEXTURE
            # a storage texture may be passed where a sampled one is taken (Taichi's too)
            tags = (kind,) if kind is ArgKind.RWTEXTURE else (ArgKind.TEXTURE, ArgKind.RWTEXTURE)
            if arg.tag not in tags or arg.ndim != anno.num_dimensions:
                raise SpiradTypeError(f"{where}: the kernel takes a {kind.name} of ndim "
                                      f"{anno.num_dimensions}, the argument is {arg.tag.name} of "
                                      f"ndim {arg.ndim}")
            if kind is ArgKind.RWTEXTURE and arg.fmt is not anno.fmt:
                raise SpiradTypeError(f"{where}: format {arg.fmt} doesn't match kernel's "
                                      f"annotated format {anno.fmt}")
        elif isinstance(anno, Template):
            raise SpiradTypeError(f"{where}: template() parameters take compile-time values; "
                                  f"pass the value itself to dispatch, not a graph argument")
        else:
            if arg.tag is not ArgKind.SCALAR:
                raise SpiradTypeError(f"{where}: the kernel takes a scalar, the argument is "
                                      f"{arg.tag.name}")
            if arg.dtype != anno:
                raise SpiradTypeError(f"{where}: dtype {arg.dtype} doesn't match kernel's "
                                      f"annotated dtype {anno}")


class Sequential:
    """An ordered list of dispatches, appended to a builder (Taichi's `create_sequential`)."""

    def __init__(self, builder: "GraphBuilder"):
        self._builder = builder
        self._nodes = []

    def dispatch(self, kernel_fn, *args) -> None:
        self._nodes.append(self._builder._node(kernel_fn, args))


class GraphBuilder:
    """Declares a graph: `dispatch(kernel, *args)` (args: `Arg`s or fixed values), sequentials,
    then `compile()` gives the runnable `Graph`."""

    def __init__(self):
        self._symbols = {}               # name -> Arg spec: one meaning per name
        self._seq = Sequential(self)

    def _node(self, kernel_fn, args):
        if not isinstance(kernel_fn, Kernel):
            raise SpiradTypeError(f"GraphBuilder.dispatch takes a @kernel, got "
                                  f"{type(kernel_fn).__name__}")
        _check_against(kernel_fn, args)
        for a in args:
            if isinstance(a, Arg):
                seen = self._symbols.setdefault(a.name, a._spec())
                if seen != a._spec():
                    raise SpiradRuntimeError(f"graph argument name {a.name!r} is used for two "
                                             f"different arguments ({seen[0].name} and "
                                             f"{a.tag.name})")
        return kernel_fn, tuple(args)

    def dispatch(self, kernel_fn, *args) -> None:
        self._seq.dispatch(kernel_fn, *args)

    def create_sequential(self) -> Sequential:
        return Sequential(self)

    def append(self, node: Sequential) -> None:
        if not isinstance(node, Sequential) or node._builder is not self:
            raise SpiradTypeError("GraphBuilder.append takes a Sequential of this builder")
        self._seq._nodes.extend(node._nodes)

    def compile(self) -> "Graph":
        return Graph(list(self._seq._nodes))


class Graph:
    """A compiled graph (`GraphBuilder.compile()`): `run({name: value})` launches its kernels
    in order with the named values in place of the symbolic arguments."""

    def __init__(self, nodes):
        self._nodes = nodes
        self._args = {a.name: a for _, args in nodes for a in args if isinstance(a, Arg)}

    def _value(self, arg: Arg, v):
        if isinstance(v, Texture):
            if arg.tag not in (ArgKind.TEXTURE, ArgKind.RWTEXTURE):
                raise SpiradRuntimeError(f"graph argument {arg.name!r} is {arg.tag.name}, got "
                                         f"a texture")
        elif isinstance(v, Ndarray):
            if arg.tag is not ArgKind.NDARRAY:
                raise SpiradRuntimeError(f"graph argument {arg.name!r} is {arg.tag.name}, got "
                                         f"an ndarray")
            if len(v.shape) != arg.ndim:
                raise SpiradRuntimeError(f"Dispatch node is compiled for argument {arg.name} "
                                         f"with ndim={arg.ndim}, but got an ndarray with "
                                         f"ndim={len(v.shape)}")
            if (v.dtype, tuple(v.comp_shape)) != (arg.dtype, arg.element_shape):
                raise SpiradRuntimeError(f"Dispatch node is compiled for argument {arg.name} "
                                         f"with dtype={arg.dtype}, but got an ndarray with "
                                         f"dtype={v.dtype}")
        elif isinstance(v, MatrixValue) and arg.tag is ArgKind.MATRIX:
            shape = tuple(arg.dtype.comp_shape)     # Taichi passes the entries flat
            if v.size != int(np.prod(shape)):
                raise SpiradRuntimeError(f"graph argument {arg.name!r} is a {shape} matrix, got "
                                         f"{v.size} entries")
            return np.asarray(v).reshape(shape).view(MatrixValue)
        elif isinstance(v, MatrixValue) or (isinstance(v, numbers.Real) and not isinstance(v, bool)):
            if arg.tag is not ArgKind.SCALAR:
                raise SpiradRuntimeError(f"graph argument {arg.name!r} is {arg.tag.name}, got "
                                         f"{type(v).__name__}")
        else:
            raise SpiradRuntimeError(f"Only python int, float, ti.Matrix, ti.Ndarray and "
                                     f"ti.Texture are supported as runtime arguments but got "
                                     f"{type(v)}")
        return v

    def run(self, args: dict) -> None:
        missing = sorted(set(self._args) - set(args))
        if missing:
            raise SpiradRuntimeError(f"Graph.run: no value for the graph arguments {missing}")
        extra = sorted(set(args) - set(self._args))
        if extra:
            raise SpiradRuntimeError(f"Graph.run: {extra} are not arguments of this graph "
                                     f"(it has {sorted(self._args)})")
        values = {name: self._value(self._args[name], v) for name, v in args.items()}
        for kernel_fn, kargs in self._nodes:
            kernel_fn(*[values[a.name] if isinstance(a, Arg) else a for a in kargs])
