"""What the user namespaces above the frontend plug into it (architecture §1).

`sd.graph`, `sd.algorithms` and `sd.linalg` each have a half that kernels use and a half that
builds kernels (compute graphs, the host-driven sort and scans, the matrix-free solvers). The
second half imports `kernel`, which imports the compiler, so the frontend may not import those
packages: that would be an import cycle between spirad's packages. Instead each namespace
hands its kernel-side names to the frontend here, at import (`spirad/__init__.py` imports every
namespace before any kernel compiles):

- `refused_in_kernels(name, hint)`: a function that a kernel may not call; the call is a compile
  error at the user's line (`sd.graph.do_while`, `sd.algorithms.sort`). It goes into the one
  table of calls the frontend understands, `builtins.HANDLERS`.
- `AppendTarget` / `APPEND_TARGETS`: a dataclass kernel argument whose `x[i, j]` takes only
  `+=` / `-=` (`sd.linalg.SparseMatrixBuilder`: each appends a triplet).

The frontend knows these two shapes, never the namespaces that fill them.
"""
from __future__ import annotations

from kernel_ir.errors import SpiradNotSupportedError

from .builtins import HANDLERS


def _refuse_named(name, hint):
    def h(v, args, kw, node):
        raise v.ctx.error(SpiradNotSupportedError, f"sd.{name} is not supported yet: {hint}", node)
    return h


def refused_in_kernels(name: str, hint: str):
    """Decorator: a kernel calling the decorated function fails to compile with `sd.<name> is not
    supported yet: <hint>` at the call's line; a call on the host runs the function itself."""
    def register(fn):
        HANDLERS[fn] = _refuse_named(name, hint)
        return fn
    return register


class AppendTarget:
    """`x[i, j]` of a kernel argument that only `+=` and `-=` apply to: the frontend's augmented
    assignment calls `insert`, any other use of it is an error naming `what`."""

    what = "this argument"  # the error's name for it, "a sparse matrix builder"

    def insert(self, visitor, value, negate: bool, node):
        """Emit `x[i, j] += value` (`-=` with `negate`) through the frontend `visitor`."""
        raise NotImplementedError


# a dataclass argument type -> its AppendTarget class, called with (the parameter's StructView,
# the index tuple); filled by the namespace that defines the type
APPEND_TARGETS: dict = {}


def append_target(view, index):
    """The AppendTarget of `view[index]` when the viewed argument's type registered one, else None."""
    for cls, target in APPEND_TARGETS.items():
        if view.is_a(cls):
            return target(view, index)
    return None
