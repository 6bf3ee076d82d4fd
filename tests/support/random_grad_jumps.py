"""`break` and `continue` for the random reverse-mode programs (`generate(seed,
features=("jumps",))`, tests/support/random_grad_programs.py): a mixin of its generator.

What it adds to the programs (issue #35: the shapes the plain generator never made):

* jumps in every loop kind: `range` over nb[None] / sf[i], `range(3..5)`, `range(nb[None] + 2)`
  (a jump after a few trips), `sd.static(range(..))` (one-trip loops per iteration in spirad), the
  three `while` forms (their counter then steps at the top of the body, so a `continue` cannot
  skip it), loops nested in loops (a jump leaves its own level), and `continue` at the parallel
  loop's level (Taichi and spirad forbid `break` there); no `range(st[i])` (a task with x1, y2,
  st, two gradients and two adstack buffers needs 9 storage buffers, past Metal's 8);
* jump conditions on integers (the loop's counter, an outer counter, the parallel index, nb[None],
  sf[i]), on input data far from a threshold (`x0[i] > T`, `x0[i] * (j + 1) > T`: the same trips
  for nearby inputs), and on carried locals (`v > T`, T in the widest gap between the values v
  takes there in a forward run of the stand-in, every value at least 1e-3 away: `settle`), so
  the loss stays smooth at the evaluation point;
* jumps as the last statement of an `if` branch (after assignments to locals, or stores), in an
  `else`, in both branches (`break` in one, `continue` in the other), in an `if` nested in an
  `if`, and unconditional;
* locals around the jump: a body-local copy of a carried local declared before it (`w = v`), locals
  assigned before the jump and read after the loop, assigned after it (`v = t`, `v = v + u`), and
  stores that read a local on every trip (the last trip's store wins, as in `z[i] = sd.sin(w)`);
* `@sd.func` helpers with a loop that breaks or continues (called inside parallel loops only: in
  serial code a func's loop would be the kernel's parallel loop).

Everything keeps the rules of the module docstring of random_grad_programs; the plain generator's
programs (no features) are unchanged, seed for seed.
"""
from __future__ import annotations

import re

import numpy as np

PROBE = re.compile(r"__P(\d+)__\((\w+)\)")  # `__P3__(v)`: jump condition 3 on the local v
MARGIN = 1e-3  # how far (relative) every value a carried-value condition sees keeps from its T


