"""The check of a random reverse-mode program (tests/support/random_grad_programs.py), shared by
tests/autodiff/test_random_grad.py, the shrinker (tests/support/shrink_grad.py) and the fuzz
runner (scripts/fuzz_grad.py):

    check_program(seed, fp, features)   # generate, run under spirad (initialised by the caller)
    check_grad_program(prog)            # the same for a program at hand (a shrunk one)
    outcome(prog)                       # "ok", "forward", "grad", or "error: <Type>: <text>"

Every needs_grad global's `.grad` after the Tape (or the hand-called `kernel.grad`s) must equal
the float64 central difference of the loss with respect to that global's initial value, computed
by running the same source under the plain-Python stand-in for `sd` (`reference_sd`: f32 and f64
are both float64 there, so an f32 program has the f64 program's oracle). The forward values (loss
and intermediates) must match the stand-in's too. A failure prints the program.
"""
from __future__ import annotations

import numpy as np

from tests.support.archs import init_debug
from tests.support.random_grad_programs import GradProgram, generate, reference_sd

EPS = 1e-6
# rtol, atol (x max(1, |value|)) of the forward values; rtol, atol of the gradients
TOL = {"f64": (1e-9, 1e-10, 1e-5, 1e-7), "f32": (2e-5, 2e-6, 2e-3, 5e-4)}
# The oracle's own rounding, in ulps of the loss (`oracle_rounding`)
ORACLE_ULPS = 16
ARCH_FP = {"metal": "f32"}  # the float type of the programs an arch runs (Metal: no f64)


def arch_fp(arch: str) -> str:
    return ARCH_FP.get(arch, "f64")


DEBUG = [init_debug()]  # `sd.init(debug=)` of the checks in this process: set_debug


def set_debug(on: bool) -> None:
    """Check the programs with `init(debug=on)` from now on in this process (the fuzz runner's
    `--no-debug`: without debug the release pipeline runs, bounds versioning included, and the
    IR verifier does not; the shrinker then shrinks under the same setting)."""
    DEBUG[0] = bool(on)


def init_kwargs(arch: str) -> dict:
    """`sd.init` keywords for the programs of `arch` (as tests/support/archs.test_archs gives:
    debug on unless `set_debug(False)` or the release run, SPIRAD_TEST_RELEASE=1; f64 literals
    where the programs are f64)."""
    import spirad as sd
    kw = {"arch": arch, "debug": DEBUG[0]}
    if arch_fp(arch) == "f64":
        kw["default_fp"] = sd.f64
    return kw


def oracle_rounding(loss: float, eps=EPS) -> float:
    """How far a central difference of the float64 stand-in can be from the true derivative by
    rounding alone: the loss is computed to a few ulps of its own size, and the difference of
    two such values is divided by 2 * eps. An input that reaches only a small term of a large
    loss has a derivative known only to this (fuzz seed 71480: a loss of 9,016, one ulp 1.8e-12,
    a gradient entry of 0.0197 that the oracle had 4e-7 off while spirad's was the analytic
    value to the last digit). Added to the gradients' absolute tolerance; under 2e-8 for a loss
    under 10 (the tolerance's own atol is 1e-7), so it loosens only programs whose loss is large."""
    return ORACLE_ULPS * float(np.spacing(abs(loss))) / (2 * eps)


def reference_grads(prog: GradProgram, eps=EPS):
    """(the stand-in's module after a forward run from the initial data, {name: d loss / d
    initial value}) by central differences (step `eps`) of the stand-in."""
    ref = prog.load(reference_sd())

    def loss_at(name=None, flat=None, delta=0.0):
        for k, v in prog.data.items():
            getattr(ref, k).from_numpy(v)
        if name is not None:
            v = prog.data[name].copy()
            v.reshape(-1)[flat] += delta
            getattr(ref, name).from_numpy(v)
        ref.forward()
        return float(ref.loss[None])

    grads = {}
    for name in prog.grads:
        g = np.zeros(prog.data[name].size)
        for e in range(g.size):
            g[e] = (loss_at(name, e, eps) - loss_at(name, e, -eps)) / (2 * eps)
        grads[name] = g.reshape(prog.data[name].shape)
    loss_at()
    return ref, grads


