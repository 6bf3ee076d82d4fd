"""Backends, one module per arch, each defining `Backend`: a subclass of
`spirad.backends.base.BackendBase`, which lists every hook with its default. Loaded by name by
`spirad.driver.load_backend`. Shared helpers: `adstack_support` (stack descriptions, heap growth,
overflow errors), `bounds_support` (debug bounds-check errors), the `gpu_sizer` package
(adstack sizing on the device for the GPU backends).
"""
