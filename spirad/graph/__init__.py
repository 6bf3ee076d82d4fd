"""`sd.graph`: Taichi's compute graphs (`GraphBuilder`, `Arg`, `ArgKind`, `Graph`; builder.py)
and Quadrants' in-kernel `do_while` (device.py: refused at compile time). spirad's capture /
replay of launch sequences is `sd.Graph` (launch_graph.py)."""
from __future__ import annotations

from .builder import Arg, ArgKind, Graph, GraphBuilder, Sequential
from .device import do_while

__all__ = ["Arg", "ArgKind", "Graph", "GraphBuilder", "Sequential", "do_while"]
