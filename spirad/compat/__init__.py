"""Running Taichi programs unchanged.

`import spirad as ti` is the supported way (the "import renamed" port: docs/coming_from_taichi.md).
For running a Taichi file without editing it, `taichi_alias.install()` makes `import taichi`
resolve to spirad, and `python -m spirad.compat.run_as_taichi script.py` runs a script that way.
`taichi_lang` holds the few `taichi.lang.*` helpers that Taichi programs and tests import by path.
"""
