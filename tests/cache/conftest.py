"""Offline compile cache tests (each uses its own temporary cache directory)."""
from tests.support import archs

archs.test_archs.__test__ = False
