"""The folder holding the `quadrants` re-export package (see README.md); `python -m
spirad.compat.quadrants_shim` prints it, for PYTHONPATH."""
import os

PATH = os.path.dirname(os.path.abspath(__file__))
