from spirad.algorithms import *  # noqa: F401,F403