class Jumps:
    """Needs the generator's `r`, `c`, `expr`, `assign`, `block`, `row`, `funcs`, `nfunc`,
    `ntask`, `nbody`, `_threshold`, `_trip_threshold`, and `n_rows`, `ndarrays`, `vectors`."""

    # the largest trip count of a loop: `range(5)`, nb[None] + 2 (nb <= 3); a `while` counts
    # from 1 to its head nb[None] + 2, and tests j = head + 1: data thresholds keep clear of
    # `x * (j + 1)` for every j < MAX_TRIP
    MAX_TRIP = 7

    def jump_kinds(self, sc) -> list:
        return ["continue"] if sc.get("jump") == "par" else ["break", "continue"]

    def jump_body(self, t, inner, ind, depth) -> list:
        """The body of a loop that may jump: a body-local first (a copy of a local, or a new
        value), statements with a jump among them, and maybe a store that reads a local last."""
        r = self.r
        head, name, carried = [], None, None
        if inner["locals"] and r.random() < 0.7:
            self.nbody += 1
            name = f"b{self.ntask}_{self.nbody}"
            carried = r.choice(inner["locals"])
            src = r.choice([carried, carried, f"{self.c(0.3, 0.9)} * {carried}",
                            self.expr(t, inner, 1)])
            head = [f"{ind}{name} = {src}"]
            inner["locals"] = inner["locals"] + [name]
        chunks = [self.block(t, inner, ind, depth, 1) for _ in range(r.randint(1, 3))]
        if r.random() < 0.85:
            chunks.insert(r.randint(0, len(chunks)), self.jump(t, inner, ind, depth))
        if name and r.random() < 0.6:  # after the jump: the carried local updated (`v = v + c`,
            # `v = t`, `v = v + u`), then maybe the body-local read by a store (`z[i] = sin(w)`)
            v = carried
            chunks.append([r.choice([f"{ind}{v} = {v} + {self.c(0.1, 0.5)}",
                                     f"{ind}{v} = {name}",
                                     f"{ind}{v} = {name} + {self.c(0.1, 0.5)} * {r.choice(inner['locals'])}",
                                     f"{ind}{v} = sd.sin({v}) * {self.c(0.3, 0.9)} + {name}"])])
        if t.writes and not t.serial and r.random() < 0.5:
            chunks.append(self.sink(t, inner, ind, name if name and r.random() < 0.7 else None))
        return head + [line for c in chunks for line in c]

    def jump(self, t, sc, ind, depth) -> list:
        """A `break` / `continue` of the innermost loop, in one of the shapes of the docstring."""
        r = self.r
        kinds = self.jump_kinds(sc)
        kind = r.choice(kinds)
        i2 = ind + "    "
        form = r.choice(["if", "if", "pre", "pre", "else", "both", "nested", "bare"])
        if form == "bare" and r.random() < 0.5:
            form = "if"
        if form == "both" and len(kinds) < 2:
            form = "pre"

        def pre():  # statements of the branch before its jump (assignments, stores)
            return self.block(t, sc, i2, max(depth - 1, 0), r.randint(1, 2))

        if form == "bare":
            return [f"{ind}{kind}"]
        cond = self.jcond(t, sc)
        if form == "if":
            return [f"{ind}if {cond}:", f"{i2}{kind}"]
        if form == "pre":
            return [f"{ind}if {cond}:"] + pre() + [f"{i2}{kind}"]
        if form == "else":
            return [f"{ind}if {cond}:"] + pre() + [f"{ind}else:"] + \
                (pre() if r.random() < 0.5 else []) + [f"{i2}{kind}"]
        if form == "both":
            other = "continue" if kind == "break" else "break"
            return [f"{ind}if {cond}:"] + pre() + [f"{i2}{kind}", f"{ind}else:"] + \
                (pre() if r.random() < 0.5 else []) + [f"{i2}{other}"]
        return [f"{ind}if {cond}:", f"{i2}if {self.jcond(t, sc)}:"] + \
            ([f"{i2}    {line.strip()}" for line in self.assign(t, sc, "")] if r.random() < 0.5
             else []) + [f"{i2}    {kind}"]

    def jcond(self, t, sc) -> str:
        """A jump condition: integers, or input data far from a threshold."""
        r = self.r
        j = sc.get("jump") if sc.get("jump") != "par" else None
        outer = [v for v in sc["loopvars"] if v != j]
        i = sc["idx"]
        opts = ["nb"] + (["loop"] * 4 if j else []) + (["outer"] if outer else []) + \
            (["carried"] * 2 if sc["locals"] else [])
        if not t.serial:
            opts += ["idx", "int", "data", "data"] + (["loopidx", "trip", "trip"] if j else [])
        k = r.choice(opts)
        if k == "nb":
            return r.choice([f"nb[None] > {r.randrange(3)}", f"nb[None] == {r.randrange(4)}"])
        if k == "loop":
            return r.choice([f"{j} >= {r.randrange(4)}", f"{j} == {r.randrange(4)}",
                             f"{j} % 2 == {r.randrange(2)}", f"{j} + 1 >= nb[None]",
                             f"{j} >= nb[None] - 1"])
        if k == "outer":
            o = r.choice(outer)
            return r.choice([f"{o} >= {r.randrange(3)}", f"{o} % 2 == {r.randrange(2)}",
                             f"{j} >= {o}" if j else f"{o} == 1"])
        if k == "idx":
            return r.choice([f"{i} % 2 == {r.randrange(2)}", f"{i} > {r.randrange(self.n_rows - 1)}",
                             f"{i} == {r.randrange(self.n_rows)}"])
        if k == "int":  # sf, not the ndarray st (Metal's 8 storage buffers: see `loop`)
            src = "sf"
            if j and r.random() < 0.6:
                return r.choice([f"{j} >= {src}[{i}]", f"{j} + 1 == {src}[{i}]"])
            return r.choice([f"{src}[{i}] > {r.randrange(3)}", f"{src}[{i}] == {r.randrange(4)}"])
        if k == "carried":  # its threshold is set once the program is whole (`settle`)
            self.probes[len(self.probes)] = r.choice([">", "<"])
            return f"__P{len(self.probes) - 1}__({r.choice(sc['locals'])})"
        if k == "loopidx":
            return r.choice([f"{j} + {i} >= {r.randrange(1, 5)}", f"{j} >= {i}"])
        name = r.choice(["x0", "x0", "x1", "xs"])
        t.read.add(name)
        if name == "x1":
            t.used_nd.add("x1")
        read = "xs[None]" if name == "xs" else f"{name}[{i}]"
        op = r.choice([">", "<"])
        if k == "data":
            return f"{read} {op} {self._threshold(name)!r}"
        return f"{read} * ({j} + 1) {op} {self._trip_threshold(name, self.MAX_TRIP)!r}"

    def sink(self, t, sc, ind, loc=None) -> list:
        """A store (or loss accumulation) of this task that reads a local (`loc`, or any): in a
        loop, the last trip's store wins."""
        r = self.r
        if loc is None:
            loc = r.choice(sc["locals"]) if sc["locals"] else self.expr(t, sc, 1)
        g = r.choice(sorted(t.writes))
        t.wrote.add(g)
        if g in self.ndarrays:
            t.used_nd.add(g)
        val = r.choice([f"sd.sin({loc})", loc, f"{loc} * {self.c(0.3, 0.9)} + {self.expr(t, sc, 1)}"])
        if g == "loss":
            return [f"{ind}loss[None] += {self.c(0.2, 0.9)} * {val}"]
        row = self.row(t, sc, any_row=False)
        if g in self.vectors:
            return [f"{ind}{g}[{row}][{r.randrange(2)}] = {val}"]
        return [f"{ind}{g}[{row}] = {val}"]

    def loop_helper(self) -> str:
        """An @sd.func whose loop breaks or continues (a new one, or one defined before)."""
        r = self.r
        names = [n for n, _ in self.funcs if n.startswith("h")]
        if names and r.random() < 0.4:
            return r.choice(names)
        name = f"h{self.nfunc}"
        self.nfunc += 1
        kind = r.choice(["break", "continue"])
        cond = r.choice([f"k >= {r.randrange(3)}", f"k % 2 == {r.randrange(2)}",
                         "k + 1 >= nb[None]", f"nb[None] == {r.randrange(4)}"])
        bound = r.choice(["nb[None] + 1", "nb[None]", "3"])
        c1, c2, c3 = self.c(0.3, 0.9), self.c(0.3, 0.9), self.c(0.3, 0.9)
        before = f"u = sd.sin(s) * {c1} + b"
        after = f"s = s * {c2} + u * {c3}"
        body = [f"s = a", f"u = b * {c2}", f"for k in range({bound}):"]
        if r.random() < 0.5:
            body += [f"    {before}", f"    if {cond}:", f"        {kind}", f"    {after}"]
        else:
            body += [f"    {after}", f"    if {cond}:", f"        {before}", f"        {kind}",
                     f"    s = sd.tanh(s + u * {c1})"]
        body.append(f"return s + u * {c3}")
        self.funcs.append((name, f"@sd.func\ndef {name}(a, b):\n" +
                           "".join(f"    {line}\n" for line in body)))
        return name

    def settle(self, source: str, data: dict) -> str:
        """`source` with every carried-value condition `__Pn__(v)` made `v > T` (or `<`), T in
        the widest gap between the values v takes there (a forward run of the float64 stand-in
        on the program's data), the conditions set one after another in source order. A
        condition whose values come within MARGIN of its T (after all are set: one may move
        another's values) becomes one that never holds (`v > 1000.0`), until none does: the
        loss stays smooth at the evaluation point."""
        th: dict = {}
        sites = [int(m.group(1)) for m in PROBE.finditer(source)]
        for n in sites:
            vals = self._probe_run(source, data, th).get(n, [])
            u = np.unique(np.round(vals, 9))
            if len(u) >= 2:
                k = int(np.argmax(np.diff(u)))
                th[n] = float(u[k] + u[k + 1]) / 2
            elif len(u) == 1:
                th[n] = float(u[0]) + self.r.choice([-0.5, 0.5]) * max(1.0, abs(float(u[0])))
            else:
                th[n] = 0.0
            th[n] = float(f"{th[n]:.6g}")
        for _ in range(len(sites) + 1):
            vals = self._probe_run(source, data, th)
            bad = [n for n in sites if any(abs(v - th[n]) < MARGIN * max(1.0, abs(th[n]))
                                           for v in vals.get(n, []))]
            if not bad:
                break
            for n in bad:
                th[n] = 1000.0 if self.probes[n] == ">" else -1000.0
        return PROBE.sub(lambda m: f"{m.group(2)} {self.probes[int(m.group(1))]} "
                                   f"{th[int(m.group(1))]!r}", source)

    def _probe_run(self, source, data, th) -> dict:
        """{condition: the values its local had} in a forward run of the stand-in, conditions
        with a threshold in `th` deciding by it, the others never holding."""
        from tests.support.random_grad_programs import GradProgram, reference_sd
        seen: dict = {}

        def probe(n, v):
            v = float(v)
            seen.setdefault(n, []).append(v)
            if n not in th:
                return False
            return v > th[n] if self.probes[n] == ">" else v < th[n]

        text = PROBE.sub(lambda m: f"sd._probe({m.group(1)}, {m.group(2)})", source)
        ref = reference_sd()
        ref._probe = probe
        mod = GradProgram(self.seed, text, data, fp="f64").load(ref)
        mod.forward()
        return seen
