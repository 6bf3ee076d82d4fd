"""Seeded generator of random spirad programs, as Python source, for reverse-mode tests.

    prog = generate(seed)           # generate(seed, "f32"): the same program over f32 (Metal)
    prog = generate(seed, features=("jumps",))   # with break / continue (below)
    prog.source                     # the module text (printed in every assertion message)
    mod = prog.load(sd)             # run it under spirad: mod.run() launches the kernels and
                                    # their adjoints (on an `sd.ad.Tape`, or `kernel.grad` by hand)
    ref = prog.load(reference_sd()) # the same text under a plain-Python stand-in for `sd`:
                                    # ref.forward() is the float64 oracle for central differences
    prog.data                       # initial values of every global, by name
    prog.grads                      # the globals with a gradient (every one is checked)

Random IR (tests/support/random_kernels.py) exercises code generators; this exercises the whole
user path of reverse mode: frontend, `@sd.func` inlining, offloading into tasks, the adjoint of
every task, the Tape and hand-called `kernel.grad`. Programs hold 2-4 kernels over fields,
ndarrays and a Vector field: loops with static and run-time trip counts (`range(nb[None])`,
ndarray / field values, `while` — on a counter, on input data (`x0[i] * (j + 1) < T`), or
`while True` with a `break` on data — whose stacks are measured at launch, no size hint)
carrying locals, `if`, `@sd.func`s (pure helpers, and parallel
loops wrapped in a func called at a kernel's top level), and smooth math (sin, cos, tanh, exp of
bounded values, +, -, *, a / (b * b + 1)). Stores overwrite on purpose: an element stored twice,
on every trip of a loop, through a linear chain `y[i] = y[i] * c + e`, per Vector component,
by a kernel launched twice in a row, the loss overwritten by a later kernel.

`features=("jumps",)` (tests/support/random_grad_jumps.py, issue #35) adds `break` and `continue`:
in every loop kind above (dynamic ranges, also `range(3..5)` and `range(nb[None] + 2)`, `sd.static`
ranges, the three `while` forms with their counter stepped first), in nested loops (inner and
outer), `continue` at the parallel loop's level (never `break`: Taichi forbids it there), in `if` /
`else` branches, nested `if`s, both branches, unconditional; conditions on integers (counters, the
parallel index, nb / st / sf) or on inputs far from a threshold; a body-local copy of a carried
local before the jump (`w = v`), locals assigned before the jump and read after the loop, updated
after it (`v = t`, `v = v + u`), stores that read a local on every trip (the last one wins), and
@sd.func helpers whose loop jumps (called inside parallel loops). Without features a seed's program
is what it always was.

The gradient of every program is defined under Taichi's rules, which the generator keeps:

* global data access: a global, once read by a task (of this kernel or an earlier one), is never
  written again (the adjoints re-read globals after every forward kernel ran); inside a task, a
  global the task writes is read only by `y[i] = y[i] * c + e` (a linear read of its own row);
* a parallel iteration `i` writes only row `i` (and the loss, by `+=`); serial code writes
  constant rows and overwrites the loss;
* smoothness at the evaluation point: conditions (of `if`, `while`, and of jumps) compare
  integers, or an input (times a small integer: a loop counter + 1) against a threshold far from
  every such value; no abs / min / max / floor;
* scopes as in spirad: a local lives in its block (task locals are declared first, a loop's
  body-locals at the top of its body and read only there); loops only inside parallel loops (the
  outermost `for` of serial code would be the parallel loop); every loop ends (a `continue` cannot
  skip a `while` counter's step).

Every needs_grad global's final `.grad` must equal d loss / d (its initial value), which covers
inputs and intermediates alike: a stored element's gradient is consumed, an element only
accumulated into (or never written) keeps passing it on.
"""
from __future__ import annotations

import importlib.util
import os
import random
import tempfile
import zlib
from contextlib import nullcontext
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from tests.support.random_grad_jumps import Jumps

