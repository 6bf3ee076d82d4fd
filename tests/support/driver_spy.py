"""What the compile driver's passes returned while a block ran (tests that look at the task
lists a backend compiled)."""
from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def versioned_task_lists():
    """The task lists `passes.bounds_versioning.version_loops` returns inside the block, as the
    driver calls it (its keywords included): `with versioned_task_lists() as seen: ...`."""
    from spirad.compile import driver
    seen, orig = [], driver.version_loops

    def spy(tl, **k):
        seen.append(orig(tl, **k))
        return seen[-1]

    driver.version_loops = spy
    try:
        yield seen
    finally:
        driver.version_loops = orig


def recorded_cpu_code(monkeypatch) -> list:
    """A list that every later `llvm_codegen.codegen.compile_tasks` call (until the test ends)
    appends its compiled code to: what the CPU backend compiled, in order."""
    import llvm_codegen.codegen as cg
    seen, orig = [], cg.compile_tasks

    def recorded(*a, **k):
        seen.append(orig(*a, **k))
        return seen[-1]
    monkeypatch.setattr(cg, "compile_tasks", recorded)
    return seen


def cpu_compiles(kernel, *args) -> list:
    """(task list, compiled code) of every `llvm_codegen.codegen.compile_tasks` call that
    launching `kernel(*args)` (then a sync) makes: what the CPU backend compiled."""
    import spirad as sd
    import llvm_codegen.codegen as cg
    seen, orig = [], cg.compile_tasks

    def spy(tl, *a, **k):
        code = orig(tl, *a, **k)
        seen.append((tl, code))
        return code

    cg.compile_tasks = spy
    try:
        kernel(*args)
        sd.sync()
    finally:
        cg.compile_tasks = orig
    return seen
