from spirad.program import Program as PyQuadrants, get_runtime  # noqa: F401
