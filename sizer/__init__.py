"""spirad's sizer: size expressions for adstack capacities and dynamic trip
counts, their int32 bytecode, host evaluators and the per-thread heap layout;
`sizer.device_format` holds the word layouts the GPU sizer's host side and its
device kernel share (not re-exported here: both sides import the module).

A leaf package: imports only the standard library and numpy.
"""

from .bytecode import (HEADER_WORDS, MAGIC, MAX_INDICES, RECORD_WORDS, VERSION, Op,
                       decode, disassemble, encode, verify)
from .context import DictContext, SizeContext
from .errors import MAX_ABS, SizerError
from .evaluate import eval_fast, eval_tree
from .interpret import eval_bytecode
from .expr import (Add, BoundVariable, Const, FieldLoad, Leaves, Max, MaxOverRange, Mul,
                   NdarrayRead, NdarrayShape, ScalarArg, SizeExpr, Sub, free_vars,
                   has_device_leaves, is_closed, leaves, to_str)
from .fold import fold_constants
from .layout import Layout, compute_layout
from .simplify import lower_bound, simplify

__all__ = [
    "SizeExpr", "Const", "FieldLoad", "NdarrayRead", "NdarrayShape", "ScalarArg",
    "Add", "Sub", "Mul", "Max", "MaxOverRange", "BoundVariable",
    "Leaves", "leaves", "free_vars", "is_closed", "has_device_leaves", "to_str",
    "simplify", "lower_bound", "fold_constants",
    "encode", "decode", "verify", "disassemble", "Op", "MAGIC", "VERSION",
    "HEADER_WORDS", "RECORD_WORDS", "MAX_INDICES",
    "eval_tree", "eval_bytecode", "eval_fast", "SizeContext", "DictContext",
    "Layout", "compute_layout", "SizerError", "MAX_ABS",
]
