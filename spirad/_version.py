"""spirad's version: one place (pyproject.toml reads it; `sd.__version__`; the offline cache's
build id)."""
__version__ = "0.1.0"
