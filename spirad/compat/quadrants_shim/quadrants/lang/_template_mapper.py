"""Quadrants' template mapper module: nothing here; programs only read its `__builtins__`."""
