"""Seeded random reverse-mode kernels whose control flow differs per parallel iteration.

    prog = generate(seed)
    prog.source            # module text: one kernel `k(x, y, n)` over ndarrays
    mod = prog.load(sd)    # under spirad, or under random_grad_programs.reference_sd() (float64)

Why a second generator: tests/support/random_grad_programs.py runs on N = 4 elements (one
partly filled lane group) with mostly uniform trip counts; the SPMD masks of
llvm_codegen/spmd_control.py need loop nests whose trip counts, exits and branches vary from
lane to lane across several lane groups. Each program is `for i in x:` over N = 100 elements
with 2-3 loop-carried locals and a random nest (depth <= 3) of:

* loops: `range(n[i])`, `range((i + c) % m)`, `range(c)`, and `while j < n[i] + c:` with a
  counter — or `while j < n[i] + c and x[i] * (j + 1) < t:`, ending on the input's value —
  an optional `continue` and an optional `break` on `(i * a + j) % b == 0` (their stacks
  measured at launch: no size hint);
* `if` / `else` on `(i + j) % m == r` (j an enclosing loop variable, or 0);
* assignments `v = v * c + w * d`, optionally with smooth math (`sd.sin`, `sd.cos`).

Every condition is an integer one, or compares the input with a threshold `t` that no input of
the test's seeded data comes near, so the result is smooth in `x` and float64 central
differences apply. `prog.math` tells whether a math function occurs (else the lane path must
equal the scalar path bit for bit).
"""
from __future__ import annotations

import importlib.util
import os
import random
import tempfile
from dataclasses import dataclass

N = 100
HEAD = """\
ND = sd.types.ndarray()


@sd.kernel
def k(x: ND, y: ND, n: ND):
    for i in x:
"""


@dataclass
class LaneProgram:
    seed: int
    source: str
    math: bool

    def load(self, sd):
        d = os.path.join(tempfile.gettempdir(), f"spirad_random_lane_{os.getpid()}")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, f"lane_prog_{self.seed}.py")
        if not os.path.exists(path) or open(path).read() != self.source:
            with open(path, "w") as f:
                f.write(self.source)
        spec = importlib.util.spec_from_file_location(f"_lane_prog_{self.seed}_{id(sd)}", path)
        mod = importlib.util.module_from_spec(spec)
        mod.sd = sd
        spec.loader.exec_module(mod)
        return mod


class _Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.r_while = random.Random(seed + 7919)  # the data conditions of `while` loops (apart,
                                                    # so the rest of a seed's program stays)
        self.math = self.r.random() < 0.5
        self.used_math = False
        self.nvars = self.r.randint(2, 3)
        self.loops = 0

    def c(self, lo, hi):
        return f"{self.r.uniform(lo, hi):.3f}"

    def assign(self, ind):
        r = self.r
        v, w = r.randrange(self.nvars), r.randrange(self.nvars)
        if self.math and r.random() < 0.4:
            self.used_math = True
            f = r.choice(["sd.sin", "sd.cos"])
            return [f"{ind}v{v} = v{v} * {self.c(0.5, 0.9)} + {self.c(0.05, 0.3)} * {f}(v{w})"]
        return [f"{ind}v{v} = v{v} * {self.c(0.5, 1.0)} + v{w} * {self.c(-0.3, 0.3)} + "
                f"{self.c(-0.1, 0.1)}"]

    def block(self, ind, depth, loopvars, n):
        out = []
        for _ in range(n):
            k = self.r.random()
            if depth > 0 and k < 0.35:
                out += self.loop(ind, depth, loopvars)
            elif depth > 0 and k < 0.6:
                out += self.if_(ind, depth, loopvars)
            else:
                out += self.assign(ind)
        return out or self.assign(ind)

    def if_(self, ind, depth, loopvars):
        r = self.r
        j = r.choice(loopvars) if loopvars else "0"
        m = r.randint(2, 4)
        out = [f"{ind}if (i + {j}) % {m} == {r.randrange(m)}:"]
        out += self.block(ind + "    ", depth - 1, loopvars, r.randint(1, 2))
        if r.random() < 0.5:
            out += [f"{ind}else:"] + self.block(ind + "    ", depth - 1, loopvars, 1)
        return out

    def loop(self, ind, depth, loopvars):
        r = self.r
        j = f"j{self.loops}"
        self.loops += 1
        inner = loopvars + [j]
        kind = r.choice(["n", "n", "mod", "static", "while"])
        body = self.block(ind + "    ", depth - 1, inner, r.randint(1, 3))
        if kind == "while":
            head = f"{j} < n[i] + {r.randint(0, 2)}"
            if self.r_while.random() < 0.5:
                head += f" and x[i] * ({j} + 1) < {self.r_while.uniform(0.1, 1.6):.4f}"
            out = [f"{ind}{j} = 0", f"{ind}while {head}:", f"{ind}    {j} += 1"]
            if r.random() < 0.5:
                out += [f"{ind}    if (i + {j}) % {r.randint(2, 4)} == 0:", f"{ind}        continue"]
            out += body
            if r.random() < 0.6:
                out += [f"{ind}    if (i * {r.randint(1, 5)} + {j}) % {r.randint(3, 6)} == 0:",
                        f"{ind}        break"]
            return out
        bound = {"n": "n[i]", "mod": f"(i + {r.randint(0, 5)}) % {r.randint(2, 5)}",
                 "static": str(r.randint(1, 3))}[kind]
        return [f"{ind}for {j} in range({bound}):"] + body


def generate(seed: int) -> LaneProgram:
    g = _Gen(seed)
    ind = " " * 8
    lines = [f"{ind}v{k} = x[i] * {g.c(0.3, 1.2)}" for k in range(g.nvars)]
    lines += g.block(ind, 3, [], g.r.randint(2, 4))
    lines += [f"{ind}y[i] = " + " + ".join(f"v{k} * {g.c(0.2, 1.0)}" for k in range(g.nvars))]
    return LaneProgram(seed, HEAD + "\n".join(lines) + "\n", g.used_math)
