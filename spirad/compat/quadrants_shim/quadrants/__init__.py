"""Quadrants' names over spirad: a plain re-export (spirad.compat.quadrants_shim/README.md)."""
from spirad import *  # noqa: F401,F403
from spirad import (Backend, Field, Layout, MatrixTensor, Ndarray, Tensor, VectorTensor,  # noqa: F401
                    _logging, algorithms, graph, math, simt, tensor, types, wrap)
from spirad import __getattr__  # noqa: F401 (names spirad lacks say what to use)
from . import lang  # noqa: F401