N = 4
INPUTS = ("x0", "xs", "xv", "x1")        # read only
MIDS = ("y0", "y1", "yv", "y2")          # intermediates: written, then read by later tasks
NDARRAYS = ("x1", "y2", "st")            # passed to kernels as arguments
VECTORS = ("xv", "yv")

DECLS = """\
N = {N}
ND = sd.types.ndarray()
x0 = sd.field(sd.{fp}, shape=N, needs_grad=True)
xs = sd.field(sd.{fp}, shape=(), needs_grad=True)
xv = sd.Vector.field(2, sd.{fp}, shape=N, needs_grad=True)
x1 = sd.ndarray(sd.{fp}, N, needs_grad=True)
y0 = sd.field(sd.{fp}, shape=N, needs_grad=True)
y1 = sd.field(sd.{fp}, shape=N, needs_grad=True)
yv = sd.Vector.field(2, sd.{fp}, shape=N, needs_grad=True)
y2 = sd.ndarray(sd.{fp}, N, needs_grad=True)
loss = sd.field(sd.{fp}, shape=(), needs_grad=True)
nb = sd.field(sd.i32, shape=())
sf = sd.field(sd.i32, shape=N)
st = sd.ndarray(sd.i32, N)
"""
GRADS = INPUTS + MIDS + ("loss",)
FEATURES = ("jumps",)                    # optional program features: `generate(.., features=)`


@dataclass
class GradProgram:
    seed: int
    source: str
    data: dict            # name -> initial np.ndarray (every global)
    grads: tuple = GRADS
    fp: str = "f64"       # the float type of the globals (f32: the same program for Metal)

    def load(self, sd):
        """Execute the source as a fresh module with `sd` bound (spirad, or the stand-in)."""
        tag = f"{self.seed}_{self.fp}_{zlib.crc32(self.source.encode()):08x}"  # a shrunk
        path = _source_file(tag, self.source)     # program is another file (`inspect` caches lines)
        name = f"_random_grad_program_{tag}_{id(sd)}"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        mod.sd = sd
        spec.loader.exec_module(mod)
        for k, v in self.data.items():
            getattr(mod, k).from_numpy(v)
        return mod


def _source_file(seed, source) -> str:
    """A file per seed (the frontend reads kernel source with `inspect`)."""
    d = os.path.join(tempfile.gettempdir(), f"spirad_random_grad_{os.getpid()}")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"prog_{seed}.py")
    if not os.path.exists(path) or open(path).read() != source:
        with open(path, "w") as f:
            f.write(source)
    return path


# -- the plain-Python stand-in for `sd` ------------------------------------------------------------


class RefArray:
    """A field or ndarray of the reference run: numpy storage, spirad's indexing (`a[None]`)."""

    def __init__(self, dtype, shape, vec=0):
        if shape in ((), None):
            shape = ()
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.shape = shape
        self.a = np.zeros(shape + ((vec,) if vec else ()), dtype)

    def __getitem__(self, idx):
        return self.a[() if idx is None else idx]   # a Vector row is a view: `y[i][0] = v` works

    def __setitem__(self, idx, v):
        self.a[() if idx is None else idx] = v

    def __iter__(self):
        return iter(range(self.shape[0]))

    def from_numpy(self, v):
        self.a[...] = v

    def to_numpy(self):
        return self.a.copy()


class _RefVector:
    def __new__(cls, comps):
        return np.array(comps, np.float64)

    @staticmethod
    def field(n, dtype, shape=None, needs_grad=False):
        return RefArray(dtype, shape, n)


def reference_sd():
    ident = lambda f: f  # noqa: E731
    return SimpleNamespace(
        f64=np.float64, f32=np.float64, i32=np.int64,  # the oracle computes in float64
        field=lambda dtype, shape=None, needs_grad=False: RefArray(dtype, shape),
        ndarray=lambda dtype, shape, needs_grad=False: RefArray(dtype, shape),
        Vector=_RefVector, kernel=ident, func=ident, static=ident,
        types=SimpleNamespace(ndarray=lambda: None), template=lambda: None,
        ad=SimpleNamespace(Tape=lambda loss=None: nullcontext()),
        sin=np.sin, cos=np.cos, tanh=np.tanh, exp=np.exp)


