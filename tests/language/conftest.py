"""Language tests: every feature of the kernel language against numpy or the IR interpreter.

`test_archs` is imported into the test modules by name; mark it so pytest does not collect the
decorator factory itself as a test.
"""
from tests.support import archs

archs.test_archs.__test__ = False
