"""Tests of compat (split out of tests/language): the same setup.

`test_archs` is imported into the test modules by name; mark it so pytest does not collect the
decorator factory itself as a test.
"""
from tests.support import archs

archs.test_archs.__test__ = False
