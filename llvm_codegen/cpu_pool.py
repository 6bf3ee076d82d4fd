"""The CPU runtime's worker pool for split launches: native workers that take chunks dynamically.

Why: a split launch through Python's `ThreadPoolExecutor` gave each worker one fixed chunk, and
the worker had to be woken, take the GIL and run Python before its chunk started. On the shared
2-core machine the second core is mostly busy, so the calling thread finished its half and then
waited for the worker's: a 3 ms launch of 256 iterations took 1.6 ms at best but 6.5 ms at the
median (serial: 3.1 ms), and every split cost ~18 us even when the worker came at once
(`benchmarks/bench_pool_split.py`, docs/performance.md "The second core").

How: each worker is a Python thread that calls `spirad_pool_worker` once and stays in native
code (no GIL) until the pool closes. A launch (`Pool.run`) publishes a job — task function,
buffer table, argument bytes, range, chunk size — in one shared block and wakes the workers
that sleep; then the calling thread itself takes chunks from a shared counter (an atomic add),
as does every worker that arrives while chunks are left. When none is left the launch is
closed, and the caller waits only for the workers that took a chunk (each runs at most one
chunk past that point): a worker that comes late, or never, costs the launch nothing but its
share, which the caller ran. A worker waits for the next job spinning first (`SPINS` pauses,
tens of microseconds: Genesis' launches come back to back), then on a futex.

Which iterations a worker runs differs between launches; each iteration runs once, with the
worker slot of the thread that runs it (slot 0: the caller; slot k: pool thread k), so a task
whose iterations are independent gives the serial launch's result bit for bit. Splits whose
result depends on which slot runs which iterations (privatised scatters, `CpuRuntime.run_slots`)
keep their fixed chunks.

The shared block (64-byte lines; i32 futex words):
  line 0: state (i32: +4 a launch; bit 0 open, bit 1 shut down), sleepers (i32 at byte 4),
          fn, bufs, args, end, chunk (i64 at bytes 8..48)
  line 1: next (i64: the first iteration not yet taken)
  line 2: active (i32: workers inside the launch), caller_waits (i32 at byte 132)
Publishing the job's fields before the state's store (sequentially consistent), and a worker
counting itself `active` before it reads the state again, make a late worker either see the
launch open with its fields or leave without touching them; the caller closes the launch and
then waits for `active` to reach 0.
"""
from __future__ import annotations

import ctypes
import platform
import sys
import threading
import weakref

SPINS = 400  # pause instructions a worker (and a waiting caller) spins before sleeping
CHUNKS_PER_WORKER = 8  # a launch's chunks: a late worker loses its share, a chunk at a time
BLOCK_BYTES = 192

_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}
_PAUSE = {"x86_64": ("call void @llvm.x86.sse2.pause()", "declare void @llvm.x86.sse2.pause()"),
          "aarch64": ("call void @llvm.aarch64.hint(i32 1)", "declare void @llvm.aarch64.hint(i32)")}

