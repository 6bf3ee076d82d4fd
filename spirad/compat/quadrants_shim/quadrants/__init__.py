"""Quadrants' names over spirad: a plain re-export (spirad.compat.quadrants_shim/README.md).

Importing it also gives this process Quadrants' defaults where spirad refuses, for safety, a
program Quadrants runs (`QUADRANTS_DEFAULTS`): such a kernel runs as in Quadrants, with a
`SpiradWarning` naming the risk; an environment variable set by the user wins.

`init` is spirad's, except that `SPIRAD_QUADRANTS_ARCH` (spirad.options), where set, replaces the
arch the program asks for. Genesis derives its torch device from its backend (`gs.metal` needs
torch's `mps`, which only a Mac has); with `gs.cpu` and `SPIRAD_QUADRANTS_ARCH=metal` Genesis keeps
torch CPU tensors and its kernels run on spirad's Metal backend (docs/metal.md, "Genesis on
Metal")."""
import spirad as _spirad
# every name spirad binds, as before spirad had an __all__ (Quadrants programs reach submodules
# such as `qd.lang` / `qd.struct` that are not spirad's documented surface)
globals().update({_n: getattr(_spirad, _n) for _n in dir(_spirad) if not _n.startswith("_")})
from spirad import (Backend, Field, Layout, MatrixTensor, Ndarray, Tensor, VectorTensor,  # noqa: F401
                    _logging, algorithms, graph, math, simt, tensor, types, wrap)
from spirad import options as _options
from . import lang  # noqa: F401


def init(arch=None, **kwargs):
    """`spirad.init`, with the arch `SPIRAD_QUADRANTS_ARCH` names, where set, instead of `arch`
    (read at each call, as `run_as_taichi --arch` forces every `ti.init`)."""
    forced = _options.get("SPIRAD_QUADRANTS_ARCH")
    return _spirad.init(getattr(_spirad, forced) if forced else arch, **kwargs)


# spirad.options switch -> its value here: Quadrants' semantics where spirad's default differs
# (Taichi's), and what Quadrants accepts that spirad refuses, run with a warning
QUADRANTS_DEFAULTS = {
    # (`and` / `or` short-circuit as in Quadrants: `short_circuit_operators=True` is spirad's
    # default too, Taichi's; Genesis guards out-of-range reads with it)
    # a kernel that reads a differentiated global it also overwrites (Quadrants differentiates it
    # with the overwritten value, silently)
    "SPIRAD_AD_OVERWRITTEN_READS": "warn",
}
for _name, _value in QUADRANTS_DEFAULTS.items():
    _options.set_default(_name, _value)
del _name, _value
