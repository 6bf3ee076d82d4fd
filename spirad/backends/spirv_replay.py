"""Launch graphs on a SPIR-V runtime that keeps recordings (Vulkan): a graph's runs of launches
as one command buffer, recorded once and submitted again (`spirad.launch_graph`, architecture §5).

Why: an eager launch goes through the launch path and `SpirvBackend.launch`, which records its
dispatches one by one into the runtime's batch (Python per dispatch: buffers, argument block,
descriptor set, barrier). A replayed graph repeats the same dispatches over the same buffers;
only argument blocks change (scalars rebound by name). Here a run of such launches is recorded
into one command buffer at its first replay (`VulkanRuntime.record`): the same dispatches,
barriers, argument blocks and push constants `launch` would record, so a replay computes bit
for bit what eager launches do. A replay then writes the argument blocks that changed and
submits it: one vkQueueSubmit, no wait (until the next sync, as eager launches).

What stays on the launch path (`replay_entry` returns None, the graph launches it eagerly at
that point of the sequence, splitting the recording there): a launch with adstacks (sized on the
host before each launch: a sizing miss, a GPU sizer read-back), a task whose range is read from
globals on the host (debug mode, ordered tasks: a flush and a host read), and, decided by the
graph (`launch_graph._segments`), programs that print (flushed on the host) and adjoints with
adstacks. Assertions and bounds checks need no host step: their status words are checked at the
next sync, as for eager launches (the programs are marked launched at each replay).

Stale recordings: the key of a recording (`keep`, the graph's) is its launches' programs,
storages and ranges (a scalar that changes a range is new geometry: recorded again); before each
replay the root chunks it binds are checked to still have the buffers recorded (a new field may
grow a chunk into a new buffer: recorded again, never a stale buffer).
"""
from __future__ import annotations

from kernel_ir.abi import PUSH_CONSTANT_BYTES

KEEP_MAX = 8  # recordings a graph keeps (runs x geometries); the oldest go first


class Entry:
    """One launch of a run: what `_dispatches` needs and its part of a recording's key; the
    first entry of a run also holds the run's `Run` and argument blocks (`replay`)."""
    __slots__ = ("program", "storages", "argbuf", "ranges", "key", "run", "blocks")

    def __init__(self, program, storages, argbuf, ranges):
        self.program, self.storages, self.argbuf, self.ranges = program, storages, argbuf, ranges
        self.key = (id(program), id(storages), tuple(ranges))
        self.run = self.blocks = None


class Run:
    """A recorded run: the runtime's recording, the buffer each root chunk (or window) it binds
    had when recorded, the programs to mark launched (their status words are checked at the
    next sync) and the entries recorded (they keep the keys' objects alive)."""
    __slots__ = ("recording", "chunks", "programs", "checked", "entries")

    def __init__(self, recording, chunks, programs, entries):
        self.recording, self.chunks, self.programs = recording, chunks, programs
        self.checked = any(p.bounds is not None for p in programs)
        self.entries = entries

    def stale(self) -> bool:
        """A chunk grew into a new buffer since (a new field): record again."""
        return any(c.buffer is not b for c, b in self.chunks)


class _Dispatches:
    """A run on a runtime without recordings (wgpu: a command buffer is submitted once): its
    dispatches, made once, given to `dispatch` again at each replay with the blocks of the
    replay, into the runtime's open pass (one command encoder, one submit at the next sync)."""
    __slots__ = ("dispatches",)

    def __init__(self, dispatches):
        self.dispatches = [(pipe, bufs[0], bufs[1:], groups, push, indirect)
                           if pipe.arguments else (pipe, None, bufs, groups, push, indirect)
                           for pipe, bufs, groups, push, indirect in dispatches]

    def dispatch(self, rt, blocks) -> None:
        go = rt.dispatch
        for pipe, k, bufs, groups, push, indirect in self.dispatches:
            go(pipe, bufs if k is None else [blocks[k], *bufs], groups, push, indirect)


def replay_entry(be, program, storages, argbuf, ranges):
    """An `Entry` when the launch needs no host step (module docstring), else None."""
    if any(program.stacks):
        return None
    for rng, how in zip(ranges, program.ranges):
        if rng is None and how[0] != "device":
            return None  # evaluated on the host after a flush
    return Entry(program, storages, argbuf, ranges)


def _dispatches(be, entries) -> tuple:
    """What `launch` would record for `entries` (no adstacks, no host ranges), as the runtime's
    `record` takes it: (dispatches, blocks, {chunk: its buffer}, programs)."""
    dispatches, blocks, chunks, programs = [], [], {}, []
    maxg = be.caps.max_compute_work_group_count
    unused = bytes(PUSH_CONSTANT_BYTES)
    for n, e in enumerate(entries):
        p, storages = e.program, e.storages
        if storages is not p.last_storages:
            be._select(p, storages)
        blocks.append(e.argbuf)
        if p not in programs:
            programs.append(p)
        for ti, (t, pipe, rng) in enumerate(zip(p.tasks, p.pipelines, e.ranges)):
            bufs = [n]
            for c in p.views[ti]:
                chunks[c] = c.buffer
                bufs.append(c.buffer)
            for k in p.own[ti]:
                bufs.append(storages[k])
            if rng is None:  # evaluated and dispatched on the device (`launch`)
                _, args_pipe, args_buf = p.ranges[ti]
                rbufs = bufs + [args_buf]
                dispatches.append((args_pipe, rbufs, (1, 1, 1), unused, None))
                dispatches.append((pipe, rbufs, (1, 1, 1), unused, (args_buf, 0)))
                continue
            b, end = rng
            if end <= b:
                continue
            if len(bufs) < t.num_bindings:
                raise RuntimeError(f"task {t.name} declares {t.num_bindings} bindings, "
                                   f"the backend has {len(bufs)} buffers for it")
            chunk = 1 if p.ordered[ti] else end - b
            for groups, push in be._chunk_dispatches(t, b, end, chunk, maxg):
                dispatches.append((pipe, bufs[:t.num_bindings], groups, push, None))
    return dispatches, blocks, chunks, programs


def replay(be, entries, keep: dict) -> None:
    """Submit the recording of `entries`: the one their first entry holds, else the one `keep`
    (the graph's) has for their key, else recorded now; recorded again when stale."""
    head = entries[0]
    run = head.run
    if run is None or run.stale():
        key = tuple(e.key for e in entries)
        run = keep.get(key)
        if run is None or run.stale():
            dispatches, blocks, chunks, programs = _dispatches(be, entries)
            rec = be.rt.record(dispatches, blocks) if be.rt.records else _Dispatches(dispatches)
            run = Run(rec, tuple(chunks.items()), tuple(programs), entries)
            keep.pop(key, None)
            keep[key] = run
            while len(keep) > KEEP_MAX:
                del keep[next(iter(keep))]
        head.run = run
        head.blocks = [e.argbuf for e in entries]
    if be.rt.records:
        be.rt.replay(run.recording, head.blocks)
    else:
        run.recording.dispatch(be.rt, head.blocks)
    launched = be.launched
    for p in run.programs:
        if p not in launched:
            launched.append(p)
    if run.checked:
        for e in entries:
            p = e.program
            if p.bounds is not None and len(p.recent_args) < 8 and \
                    e.argbuf not in p.recent_args:
                p.recent_args.append(e.argbuf)  # ndarray shapes for a bounds error
