from spirad.lang import *  # noqa: F401,F403
from . import exception, impl, _template_mapper  # noqa: F401
