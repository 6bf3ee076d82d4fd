"""Shrink a failing random reverse-mode program (tests/support/random_grad_programs.py) to a few
lines that still fail the same way.

    small = shrink(prog, arch)          # spirad initialised per candidate on `arch`
    print(report(small, arch))          # the program, its data, the gradients that differ

    python -m tests.support.shrink_grad --arch cpu --seed 32 --features jumps

The failure is what `tests.support.random_grad_check.outcome` says of the program: "grad" (a
gradient differs from the float64 oracle), "forward", or "error: <type>: <message>". A candidate is
kept when its outcome is the same (an error: the same type and message, digits aside); any other
outcome (ok, another error, a stand-in that fails: an invalid program, a loss that is not smooth
at the data: a condition moved close to its threshold) rejects it.

Candidates, greedy, biggest first, until none is kept (or the budget is spent): a kernel launch
dropped (from `forward()` and `run()` alike), a kernel or func deleted, a half or a quarter of a
block deleted, a statement deleted, an `if` / loop replaced by its body (a loop's counter then a
constant 0), an `else` dropped, a loop's bound made 1 or 2, a `sd.static` loop made dynamic, an
expression replaced by one of its operands or by 0.5. Never touched (a program that would not
end): `name += ..` (the counters of `while` loops) and the exit `if .. break` of a `while True`.
At the end the globals nothing reads any more are dropped from the declarations and the data.
"""
from __future__ import annotations

import argparse
import ast
import copy
import re
import sys
import time
import warnings

import numpy as np

from tests.support.random_grad_check import arch_fp, init_kwargs, outcome, reference_grads
from tests.support.random_grad_programs import FEATURES, GradProgram, generate

HALF = 0.5


def same_failure(a: str, b: str) -> bool:
    if a.startswith("error") or b.startswith("error"):
        norm = lambda s: re.sub(r"\d+", "#", s)  # noqa: E731 - line numbers, sizes
        return norm(a) == norm(b)
    return a == b


def run_check(prog: GradProgram, arch: str) -> str:
    """The outcome of `prog` on `arch`, spirad initialised afresh."""
    import spirad as sd
    sd.init(**init_kwargs(arch))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return outcome(prog, smooth_check=True)


# -- the program as an AST -------------------------------------------------------------------------


def _defs(tree):
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _calls(tree) -> list:
    """The kernel launches of `forward()`, as source text."""
    return [ast.unparse(s.value) for s in _defs(tree)["forward"].body if isinstance(s, ast.Expr)]


def _manual(tree) -> bool:
    return not any(isinstance(s, ast.With) for s in _defs(tree)["run"].body)


def _with_calls(tree, calls):
    """`tree` with run() and forward() launching `calls` (run: under a Tape, or by hand)."""
    fwd = [f"    {c}" for c in calls] or ["    pass"]
    if _manual(tree):
        rev = [f"    {c.split('(', 1)[0]}.grad({c.split('(', 1)[1]}" for c in reversed(calls)]
        run = "def run():\n" + "\n".join(fwd + ["    loss.grad[None] = 1.0"] + rev) + "\n"
    else:
        run = "def run():\n    with sd.ad.Tape(loss=loss):\n" + \
            "\n".join("    " + s for s in fwd) + "\n"
    new = ast.parse(run + "def forward():\n" + "\n".join(fwd) + "\n").body
    body = []
    for n in tree.body:
        if isinstance(n, ast.FunctionDef) and n.name in ("run", "forward"):
            body.append(new[0] if n.name == "run" else new[1])
        else:
            body.append(n)
    tree.body = body
    return tree


def _is_counter_step(s) -> bool:
    return isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name)


def _is_exit_test(s, parent) -> bool:
    """The `if ..: break` that ends a `while True` loop."""
    return (isinstance(parent, ast.While) and isinstance(parent.test, ast.Constant) and
            isinstance(s, ast.If) and any(isinstance(b, ast.Break) for b in s.body))


