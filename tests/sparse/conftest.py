"""Sparse SNode tests (bitmasked, pointer, dynamic) against a numpy model of the structure.

`test_archs` is imported into the test modules by name; mark it so pytest does not collect the
decorator factory itself as a test.
"""
from tests.support import archs

archs.test_archs.__test__ = False
