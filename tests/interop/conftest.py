"""Interop tests: numpy / torch / DLPack arrays, torch autograd, torch.distributed."""
from tests.support import archs

archs.test_archs.__test__ = False
