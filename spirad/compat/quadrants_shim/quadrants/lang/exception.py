"""Quadrants' error classes by their module path (`quadrants.lang.exception`): spirad's."""
from spirad import (QuadrantsAssertionError, QuadrantsCompilationError, QuadrantsIndexError,  # noqa: F401
                    QuadrantsNameError, QuadrantsRuntimeError, QuadrantsRuntimeTypeError,
                    QuadrantsSyntaxError, QuadrantsTypeError)
