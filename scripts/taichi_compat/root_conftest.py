"""Installed as the harness's top-level conftest.py: `import taichi` gives spirad."""
from spirad.compat import taichi_alias

taichi_alias.install()