class InvalidProgram(Exception):
    """The stand-in itself failed on the program (an invalid program, not a spirad failure)."""


def check_grad_program(prog: GradProgram, ref=None):
    """Run `prog` under spirad (already initialised) and compare with the stand-in; `ref`: the
    stand-in's (module, grads) when known. Returns spirad's gradients."""
    import spirad as sd
    if ref is None:
        try:
            ref = reference_grads(prog)
        except Exception as e:  # noqa: BLE001 - reported as what it is
            raise InvalidProgram(f"{type(e).__name__}: {e}") from e
    ref, want = ref
    mod = prog.load(sd)
    mod.run()
    got = {name: getattr(mod, name).grad.to_numpy() for name in prog.grads}
    where = f"\n--- seed {prog.seed} ({prog.fp}) ---\n{prog.source}"
    tol = TOL[prog.fp]
    rounding = oracle_rounding(float(ref.loss[None]))
    for name in prog.grads:  # forward: the loss and every intermediate
        w = getattr(ref, name).to_numpy()
        np.testing.assert_allclose(getattr(mod, name).to_numpy(), w, rtol=tol[0],
                                   atol=tol[1] * max(1.0, np.abs(w).max()),
                                   err_msg=f"forward {name}" + where)
    for name in prog.grads:
        np.testing.assert_allclose(got[name], want[name], rtol=tol[2],
                                   atol=tol[3] * max(1.0, np.abs(want[name]).max()) + rounding,
                                   err_msg=f"d loss / d {name}" + where)
    return got


def check_program(seed, fp="f64", features=()):
    """`fp` = 'f32': the same program over f32 globals (Metal has no f64), checked against the
    float64 oracle with f32 tolerances (relative to the largest value of each global)."""
    return check_grad_program(generate(seed, fp, features))


def smooth(prog: GradProgram, ref_grads) -> bool:
    """Whether the loss is smooth at the program's data: central differences with a ten times
    larger step agree (a condition close to its threshold makes them differ)."""
    _, wide = reference_grads(prog, EPS * 10)
    return all(np.allclose(wide[k], g, rtol=1e-3, atol=1e-5 * max(1.0, np.abs(g).max()))
               for k, g in ref_grads.items())


def outcome(prog: GradProgram, ref=None, smooth_check=False) -> str:
    """What checking `prog` gives: "ok", "forward" (a forward value differs), "grad" (a
    gradient differs), "reference" (the stand-in fails: not a valid program), or
    "error: <exception type>: <first line>" (spirad raised). `smooth_check`: a "grad" where the
    loss is not smooth at the data (`smooth`) is "nonsmooth" (a shrunk program whose condition
    came close to its threshold: not a failure)."""
    try:
        if ref is None and smooth_check:
            try:
                ref = reference_grads(prog)
            except Exception:  # noqa: BLE001 - not a valid program
                return "reference"
        check_grad_program(prog, ref)
    except InvalidProgram:
        return "reference"
    except AssertionError as e:
        if _first_failing(str(e)).startswith("forward"):
            return "forward"
        return "nonsmooth" if smooth_check and not smooth(prog, ref[1]) else "grad"
    except Exception as e:  # noqa: BLE001 - any other error is an outcome too
        return f"error: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
    return "ok"


def _first_failing(msg: str) -> str:
    """The err_msg line of a numpy assertion ("forward y0" / "d loss / d x0")."""
    for line in msg.splitlines():
        line = line.strip()
        if line.startswith("forward ") or line.startswith("d loss / d "):
            return line
    return ""
