"""Backends, one module each, loaded by name (`spirad.driver.load_backend`).

A backend module provides `is_available() -> bool`, `unavailable_reason() -> str` and
`create(state) -> Backend`. A Backend object provides:

* `allocate(nbytes) -> storage` and `view(storage, np_dtype, shape) -> numpy array` (valid until
  the next launch; the caller syncs first);
* `compile(task_list, abi) -> program` (codegen; the only place a backend sees IR);
* `launch(program, storages, argbuf: bytes, ranges)`: storages in `abi.bindings` order (None for
  kernel temporaries, which the backend owns), one (begin, end) per task;
* `sync()`, `close()`.
"""
