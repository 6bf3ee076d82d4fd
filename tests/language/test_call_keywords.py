"""A keyword argument a kernel-scope call does not implement is a user error at the call, never
dropped (spirad/frontend/call_keywords.py; issue #39: `ndrange(axes=)` was dropped silently).
Before the table, `v.norm(eps=...)` computed the norm without eps, `sd.Vector([..], dtype=...)`
ignored the type, `sd.random(foo=...)` and `sd.sin(x, foo=...)` ran as if written without."""
import dis
import math

import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradTypeError
from spirad.frontend import call_keywords, expr  # noqa: F401 (expr registers its handlers)
from spirad.frontend.builtins import HANDLERS
from tests.support.archs import EVERY_ARCH, test_archs


def _reads_keywords(handler) -> bool:
    """Whether `handler(v, args, kw, node)` reads its keyword dict at all (directly, or in a
    closure it builds)."""
    code = getattr(handler, "__code__", None)
    if code is None or code.co_argcount < 3:
        return False
    name = code.co_varnames[2]
    if any(i.argval == name and i.opname.startswith(("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE"))
           for i in dis.get_instructions(code)):
        return True
    return any(name in getattr(c, "co_freevars", ()) for c in code.co_consts)


def test_table_matches_the_handlers():
    """A callee listed as taking keywords has a handler that reads them; a handler that reads
    keywords is listed (else `check` refuses every keyword before it runs, which is safe but
    says the table is stale)."""
    listed = set(call_keywords.KEYWORDS) | set(call_keywords.SELF_CHECKED)
    stale = [fn for fn in listed if fn in HANDLERS and not _reads_keywords(HANDLERS[fn])]
    assert not stale, f"listed as taking keywords, but the handler never reads them: {stale}"
    # these pass their keyword dict on to a helper that ignores it: unlisted, so refused
    known_readers = {float, int, math.atan2}
    unlisted = [fn for fn, h in HANDLERS.items()
                if _reads_keywords(h) and fn not in listed and fn not in known_readers]
    assert not unlisted, f"handlers that read keywords but are not in call_keywords: {unlisted}"


x = None  # the kernels' field, made after each test's init


def fresh():
    global x
    x = sd.field(sd.f32, shape=4)


@sd.kernel
def k_methods():
    v = sd.Vector([3.0, 4.0])
    x[0] = v.norm(eps=11.0)
    x[1] = sd.Vector.norm(v, eps=11.0)
    x[2] = v.normalized(eps=5.0)[0]
    x[3] = v.cast(dtype=sd.i32)[1] + v.dot(other=v) + sd.cast(0.7, dtype=sd.i32)


@test_archs(EVERY_ARCH)
def test_vector_method_keywords(arch):
    fresh()
    k_methods()
    np.testing.assert_allclose(x.to_numpy(), [6.0, 6.0, 0.3, 29.0], rtol=1e-6)


@sd.kernel
def k_bad_method():
    v = sd.Vector([3.0, 4.0])
    x[0] = v.norm(epsilon=1.0)


@sd.kernel
def k_twice():
    v = sd.Vector([3.0, 4.0])
    x[0] = v.normalized(1.0, eps=1.0)[0]


@sd.kernel
def k_dtype():
    x[0] = sd.Vector([1, 2], dtype=sd.f32)[0]


@sd.kernel
def k_sin():
    x[0] = sd.sin(1.0, foo=2)


@sd.kernel
def k_atomic():
    sd.atomic_add(x[1], 1.0, foo=1)


@sd.kernel
def k_random():
    x[0] = sd.random(dt=sd.f32)


@sd.kernel
def k_fill():
    x.fill(1.0, foo=2)


vec2 = sd.types.vector(2, sd.f32)


@sd.kernel
def k_vec_type():
    x[0] = vec2(1.0, 2.0, foo=3)[0]


@pytest.mark.parametrize("kernel,text", [
    (k_bad_method, "norm() got an unexpected keyword argument 'epsilon' (it takes eps=)"),
    (k_twice, "normalized() got multiple values for argument 'eps'"),
    (k_dtype, "Vector() got an unexpected keyword argument 'dtype' in a kernel (it takes dt=)"),
    (k_sin, "sin() got an unexpected keyword argument 'foo' in a kernel (it takes no keyword "
            "arguments)"),
    (k_atomic, "atomic_add() got an unexpected keyword argument 'foo'"),
    (k_random, "random() got an unexpected keyword argument 'dt' in a kernel (it takes dtype=)"),
    (k_fill, "fill() got an unexpected keyword argument 'foo' (it takes no keyword arguments)"),
    (k_vec_type, "got an unexpected keyword argument 'foo'"),
])
def test_unimplemented_keywords_are_refused(kernel, text):
    sd.init(arch=sd.cpu)
    fresh()
    with pytest.raises(SpiradTypeError) as e:
        kernel()
    msg = str(e.value)
    assert text in msg and "^" in msg and __file__ in msg, msg