_IR = """
declare i64 @syscall(i64, ...)
{pause_decl}

define internal void @relax() {{
  {pause}
  ret void
}}

define internal void @futex_wait(ptr %w, i32 %v) {{
  %r = call i64 (i64, ...) @syscall(i64 {nr}, ptr %w, i32 128, i32 %v, ptr null, ptr null, i32 0)
  ret void
}}

define internal void @futex_wake(ptr %w) {{
  %r = call i64 (i64, ...) @syscall(i64 {nr}, ptr %w, i32 129, i32 2147483647, ptr null, ptr null, i32 0)
  ret void
}}

; wake the threads waiting on `w` if the count at `flag` (sleepers, a waiting caller) is not 0
define internal void @wake_if(ptr %flag, ptr %w) {{
entry:
  %n = load atomic i32, ptr %flag seq_cst, align 4
  %any = icmp ne i32 %n, 0
  br i1 %any, label %wake, label %done
wake:
  call void @futex_wake(ptr %w)
  br label %done
done:
  ret void
}}

; chunks of the open job, as `slot`, until none is left or `budget` ran (-1: no limit);
; the iterations run
define internal i64 @take(ptr %job, i32 %slot, i64 %budget) {{
entry:
  %pfn = getelementptr i8, ptr %job, i64 8
  %fn = load ptr, ptr %pfn
  %pb = getelementptr i8, ptr %job, i64 16
  %bufs = load ptr, ptr %pb
  %pa = getelementptr i8, ptr %job, i64 24
  %args = load ptr, ptr %pa
  %pe = getelementptr i8, ptr %job, i64 32
  %end = load i64, ptr %pe
  %pc = getelementptr i8, ptr %job, i64 40
  %chunk = load i64, ptr %pc
  %pnext = getelementptr i8, ptr %job, i64 64
  br label %loop
loop:
  %ran = phi i64 [0, %entry], [%ran1, %body]
  %k = phi i64 [0, %entry], [%k1, %body]
  %more = icmp ne i64 %k, %budget
  br i1 %more, label %claim, label %out
claim:
  %lo = atomicrmw add ptr %pnext, i64 %chunk seq_cst
  %has = icmp slt i64 %lo, %end
  br i1 %has, label %body, label %out
body:
  %hi0 = add i64 %lo, %chunk
  %past = icmp sgt i64 %hi0, %end
  %hi = select i1 %past, i64 %end, i64 %hi0
  call void %fn(ptr %bufs, ptr %args, i64 %lo, i64 %hi, i32 %slot)
  %n = sub i64 %hi, %lo
  %ran1 = add i64 %ran, %n
  %k1 = add i64 %k, 1
  br label %loop
out:
  %r = phi i64 [%ran, %loop], [%ran, %claim]
  ret i64 %r
}}

; `seen` starts at the block's first state (0): a launch (or the shutdown) before this thread
; started is a change it acts on
define void @spirad_pool_worker(ptr %job, i32 %slot) {{
entry:
  %s0 = add i32 0, 0
  %psleep = getelementptr i8, ptr %job, i64 4
  %pactive = getelementptr i8, ptr %job, i64 128
  %pwaits = getelementptr i8, ptr %job, i64 132
  br label %wait
wait:
  %seen = phi i32 [%s0, %entry], [%s, %closed], [%s, %leave], [%s, %tell]
  br label %spin
spin:
  %i = phi i32 [0, %wait], [%i1, %spin_on]
  %v = load atomic i32, ptr %job seq_cst, align 4
  %changed = icmp ne i32 %v, %seen
  br i1 %changed, label %got, label %spin_on
spin_on:
  call void @relax()
  %i1 = add i32 %i, 1
  %spun = icmp sge i32 %i1, {spins}
  br i1 %spun, label %sleep, label %spin
sleep:
  %o1 = atomicrmw add ptr %psleep, i32 1 seq_cst
  %v2 = load atomic i32, ptr %job seq_cst, align 4
  %same = icmp eq i32 %v2, %seen
  br i1 %same, label %nap, label %woke
nap:
  call void @futex_wait(ptr %job, i32 %seen)
  br label %woke
woke:
  %o2 = atomicrmw sub ptr %psleep, i32 1 seq_cst
  br label %spin_again
spin_again:
  %v3 = load atomic i32, ptr %job seq_cst, align 4
  %same3 = icmp eq i32 %v3, %seen
  br i1 %same3, label %sleep, label %got
got:
  %s = phi i32 [%v, %spin], [%v3, %spin_again]
  %shut = and i32 %s, 2
  %isshut = icmp ne i32 %shut, 0
  br i1 %isshut, label %exit, label %notshut
notshut:
  %open = and i32 %s, 1
  %isopen = icmp ne i32 %open, 0
  br i1 %isopen, label %join, label %closed
closed:
  br label %wait
join:
  %a0 = atomicrmw add ptr %pactive, i32 1 seq_cst
  %s2 = load atomic i32, ptr %job seq_cst, align 4
  %still = icmp eq i32 %s2, %s
  br i1 %still, label %work, label %leave
work:
  %ran = call i64 @take(ptr %job, i32 %slot, i64 -1)
  br label %leave
leave:
  %a1 = atomicrmw sub ptr %pactive, i32 1 seq_cst
  %last = icmp eq i32 %a1, 1
  br i1 %last, label %tell, label %wait
tell:
  call void @wake_if(ptr %pwaits, ptr %pactive)
  br label %wait
exit:
  ret void
}}

; publish a job (the launch before it is closed) and wake the sleeping workers
define void @spirad_pool_open(ptr %job, ptr %fn, ptr %bufs, ptr %args, i64 %begin, i64 %end,
                              i64 %chunk) {{
entry:
  %pfn = getelementptr i8, ptr %job, i64 8
  store ptr %fn, ptr %pfn
  %pb = getelementptr i8, ptr %job, i64 16
  store ptr %bufs, ptr %pb
  %pa = getelementptr i8, ptr %job, i64 24
  store ptr %args, ptr %pa
  %pe = getelementptr i8, ptr %job, i64 32
  store i64 %end, ptr %pe
  %pc = getelementptr i8, ptr %job, i64 40
  store i64 %chunk, ptr %pc
  %pnext = getelementptr i8, ptr %job, i64 64
  store atomic i64 %begin, ptr %pnext seq_cst, align 8
  %s = load atomic i32, ptr %job seq_cst, align 4
  %s1 = or i32 %s, 1
  store atomic i32 %s1, ptr %job seq_cst, align 4
  %psleep = getelementptr i8, ptr %job, i64 4
  call void @wake_if(ptr %psleep, ptr %job)
  ret void
}}

; the caller's share: chunks as slot 0, at most `budget` of them (-1: until none is left);
; the iterations it ran
define i64 @spirad_pool_take(ptr %job, i64 %budget) {{
  %r = call i64 @take(ptr %job, i32 0, i64 %budget)
  ret i64 %r
}}

; close the open job (no chunk is taken after this) and wait for the workers inside it
define void @spirad_pool_close(ptr %job) {{
entry:
  %pnext = getelementptr i8, ptr %job, i64 64
  %pe = getelementptr i8, ptr %job, i64 32
  %end = load i64, ptr %pe
  store atomic i64 %end, ptr %pnext seq_cst, align 8
  %s = load atomic i32, ptr %job seq_cst, align 4
  %s1 = add i32 %s, 3
  store atomic i32 %s1, ptr %job seq_cst, align 4
  %pactive = getelementptr i8, ptr %job, i64 128
  %pwaits = getelementptr i8, ptr %job, i64 132
  br label %spin
spin:
  %i = phi i32 [0, %entry], [%i1, %spin_on]
  %a = load atomic i32, ptr %pactive seq_cst, align 4
  %none = icmp eq i32 %a, 0
  br i1 %none, label %done, label %spin_on
spin_on:
  call void @relax()
  %i1 = add i32 %i, 1
  %spun = icmp sge i32 %i1, {spins}
  br i1 %spun, label %sleep, label %spin
sleep:
  store atomic i32 1, ptr %pwaits seq_cst, align 4
  br label %check
check:
  %a2 = load atomic i32, ptr %pactive seq_cst, align 4
  %none2 = icmp eq i32 %a2, 0
  br i1 %none2, label %woken, label %nap
nap:
  call void @futex_wait(ptr %pactive, i32 %a2)
  br label %check
woken:
  store atomic i32 0, ptr %pwaits seq_cst, align 4
  br label %done
done:
  ret void
}}

define void @spirad_pool_shut(ptr %job) {{
  %s = load atomic i32, ptr %job seq_cst, align 4
  %s1 = or i32 %s, 2
  store atomic i32 %s1, ptr %job seq_cst, align 4
  call void @futex_wake(ptr %job)
  ret void
}}
"""
SYMBOLS = ("spirad_pool_worker", "spirad_pool_open", "spirad_pool_take", "spirad_pool_close",
           "spirad_pool_shut")