def _bodies(node, parent=None, depth=0):
    """(statement list, its owner, depth) of every block inside kernels and funcs, outer first."""
    out = []
    for field in ("body", "orelse"):
        stmts = getattr(node, field, None)
        if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
            out.append((stmts, node, depth))
            for s in stmts:
                out += _bodies(s, node, depth + 1)
    return out


def _code_bodies(tree):
    out = []
    for n in tree.body:
        if isinstance(n, ast.FunctionDef) and n.name not in ("run", "forward"):
            out += _bodies(n)
    return sorted(out, key=lambda b: b[2])  # outer blocks first (stable)


def _loop_var_init(loop):
    if isinstance(loop, ast.For) and isinstance(loop.target, ast.Name):
        return [ast.parse(f"{loop.target.id} = 0").body[0]]
    return []


def _small_range(loop):
    """`range(..)` of `loop` (a dynamic or static range), else None."""
    it = loop.iter
    if isinstance(it, ast.Call) and ast.unparse(it.func) == "sd.static" and it.args:
        it = it.args[0]
    if isinstance(it, ast.Call) and ast.unparse(it.func) == "range" and len(it.args) == 1:
        return it
    return None


def _sites(tree):
    """Every candidate edit, as a function of the tree that edits it in place (call it on a
    copy), with a description. The order: biggest first."""
    sites = []
    calls = _calls(tree)
    for m in range(len(calls)):
        sites.append((f"drop launch {calls[m]}",
                      lambda t, m=m: _with_calls(t, [c for i, c in enumerate(_calls(t)) if i != m])))
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)
             and n.name not in ("run", "forward")]
    for name in names:
        sites.append((f"delete def {name}",
                      lambda t, name=name: setattr(t, "body", [n for n in t.body if not (
                          isinstance(n, ast.FunctionDef) and n.name == name)])))
    for n in tree.body:  # a kernel's unused parameters, with their arguments
        if isinstance(n, ast.FunctionDef) and any(ast.unparse(d) == "sd.kernel"
                                                  for d in n.decorator_list):
            used = {x.id for s in n.body for x in ast.walk(s) if isinstance(x, ast.Name)}
            for ai, a in enumerate(n.args.args):
                if a.arg not in used:
                    sites.append((f"drop parameter {a.arg} of {n.name}",
                                  lambda t, k=n.name, ai=ai: _drop_param(t, k, ai)))
    bodies = _code_bodies(tree)
    for bi, (stmts, owner, _) in enumerate(bodies):
        n = len(stmts)
        for size in sorted({n // 2, n // 4} - {0, 1}, reverse=True):
            for start in range(0, n - size + 1, size):
                sites.append((f"delete {size} statements", _edit(bi, "chunk", start, size)))
    for bi, (stmts, owner, _) in enumerate(bodies):
        for si, s in enumerate(stmts):
            if _is_counter_step(s) or _is_exit_test(s, owner):
                continue
            sites.append(("delete " + ast.unparse(s).splitlines()[0], _edit(bi, "delete", si)))
            if isinstance(s, (ast.If, ast.For, ast.While)):
                sites.append(("inline " + ast.unparse(s).splitlines()[0], _edit(bi, "inline", si)))
            if isinstance(s, ast.If) and s.orelse:
                sites.append(("else of " + ast.unparse(s.test), _edit(bi, "else", si)))
                sites.append(("drop else of " + ast.unparse(s.test), _edit(bi, "noelse", si)))
            if isinstance(s, ast.For) and _small_range(s) is not None:
                for k in (1, 2):
                    sites.append((f"range({k}) in " + ast.unparse(s).splitlines()[0],
                                  _edit(bi, "range", si, k)))
                if ast.unparse(s.iter).startswith("sd.static"):
                    sites.append(("dynamic " + ast.unparse(s.iter), _edit(bi, "dynamic", si)))
    for bi, (stmts, owner, _) in enumerate(bodies):
        for si, s in enumerate(stmts):
            if isinstance(s, (ast.Assign, ast.AugAssign, ast.Return)) and \
                    not _is_counter_step(s) and s.value is not None:
                for ei, e in enumerate(_subexprs(s.value)):
                    for ri in range(len(_replacements(e))):
                        sites.append((f"simplify {ast.unparse(e)}", _edit(bi, "expr", si, (ei, ri))))
    return sites


def _drop_param(tree, kernel, ai):
    """Kernel `kernel` without its parameter `ai`, and its launches without that argument."""
    k = _defs(tree)[kernel]
    del k.args.args[ai]
    calls = []
    for c in _calls(tree):
        call = ast.parse(c).body[0].value
        if ast.unparse(call.func) == kernel:
            del call.args[ai]
        calls.append(ast.unparse(call))
    return _with_calls(tree, calls)


def _subexprs(e) -> list:
    """The expressions of `e` worth replacing, outer first (not names, constants, indices)."""
    out = []

    def visit(n):
        if isinstance(n, (ast.BinOp, ast.Call, ast.UnaryOp)):
            out.append(n)
        for c in ast.iter_child_nodes(n):
            if isinstance(c, ast.expr) and not isinstance(n, ast.Subscript):
                visit(c)
    visit(e)
    return out


def _int_like(e) -> bool:
    """Made of names and integer constants only (`i + 1`, `cj0`): maybe an integer value."""
    return all(isinstance(n, (ast.Name, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop,
                              ast.expr_context))
               or (isinstance(n, ast.Constant) and isinstance(n.value, int))
               for n in ast.walk(e))


def _replacements(e) -> list:
    """Smaller expressions to put in place of `e`. Never an integer-looking operand of a float
    expression: `a = (i + 1) * 0.21` shrunk to `a = i + 1` makes `a` an i32 local (Taichi's
    typing: a later `a = 0.5` stores 0), which the float64 stand-in does not model, so the
    shrunk program "failed" for a reason of its own (fuzz seed 90835 shrank so, once)."""
    if isinstance(e, ast.BinOp):
        ops = [e.left, e.right]
    elif isinstance(e, ast.UnaryOp):
        ops = [e.operand]
    elif isinstance(e, ast.Call):
        ops = [a for a in e.args if not isinstance(a, ast.Starred)]
    else:
        return []
    if not _int_like(e):
        ops = [o for o in ops if not _int_like(o)]
    return ops + [ast.Constant(HALF)]


def _edit(bi, what, si, arg=None):
    def apply(tree):
        stmts, owner, _ = _code_bodies(tree)[bi]
        s = stmts[si]
        if what == "chunk":
            del stmts[si:si + arg]
        elif what == "delete":
            del stmts[si]
        elif what == "inline":
            stmts[si:si + 1] = _loop_var_init(s) + s.body
        elif what == "else":
            stmts[si:si + 1] = s.orelse
        elif what == "noelse":
            s.orelse = []
        elif what == "range":
            _small_range(s).args = [ast.Constant(arg)]
        elif what == "dynamic":
            s.iter = s.iter.args[0]
        elif what == "expr":
            ei, ri = arg
            target = _subexprs(s.value)[ei]
            new = copy.deepcopy(_replacements(target)[ri])
            if target is s.value:
                s.value = new
            else:
                _replace_child(s.value, target, new)
        if not stmts:
            stmts.append(ast.Pass())
    return apply


def _replace_child(root, old, new):
    for n in ast.walk(root):
        for field, value in ast.iter_fields(n):
            if value is old:
                setattr(n, field, new)
                return
            if isinstance(value, list):
                for i, v in enumerate(value):
                    if v is old:
                        value[i] = new
                        return


# -- the loop ---------------------------------------------------------------------------------------


def _program(prog: GradProgram, tree) -> GradProgram:
    return GradProgram(prog.seed, ast.unparse(tree) + "\n", prog.data, prog.grads, prog.fp)


def drop_unused_globals(prog: GradProgram) -> GradProgram:
    """`prog` without the declarations (and data) of globals nothing else names."""
    tree = ast.parse(prog.source)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and
            isinstance(n.ctx, ast.Load)} | {"loss"}
    keep = lambda n: not (isinstance(n, ast.Assign) and len(n.targets) == 1 and  # noqa: E731
                          isinstance(n.targets[0], ast.Name) and
                          n.targets[0].id in prog.data and n.targets[0].id not in used)
    tree.body = [n for n in tree.body if keep(n)]
    data = {k: v for k, v in prog.data.items() if k in used}
    grads = tuple(g for g in prog.grads if g in used)
    return GradProgram(prog.seed, ast.unparse(tree) + "\n", data, grads, prog.fp)


def shrink(prog: GradProgram, arch: str, check=None, max_checks=600, max_seconds=900,
           log=None) -> GradProgram:
    """The smallest program found that fails as `prog` does (`check(prog) -> outcome`; default:
    `run_check` on `arch`). `log(text)` hears each kept edit."""
    check = check or (lambda p: run_check(p, arch))
    want = check(prog)
    if want in ("ok", "reference", "nonsmooth"):
        raise ValueError(f"the program does not fail ({want})")
    t0, checks = time.time(), 0
    tree = ast.parse(prog.source)
    start = 0
    while True:
        sites = _sites(tree)
        now = _program(prog, tree).source
        kept = False
        for i in range(start, len(sites)):
            if checks >= max_checks or time.time() - t0 > max_seconds:
                return _finish(prog, tree, check, want)
            what, edit = sites[i]
            cand = copy.deepcopy(tree)
            try:
                edit(cand)
                ast.fix_missing_locations(cand)
                cp = _program(prog, cand)
            except Exception:  # noqa: BLE001 - an edit that does not apply here
                continue
            if _size(cand, cp.source) >= _size(tree, now):  # only ever smaller: no cycles
                continue
            checks += 1
            if same_failure(check(cp), want):
                tree, kept, start = cand, True, i
                if log:
                    log(f"kept: {what}")
                break
        if not kept:
            if start == 0:
                return _finish(prog, tree, check, want)
            start = 0  # one more full pass: an early edit may apply now


def _size(tree, source):
    """What shrinking decreases: AST nodes, then the integers in the source (loop bounds), then
    characters."""
    ints = sum(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and
               type(n.value) is int)
    return (sum(1 for _ in ast.walk(tree)), ints, len(source))


def _finish(prog, tree, check, want):
    small = _program(prog, tree)
    pruned = drop_unused_globals(small)
    return pruned if same_failure(check(pruned), want) else small


# -- the report -------------------------------------------------------------------------------------


def report(prog: GradProgram, arch: str) -> str:
    """The program with its data, and what differs on `arch` (spirad's gradient vs the oracle)."""
    import spirad as sd
    out = [f"# seed {prog.seed}, arch {arch} ({prog.fp})", prog.source.rstrip()]
    tree = ast.parse(prog.source)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    out.append("# data: " + "; ".join(f"{k} = {_fmt(v)}" for k, v in prog.data.items()
                                       if k in used))
    try:
        ref, want = reference_grads(prog)
        sd.init(**init_kwargs(arch))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod = prog.load(sd)
            mod.run()
        for name in prog.grads:
            got = getattr(mod, name).grad.to_numpy()
            if not np.allclose(got, want[name], rtol=1e-3, atol=1e-5):
                out.append(f"# d loss / d {name}: spirad {_fmt(got)}, want {_fmt(want[name])}")
            f_got, f_want = getattr(mod, name).to_numpy(), getattr(ref, name).to_numpy()
            if not np.allclose(f_got, f_want, rtol=1e-5, atol=1e-7):
                out.append(f"# forward {name}: spirad {_fmt(f_got)}, want {_fmt(f_want)}")
    except Exception as e:  # noqa: BLE001 - the report says what happened
        out.append(f"# {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
    return "\n".join(out)


def _fmt(v) -> str:
    return np.array2string(np.asarray(v), precision=6, separator=", ").replace("\n", "")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="cpu")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--features", default="jumps", help=f"comma-separated, of {FEATURES}")
    ap.add_argument("--max-checks", type=int, default=600)
    a = ap.parse_args(argv)
    features = tuple(f for f in a.features.split(",") if f)
    prog = generate(a.seed, arch_fp(a.arch), features)
    small = shrink(prog, a.arch, max_checks=a.max_checks,
                   log=lambda s: print(s, file=sys.stderr, flush=True))
    print(report(small, a.arch))


if __name__ == "__main__":
    main()
