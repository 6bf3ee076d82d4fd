"""Test helpers shared by the backends' test suites."""