# -- the generator --------------------------------------------------------------------------------


class _Task:
    """What one task may touch: `writes` (targets it may store / add to), and what it read."""

    def __init__(self, writes, serial, no_read=()):
        self.writes = set(writes)
        self.no_read = set(no_read)   # also not readable (see `_Gen.kernel`)
        self.serial = serial          # no parallel index: constant rows only
        self.read = set()             # globals read (other than `y[i] = c * y[i] + e`, a linear
                                      # read of a target, which the adjoint needs no value of)
        self.wrote = set()
        self.used_nd = set()          # ndarrays referenced (kernel / func parameters)


class _Gen(Jumps):
    n_rows, ndarrays, vectors = N, NDARRAYS, VECTORS

    def __init__(self, seed: int, fp: str = "f64", features=()):
        unknown = set(features) - set(FEATURES)
        if unknown:
            raise ValueError(f"unknown features {sorted(unknown)}; known: {FEATURES}")
        self.jumps = "jumps" in features  # break / continue (tests/support/random_grad_jumps.py)
        self.nbody = 0                # body-locals of loops that jump (names unique per program)
        self.probes = {}              # carried-value jump conditions: number -> ">" / "<"
        self.r = random.Random(seed)
        self.r_while = random.Random(seed + 7919)  # the form of each `while` (kept apart so the
                                                    # rest of a seed's program stays the same)
        self.seed = seed
        self.fp = fp
        self.frozen = set()           # globals read by an earlier task: never written again
        self.funcs = []               # source of @sd.func definitions
        self.kernels = []             # source of @sd.kernel definitions
        self.calls = []               # (kernel name, call argument text)
        self.nfunc = 0
        self.ntask = 0
        self.data = self._data()

    def _data(self):
        r = np.random.default_rng(self.seed)
        d = {
            "x0": r.uniform(0.1, 0.9, N), "xs": np.array(r.uniform(0.2, 0.8)),
            "xv": r.uniform(-0.5, 0.5, (N, 2)), "x1": r.uniform(0.1, 0.9, N),
            "y0": r.uniform(-0.5, 0.5, N), "y1": r.uniform(-0.5, 0.5, N),
            "yv": r.uniform(-0.5, 0.5, (N, 2)), "y2": r.uniform(-0.5, 0.5, N),
            "loss": np.array(0.3),
            "nb": np.array(int(r.choice([0, 1, 2, 2, 3, 3]))), "sf": r.integers(0, 4, N),
            "st": r.integers(0, 4, N),
        }
        return {k: (v.astype(np.int32) if k in ("nb", "sf", "st") else v.astype(np.float64))
                for k, v in d.items()}

    def c(self, lo, hi) -> str:
        """A random constant, as source text."""
        return repr(round(self.r.uniform(lo, hi), 2))

    def _threshold(self, name="x0"):
        """A value between two neighbouring inputs `name` (x0, x1, xs), far from each of them."""
        v = np.sort(np.concatenate([[0.0, 1.0], np.ravel(self.data[name])]))
        k = int(np.argmax(np.diff(v)))
        return round(float(v[k] + v[k + 1]) / 2, 4)

    def _trip_threshold(self, name, trips):
        """A value T far from every `name * m` (m = 1 .. trips + 1): `name[..] * (j + 1) < T`
        ends a loop at a data-dependent trip, the same one for nearby inputs."""
        base = np.ravel(self.data[name])
        v = np.sort(np.concatenate([base * m for m in range(1, trips + 2)]))
        gaps = np.diff(v)
        k = int(self.r_while.choice(np.argsort(gaps)[-3:]))  # one of the three widest gaps
        return round(float(v[k] + v[k + 1]) / 2, 4)

    # -- expressions -------------------------------------------------------------------------------
    def leaf(self, t: _Task, sc) -> str:
        r = self.r
        opts = ["const", "int", "global", "global"] + ["local"] * (2 if sc["locals"] else 0)
        if sc["args"]:
            opts.append("arg")
        if sc["vlocals"]:
            opts.append("vcomp")
        k = r.choice(opts)
        if k == "const":
            return self.c(-0.9, 0.9)
        if k == "int":
            ints = ([] if t.serial else [sc["idx"]]) + sc["loopvars"]
            if not ints:
                return self.c(0.1, 0.9)
            return f"({r.choice(ints)} + 1) * {self.c(0.05, 0.3)}"
        if k == "local":
            return r.choice(sc["locals"])
        if k == "arg":
            return r.choice(sc["args"])
        if k == "vcomp":
            return f"{r.choice(sc['vlocals'])}[{r.randrange(2)}]"
        return self.read_global(t, sc)

    def row(self, t: _Task, sc, any_row=True) -> str:
        if t.serial:
            return str(self.r.randrange(N))
        i = sc["idx"]
        if not any_row:
            return i
        return self.r.choice([i, i, f"({i} + 1) % N", f"N - 1 - {i}", str(self.r.randrange(N))])

    def read_global(self, t: _Task, sc) -> str:
        r = self.r
        names = [g for g in INPUTS + MIDS if g not in t.writes and g not in t.no_read]
        g = r.choice(names)
        t.read.add(g)
        if g in NDARRAYS:
            t.used_nd.add(g)
        if g == "xs":
            return "xs[None]"
        s = f"{g}[{self.row(t, sc)}]"
        return f"{s}[{r.randrange(2)}]" if g in VECTORS else s

    def expr(self, t: _Task, sc, depth=2) -> str:
        r = self.r
        if depth <= 0 or r.random() < 0.25:
            return self.leaf(t, sc)
        a = self.expr(t, sc, depth - 1)
        k = r.randrange(10)
        if k == 0:
            return f"({a} + {self.expr(t, sc, depth - 1)})"
        if k == 1:
            return f"({a} - {self.expr(t, sc, depth - 1)})"
        if k == 2:
            return f"{a} * {self.expr(t, sc, depth - 1)}"
        if k == 3:
            return f"{self.c(-1.2, 1.2)} * {a}"
        if k == 4:
            return f"sd.sin({a})"
        if k == 5:
            return f"sd.cos({a})"
        if k == 6:
            return f"sd.tanh({a})"
        if k == 7:
            return f"sd.exp({r.choice(['sd.tanh', 'sd.sin'])}({a}) * 0.5)"
        if k == 8:
            b = self.expr(t, sc, depth - 1)
            return f"{a} / ({b} * {b} + 1.0)"
        return f"{self.helper(t)}({a}, {self.expr(t, sc, depth - 1)})"

    def helper(self, t: _Task) -> str:
        """A pure @sd.func of two values (a new one, or one defined before)."""
        if self.jumps and not t.serial and self.r.random() < 0.3:
            return self.loop_helper()
        names = [n for n, _ in self.funcs if n.startswith("g")]
        if names and self.r.random() < 0.5:
            return self.r.choice(names)
        name = f"g{self.nfunc}"
        self.nfunc += 1
        c1, c2 = self.c(0.2, 0.9), self.c(0.2, 0.9)
        body = self.r.choice([f"return sd.sin(a) * {c1} + b * sd.cos(b * {c2})",
                              f"t = sd.tanh(a * b)\n    return t * {c1} + a * {c2}",
                              f"return a / (b * b + 1.0) + {c1} * sd.exp(sd.sin(b) * 0.5)"])
        self.funcs.append((name, f"@sd.func\ndef {name}(a, b):\n    {body}\n"))
        return name

    def vexpr(self, t: _Task, sc) -> str:
        r = self.r
        k = r.randrange(3)
        if k == 0 or not sc["vlocals"]:
            return f"sd.Vector([{self.expr(t, sc, 1)}, {self.expr(t, sc, 1)}])"
        w = r.choice(sc["vlocals"])
        if k == 1:
            return f"{w} * {self.c(0.3, 0.9)} + sd.sin({w}) * {self.c(0.1, 0.5)}"
        return f"sd.tanh({w}) * {self.expr(t, sc, 1)}"

    # -- statements --------------------------------------------------------------------------------
    def cond(self, t: _Task, sc) -> str:
        r = self.r
        opts = ["nb"]
        if not t.serial:
            opts += ["idx", "x0"]
        if sc["loopvars"]:
            opts.append("loop")
        k = r.choice(opts)
        if k == "nb":
            return f"nb[None] > {r.randrange(3)}"
        if k == "idx":
            return r.choice([f"{sc['idx']} % 2 == 0", f"{sc['idx']} > {r.randrange(N - 1)}"])
        if k == "loop":
            return f"{r.choice(sc['loopvars'])} % 2 == {r.randrange(2)}"
        t.read.add("x0")
        return f"x0[{sc['idx']}] > {self._threshold()!r}"

    def store(self, t: _Task, sc, ind) -> list:
        """A write of a target of this task: a store, a linear chain, or an accumulation."""
        r = self.r
        targets = sorted(t.writes)
        g = r.choice(targets)
        t.wrote.add(g)
        if g in NDARRAYS:
            t.used_nd.add(g)
        if g == "loss":
            if t.serial and r.random() < 0.6:
                return [f"{ind}loss[None] = {self.expr(t, sc)}"]
            return [f"{ind}loss[None] += {self.expr(t, sc)}"]
        row = self.row(t, sc, any_row=False)
        k = r.randrange(6)
        if g in VECTORS:
            if k <= 1:
                return [f"{ind}{g}[{row}] = {self.vexpr(t, sc)}"]
            if k == 2:
                return [f"{ind}{g}[{row}] = {g}[{row}] * {self.c(0.3, 0.9)} + {self.vexpr(t, sc)}"]
            if k == 3:
                return [f"{ind}{g}[{row}] += {self.vexpr(t, sc)}"]
            c = r.randrange(2)
            return [f"{ind}{g}[{row}][{c}] = {self.expr(t, sc)}"]
        if k <= 1:
            return [f"{ind}{g}[{row}] = {self.expr(t, sc)}"]
        if k == 2:  # stored twice in a row: the first value is dead
            return [f"{ind}{g}[{row}] = {self.expr(t, sc)}" for _ in range(2)]
        if k == 3:
            return [f"{ind}{g}[{row}] += {self.expr(t, sc)}"]
        return [f"{ind}{g}[{row}] = {self.c(0.3, 0.9)} * {g}[{row}] + {self.expr(t, sc)}"]

    def assign(self, t: _Task, sc, ind) -> list:
        r = self.r
        if sc["vlocals"] and r.random() < 0.3:
            w = r.choice(sc["vlocals"])
            if r.random() < 0.5:
                return [f"{ind}{w}[{r.randrange(2)}] = {self.expr(t, sc)}"]
            return [f"{ind}{w} = {self.vexpr(t, sc)}"]
        v = r.choice(sc["locals"])
        k = r.randrange(5 if self.jumps else 3)
        if k == 3:  # a copy (`v = t`): a value forwarded, not recomputed
            return [f"{ind}{v} = {r.choice(sc['locals'])}"]
        if k == 4:  # a linear update (`v = v + u`)
            return [f"{ind}{v} = {v} + {self.c(0.1, 0.5)} * {r.choice(sc['locals'])}"]
        if k == 0:  # a contraction: loop-carried values stay bounded
            return [f"{ind}{v} = sd.tanh({v} * {self.c(0.5, 1.1)} + {self.expr(t, sc)})"]
        if k == 1:
            return [f"{ind}{v} = {self.c(0.3, 0.7)} * {v} + 0.4 * sd.sin({self.expr(t, sc)})"]
        return [f"{ind}{v} = {self.expr(t, sc)}"]

    def loop(self, t: _Task, sc, ind, depth) -> list:
        r = self.r
        j = f"j{len(sc['loopvars'])}"
        kinds = ["static", "nb", "nb"] + ([] if t.serial else ["st", "sf"]) + ["while"]
        if self.jumps:  # longer loops: a jump after a few trips (stores overwritten before it);
            # no `st`: with x1, y2, their gradients and two adstack buffers a task would need 9
            # storage buffers, past Metal's 8 (through wgpu)
            kinds = [k for k in kinds if k != "st"] + ["const", "nb2", "while", "static"]
        k = r.choice(kinds)
        if k == "while":  # its counter is a variable of this scope: a later `for j0` beside it
            j = "c" + j   # must not reuse the name (Taichi's rule, spirad's too)
        inner = dict(sc, loopvars=sc["loopvars"] + [j])
        if self.jumps:
            inner["jump"] = j
            body = self.jump_body(t, inner, ind + "    ", depth - 1)
        else:
            body = self.block(t, inner, ind + "    ", depth - 1, r.randint(1, 3))
        after = []  # a store after the loop that reads a local (assigned before a jump, maybe)
        if self.jumps and t.writes and r.random() < 0.4:
            after = self.sink(t, sc, ind)
        if k == "while":
            head = f"nb[None] + {r.randrange(3 if self.jumps else 2)}"
            return self.while_loop(t, sc, ind, j, head, body) + after
        bound = {"static": str(r.randint(1, 3)), "nb": "nb[None]",
                 "st": f"st[{sc.get('idx')}]", "sf": f"sf[{sc.get('idx')}]",
                 "nb2": "nb[None] + 2"}.get(k)
        if k == "const":  # (drawn only here: the plain programs' draws stay as they were)
            bound = str(r.randint(3, 5))
        if k == "st":
            t.used_nd.add("st")
        if k == "static" and r.random() < (0.5 if self.jumps else 0.3):
            return [f"{ind}for {j} in sd.static(range({bound})):"] + body + after
        return [f"{ind}for {j} in range({bound}):"] + body + after

    def while_loop(self, t: _Task, sc, ind, j, head, body) -> list:
        """A `while` on the counter `j < head`, or also on input data, or `while True` with a
        `break` on data: trip counts no size expression bounds (measured at launch). With jumps,
        the counter steps first in the body (a `continue` must not skip it)."""
        form = self.r_while.choice(["counter", "data", "data", "break", "break"])
        if self.jumps:
            return self.while_top(t, sc, ind, j, head, body, form)
        if form == "counter":
            return [f"{ind}{j} = 0", f"{ind}while {j} < {head}:"] + body + [f"{ind}    {j} += 1"]
        cap = self.r_while.randint(2, 4)
        if t.serial:
            name, read = "xs", "xs[None]"
        else:
            name, read = "x0", f"x0[{sc['idx']}]"
        t.read.add(name)
        lim = self._trip_threshold(name, cap)
        if form == "data":
            return ([f"{ind}{j} = 0", f"{ind}while {j} < {cap} and {read} * ({j} + 1) < {lim!r}:"]
                    + body + [f"{ind}    {j} += 1"])
        return ([f"{ind}{j} = 0", f"{ind}while True:"] + body +
                [f"{ind}    {j} += 1", f"{ind}    if {j} >= {head} or {read} * {j} > {lim!r}:",
                 f"{ind}        break"])

    def while_top(self, t: _Task, sc, ind, j, head, body, form) -> list:
        """`while_loop`'s three forms, the counter stepped at the top of the body: the body sees
        j = 1 .. (trips), and a `continue` in it cannot skip the step or the exit test."""
        step = [f"{ind}    {j} += 1"]
        if form == "counter":
            return [f"{ind}{j} = 0", f"{ind}while {j} < {head}:"] + step + body
        if t.serial:
            name, read = "xs", "xs[None]"
        else:
            name, read = "x0", f"x0[{sc['idx']}]"
        t.read.add(name)
        if form == "data":
            cap = self.r_while.randint(2, 4)
            lim = self._trip_threshold(name, cap)
            return ([f"{ind}{j} = 0", f"{ind}while {j} < {cap} and {read} * ({j} + 1) < {lim!r}:"]
                    + step + body)
        lim = self._trip_threshold(name, self.MAX_TRIP)
        return ([f"{ind}{j} = 0", f"{ind}while True:"] + step +
                [f"{ind}    if {j} > {head} or {read} * {j} > {lim!r}:", f"{ind}        break"] + body)

    def block(self, t: _Task, sc, ind, depth, n) -> list:
        out = []
        for _ in range(n):
            if self.jumps and sc.get("jump") and depth > 0 and self.r.random() < 0.12:
                out += self.jump(t, sc, ind, depth)
                continue
            k = self.r.randrange(10)
            if self.jumps:  # more loops: 3 in 10 stores, 3 assignments, 3 loops, 1 if
                k = (0, 1, 2, 4, 5, 6, 7, 8, 8, 9)[k]
            if k < 4 and t.writes:
                out += self.store(t, sc, ind)
            elif k < 7 or depth <= 0 or (k < 9 and t.serial):
                out += self.assign(t, sc, ind)
            elif k < 9:
                out += self.loop(t, sc, ind, depth)
            else:
                then = self.block(t, sc, ind + "    ", depth - 1, self.r.randint(1, 2))
                out += [f"{ind}if {self.cond(t, sc)}:"] + then
                if self.r.random() < 0.5:
                    out += [f"{ind}else:"] + self.block(t, sc, ind + "    ", depth - 1, 1)
        return out

    def body(self, t: _Task, idx, ind, args) -> list:
        """Locals declared first (a local's scope is its block in spirad), then statements."""
        r = self.r
        sc = {"idx": idx, "locals": [], "vlocals": [], "loopvars": [], "args": args,
              "jump": "par" if self.jumps and idx is not None else None}  # `continue` only
        out = []
        self.ntask += 1
        for k in range(r.randint(1, 2)):  # names unique per task: tasks of a kernel share a scope
            out.append(f"{ind}a{self.ntask}_{k} = {self.expr(t, sc, 1)}")
            sc["locals"].append(f"a{self.ntask}_{k}")
        if r.random() < 0.4:
            out.append(f"{ind}w{self.ntask} = {self.vexpr(t, sc)}")
            sc["vlocals"].append(f"w{self.ntask}")
        out += self.block(t, sc, ind, 2, r.randint(2, 4))
        if t.writes and not t.wrote:
            out += self.store(t, sc, ind)
        return out

    # -- kernels -----------------------------------------------------------------------------------
    def pick_writes(self):
        free = [g for g in MIDS if g not in self.frozen]
        w = set(self.r.sample(free, min(len(free), self.r.randint(1, 2)))) if free else set()
        if not w or self.r.random() < 0.3:
            w.add("loss")
        return w

    def task(self, kind, args, writes, no_read) -> tuple:
        """(lines of the kernel body, the task and what it touched). Serial code
        has no loops (a kernel's outermost `for` is its parallel loop); a "func" task is a
        parallel loop wrapped in an @sd.func called at the kernel's top level."""
        t = _Task(writes, kind == "serial", no_read)
        if kind == "serial":
            lines = self.body(t, None, "    ", args)
        elif kind == "func":
            name = f"par{self.nfunc}"
            self.nfunc += 1
            inner = self.body(t, "i", "        ", [])
            nds = sorted(t.used_nd)
            params = ", ".join(f"{g}: sd.template()" for g in nds)
            self.funcs.append((name, f"@sd.func\ndef {name}({params}):\n    for i in range(N):\n" +
                               "\n".join(inner) + "\n"))
            lines = [f"    {name}({', '.join(nds)})"]
        else:
            over = self.r.choice(["x0", "range(N)", "x1", "y0"])
            if over == "x1":
                t.used_nd.add("x1")
            lines = [f"    for i in {over}:"] + self.body(t, "i", "        ", args)
        self.frozen |= t.read
        return lines, t

    def kernel(self, tasks_spec, loss_kernel=False):
        name = f"k{len(self.kernels)}"
        args = ["c"] if self.r.random() < 0.4 else []
        lines, used, read, wrote = [], set(), set(), set()
        serial_wrote = set()
        for kind, writes in tasks_spec:
            if writes is None:  # picked only now: earlier tasks' reads froze their globals
                writes = self.pick_writes()
            # serial code and func-wrapped loops may end up in one serial task: one of them must
            # not read what an earlier one wrote (a read of a global its own task overwrites)
            no_read = serial_wrote if kind != "par" else ()
            ls, t = self.task(kind, args, writes, no_read)
            if kind != "par":
                serial_wrote |= t.wrote
            lines += ls
            used |= t.used_nd
            read |= t.read
            wrote |= t.wrote
        if loss_kernel:
            ls, nds = self.loss_reduction()
            lines += ls
            used |= nds
        nds = sorted(used)
        params = [f"{g}: ND" for g in nds] + [f"{a}: sd.{self.fp}" for a in args]
        self.kernels.append(f"@sd.kernel\ndef {name}({', '.join(params)}):\n" +
                            "\n".join(lines) + "\n")
        call = nds + [self.c(0.3, 1.2) for _ in args]
        self.calls.append((name, ", ".join(call)))
        if not read & wrote and not loss_kernel and self.r.random() < 0.3:
            # launched again at once: overwrites its own outputs, which nothing has read yet
            call = nds + [self.c(0.3, 1.2) for _ in args]
            self.calls.append((name, ", ".join(call)))

    def loss_reduction(self):
        """The last task: every intermediate (and an input) reaches the loss non-linearly."""
        terms = ["0.5 * y0[i] * y0[i]", "sd.sin(y1[i]) * x0[i]", "yv[i][0] * yv[i][1]",
                 "sd.tanh(y2[i]) * 0.7", "sd.cos(yv[i][1]) * 0.3", "x1[i] * y1[i]"]
        self.r.shuffle(terms)
        return (["    for i in range(N):", f"        loss[None] += {' + '.join(terms)}"],
                {"y2", "x1"})

    def program(self) -> GradProgram:
        r = self.r
        for _ in range(r.randint(1, 3)):
            spec = [(r.choice(["par", "par", "func", "serial"]), None)
                    for _ in range(r.randint(1, 2))]
            self.kernel(spec)
        last = []
        if r.random() < 0.5:
            last.append(("serial", {"loss"}))  # overwrites the loss (or adds to it) first
        self.kernel(last, loss_kernel=True)
        manual = r.random() < 0.4
        head = (f"# random reverse-mode program, seed {self.seed} "
                f"(tests/support/random_grad_programs.py)\n")
        src = [head, DECLS.format(N=N, fp=self.fp)]
        src += [f for _, f in self.funcs]
        src += self.kernels
        fwd = [f"    {k}({a})" for k, a in self.calls]
        if manual:
            rev = [f"    {k}.grad({a})" for k, a in reversed(self.calls)]
            src.append("def run():\n" + "\n".join(fwd) + "\n    loss.grad[None] = 1.0\n" +
                       "\n".join(rev) + "\n")
        else:
            src.append("def run():\n    with sd.ad.Tape(loss=loss):\n" +
                       "\n".join("    " + s for s in fwd) + "\n")
            if "loss" in self.data:  # a Tape starts the loss from 0 (Taichi's semantics)
                self.data["loss"] = np.zeros_like(self.data["loss"])
        src.append("def forward():\n" + "\n".join(fwd) + "\n")
        source = "\n".join(src)
        if self.probes:  # thresholds of conditions on carried values, from a forward run
            source = self.settle(source, self.data)
        return GradProgram(self.seed, source, self.data, fp=self.fp)


def generate(seed: int, fp: str = "f64", features=()) -> GradProgram:
    """The program of `seed`; `fp`: its globals' float type (the same program in f32 for
    backends without f64: Metal); `features`: optional features (`FEATURES`): "jumps" adds
    `break` / `continue` (tests/support/random_grad_jumps.py)."""
    return _Gen(seed, fp, tuple(features)).program()
