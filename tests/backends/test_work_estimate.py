"""`work_estimate.Adaptive`: the split decisions of a range task from its measured launches."""
from spirad.backends import work_estimate
from spirad.backends.work_estimate import SPLIT_SECONDS, Adaptive


def test_a_split_launch_whose_workers_took_every_chunk_is_measured_again_unsplit(monkeypatch):
    """A split launch in which the calling thread ran no iteration (the workers took every
    chunk: the range had become cheap) measures nothing; the next launch runs unsplit and is
    timed whole, instead of splitting on the old estimate forever (Genesis' box, n_envs 256,
    two threads: a loop split in 75 of 100 launches, the caller running none of them)."""
    monkeypatch.setattr(work_estimate, "clock", lambda: 0.0)  # no CPU time for the caller
    a = Adaptive(workers=2)
    a.per_iteration = 2 * SPLIT_SECONDS  # an old, expensive launch
    calls = []

    def run(fn, bufs, addr, b, e, parallel, min_split):
        calls.append(min_split)
        return 0 if min_split == 0 else e - b  # split: the workers ran it all

    assert a.splits(256)
    a.run(run, None, None, 0, 0, 256)
    assert calls == [0]  # split
    assert not a.splits(256)  # measured again, unsplit
    a.run(run, None, None, 0, 0, 256)
    assert calls[1] == work_estimate.NEVER


def test_a_quick_launch_timed_long_on_the_wall_clock_is_timed_again_on_the_cpu_clock(monkeypatch):
    """A launch predicted quick is timed with the wall clock, which holds any wait for a core:
    an estimate from it never splits the next launch; that launch runs unsplit under the CPU
    clock, which measures the work."""
    now = {"wall": 0.0, "cpu": 0.0}
    monkeypatch.setattr(work_estimate, "wall", lambda: now["wall"])
    monkeypatch.setattr(work_estimate, "clock", lambda: now["cpu"])
    a = Adaptive(workers=2)
    calls = []

    def run(fn, bufs, addr, b, e, parallel, min_split):
        calls.append(min_split)
        now["wall"] += 230e-6 if len(calls) == 1 else 2e-6  # the first waits for a core
        now["cpu"] += 2e-6
        return e - b

    a.run(run, None, None, 0, 0, 256)  # the first launch: quick, on the wall clock
    assert not a.splits(256)  # 230 us on the wall clock: not split on
    a.run(run, None, None, 0, 0, 256)  # unsplit, on the CPU clock: 2 us
    a.run(run, None, None, 0, 0, 256)
    assert calls == [work_estimate.NEVER] * 3
    assert not a.splits(256)

    a.unsplit(256, 1e-3, work_estimate.wall)  # the eager path's record, on the wall clock
    assert not a.splits(256)
    a.unsplit(256, 1e-3, work_estimate.clock)
    assert a.splits(256)
