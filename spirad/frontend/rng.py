"""`sd.random(dtype=float)` in kernels: per-thread counter-based random streams.

Each thread of a parallel loop (and each serial stretch of a kernel) owns a u32 state in a local
slot, made at the first `random()` call and placed at the start of the loop body (`anchor`):

    state0 = hash(hash(thread index + hash(launch ^ seed)) ^ site)
    each call: state += 0x9E3779B9; value = hash(state)     (hash: Wellons' lowbias32)

`seed` is `init(random_seed=...)` (0 by default), so a program is reproducible; `launch` is read
from an internal u32 counter field that every launch of a kernel using random() increments at its
end, so successive launches draw new numbers (as Taichi's persistent RNG states do); `site`
tells apart the slots of one kernel. A 32-bit value takes one hash: f32 its top 24 bits scaled
to [0, 1), i32 / u32 the hash itself. A 64-bit value takes two consecutive hashes (hi, lo), as
Taichi's i64 / f64 carry 64 / 53 random bits (issue #35: one hash left the top 32 bits of an
i64 zero and all but 24 bits of an f64's mantissa): i64 / u64 are hi << 32 | lo, f64 is the top
53 bits of that scaled to [0, 1). The adjoint of a kernel re-reads the counter, so it does not see the forward
launch's numbers: under autodiff, draw random numbers into a field in a separate kernel.
`hash_u32` / `reference_stream` mirror the generator in numpy (tests compare bit for bit).
"""
from __future__ import annotations

import numpy as np

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradTypeError
from kernel_ir.ops import Op

GOLDEN = 0x9E3779B9


class RngAnchor:
    """Where a stream's slot goes: a block under construction (the builder's list), a position
    in it, and the thread index (None: a serial stretch, index 0)."""

    def __init__(self, nodes: list, pos: int, index):
        self.nodes, self.pos, self.index = nodes, pos, index
        self.slot = None


def enter_parallel(ctx, index):
    """Called at the start of a parallel loop body: its threads get their own streams."""
    saved = ctx.rng_anchor
    ctx.rng_anchor = RngAnchor(ctx.b._stack[-1], len(ctx.b._stack[-1]), index)
    return saved


def leave_parallel(ctx, saved):
    """After a parallel loop: the code that follows is a new serial stretch (a new task)."""
    ctx.rng_anchor = RngAnchor(ctx.b._stack[-1], len(ctx.b._stack[-1]), None)


def counter_field(state):
    """The state's launch counter (an internal u32 field), created on first use."""
    if state.rng is None:
        from ..data.field import internal_field
        state.rng = internal_field(T.u32, (), "rng_launch_counter")
    return state.rng


def _hash(b, x):
    def c(v):
        return b.const(v, T.u32)
    x = b.binary(Op.XOR, x, b.binary(Op.SHR, x, c(16)))
    x = b.binary(Op.MUL, x, c(0x7FEB352D))
    x = b.binary(Op.XOR, x, b.binary(Op.SHR, x, c(15)))
    x = b.binary(Op.MUL, x, c(0x846CA68B))
    return b.binary(Op.XOR, x, b.binary(Op.SHR, x, c(16)))


def _make_slot(v, anchor):
    """The stream's slot and its initial state, inserted at the anchor."""
    ctx, b = v.ctx, v.ctx.b
    seed = ctx.state.options.random_seed & 0xFFFFFFFF
    ctx.rng_sites += 1
    site = ctx.rng_sites
    ref = counter_field(ctx.state).ref()
    ctx.rng_used = True
    saved_stack = b._stack
    b._stack = [[]]  # build the init code apart, then splice it in at the anchor
    try:
        slot = b.alloca(T.u32, "rng_state")
        idx = anchor.index
        idx = b.const(0, T.u32) if idx is None else b.cast(idx, T.u32)
        launch = b.global_load(ref, ())
        s = _hash(b, b.binary(Op.XOR, launch, b.const(seed, T.u32)))
        s = _hash(b, b.binary(Op.ADD, idx, s))
        s = _hash(b, b.binary(Op.XOR, s, b.const(site * GOLDEN & 0xFFFFFFFF, T.u32)))
        b.store(slot, s)
        init = b._stack[0]
    finally:
        b._stack = saved_stack
    anchor.nodes[anchor.pos:anchor.pos] = init
    anchor.slot = slot
    return slot


def _anchor(v):
    """The current stream: the innermost anchor whose block is still being built."""
    ctx = v.ctx
    a = ctx.rng_anchor
    if a is None or not any(a.nodes is lst for lst in ctx.b._stack):
        # e.g. after an @func region closed: a new stream from here (another site)
        a = ctx.rng_anchor = RngAnchor(ctx.b._stack[-1], len(ctx.b._stack[-1]),
                                       a.index if a is not None else None)
    return a


def h_random(v, args, kw, node):
    dtype = args[0] if args else kw.get("dtype", float)
    if len(args) + len(kw) > 1:
        raise v.ctx.error(SpiradTypeError, "random() takes one argument, dtype", node)
    dtype = T.from_python(dtype, v.ctx.default_fp, v.ctx.default_ip)
    if not isinstance(dtype, T.DType) or dtype == T.u1:
        raise v.ctx.error(SpiradTypeError, f"random(dtype): dtype must be float, int or a "
                                           f"numeric sd type, got {dtype!r}", node)
    a = _anchor(v)
    slot = a.slot or _make_slot(v, a)
    b = v.ctx.b
    if dtype.bits == 64:
        hi, lo = (b.cast(_draw(b, slot), T.u64) for _ in range(2))
        h = b.binary(Op.OR, b.binary(Op.SHL, hi, b.const(32, T.u64)), lo)
        if not dtype.is_float:
            return b.cast(h, dtype)
        top = b.binary(Op.SHR, h, b.const(11, T.u64))  # < 2**53: exact in f64
        return b.binary(Op.MUL, b.cast(b.cast(top, T.i64), dtype), b.const(2.0 ** -53, dtype))
    h = _draw(b, slot)
    if dtype.is_float:
        top = b.binary(Op.SHR, h, b.const(8, T.u32))
        f = b.cast(b.cast(top, T.i32), dtype)  # < 2**24: exact in f32
        return b.binary(Op.MUL, f, b.const(1.0 / (1 << 24), dtype))
    return b.cast(h, dtype)


def _draw(b, slot):
    """The next u32 hash of the stream in `slot`."""
    s = b.binary(Op.ADD, b.load(slot), b.const(GOLDEN, T.u32))
    b.store(slot, s)
    return _hash(b, s)


def finish_kernel(ctx):
    """At the end of a kernel that draws random numbers: bump the launch counter (serial)."""
    if not ctx.rng_used:
        return
    b = ctx.b
    ref = counter_field(ctx.state).ref()
    b.global_store(ref, (), b.binary(Op.ADD, b.global_load(ref, ()), b.const(1, T.u32)))


# -- numpy mirror (tests) -------------------------------------------------------------------------
def hash_u32(x):
    x = np.asarray(x, dtype=np.uint64) & 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    x ^= x >> 16
    return x


def reference_stream(seed, launch, index, site, calls):
    """The first `calls` u32 hashes of thread `index`'s stream (numpy, for tests)."""
    s = hash_u32(launch ^ seed)
    s = hash_u32((np.asarray(index, np.uint64) + s) & 0xFFFFFFFF)
    s = hash_u32(s ^ (site * GOLDEN & 0xFFFFFFFF))
    out = []
    for _ in range(calls):
        s = (s + GOLDEN) & 0xFFFFFFFF
        out.append(hash_u32(s))
    return out
