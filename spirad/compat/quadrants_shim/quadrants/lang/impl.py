from spirad.runtime.program_hooks import Program as PyQuadrants, get_runtime  # noqa: F401