def supported() -> bool:
    """Native workers need Linux futexes on x86-64 or AArch64."""
    return sys.platform.startswith("linux") and platform.machine().lower() in _FUTEX


def module_ir() -> str:
    """The pool's LLVM IR for this machine."""
    arch = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)
    pause, decl = _PAUSE.get(arch, ("", ""))
    return _IR.format(nr=_FUTEX[arch], pause=pause, pause_decl=decl, spins=SPINS)


_WORKER_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32)
_OPEN_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
_TAKE_FN = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64)
_JOB_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Pool:
    """`workers - 1` native worker threads (slots 1..workers-1) and the calling thread (slot
    0) over one shared job block; `addrs`: the linked symbols' addresses (`SYMBOLS`)."""

    def __init__(self, workers: int, addrs: dict, start: bool = True):
        self.workers = workers
        self._block = ctypes.create_string_buffer(BLOCK_BYTES + 64)
        self.job = (ctypes.addressof(self._block) + 63) & ~63
        self._open = _OPEN_FN(addrs["spirad_pool_open"])
        self._take = _TAKE_FN(addrs["spirad_pool_take"])
        self._close = _JOB_FN(addrs["spirad_pool_close"])
        self._shut = _JOB_FN(addrs["spirad_pool_shut"])
        worker = _WORKER_FN(addrs["spirad_pool_worker"])
        # each thread holds the block: a pool dropped without `close` never frees memory its
        # workers read; the finalizer shuts them down (at `close`, collection or exit)
        self._threads = [threading.Thread(target=_serve, args=(worker, self._block, self.job, k),
                                          daemon=True, name=f"spirad-cpu-{k}")
                         for k in range(1, workers)] if start else []
        # (start=False, tests: workers that never come; the caller runs every chunk)
        for t in self._threads:
            t.start()
        self._finalizer = weakref.finalize(self, _shut_down, self._shut, self.job, self._block,
                                           self._threads)

    def run(self, fn, bufs, args: int, begin: int, end: int, cancel=None) -> int:
        """Run [begin, end) of task function `fn` (an address or a ctypes function) over the
        workers and this thread; return when every iteration has run (or, once `cancel` is
        set, when none runs any more). Returns the iterations this thread ran."""
        n = end - begin
        chunk = max(1, -(-n // (self.workers * CHUNKS_PER_WORKER)))
        if chunk >= 64:
            chunk = (chunk + 63) & ~63  # whole SIMD lane groups
        fa = fn if type(fn) is int else ctypes.cast(fn, ctypes.c_void_p).value
        self._open(self.job, fa, ctypes.addressof(bufs) if not isinstance(bufs, int) else bufs,
                   args, begin, end, chunk)
        ran = 0
        try:
            if cancel is None:
                ran = self._take(self.job, -1)
            else:  # chunk by chunk, doubling, with a look at `cancel` between
                budget = 1
                while not cancel.is_set():
                    got = self._take(self.job, budget)
                    ran += got
                    if got < budget * chunk:  # none left (or the last, short chunk)
                        break
                    budget *= 2
        finally:
            self._close(self.job)  # the chunks left are not taken; wait for those taken
        return ran

    def close(self) -> None:
        self._finalizer()


def _serve(worker, block, job: int, slot: int) -> None:
    """A worker thread: the native loop until the pool shuts down (`block`: kept alive)."""
    worker(job, slot)


def _shut_down(shut, job: int, block, threads) -> None:
    if threads:
        shut(job)
        for t in threads:
            t.join()
