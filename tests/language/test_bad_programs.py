"""Bad programs, one per row: each must fail (or warn) with the right kind and a message that says
what is wrong and what to do, on cpu and on vulkan.

For every error row the test also checks what a user sees of it: the public class name
(`spirad.SpiradTypeError`, not the module that defines it) and a traceback that holds only
user frames (`spirad.tracebacks`: the test's own frames here, none of spirad's). Rows that quote
kernel code also check the caret.
"""
from __future__ import annotations

import traceback

import numpy as np
import pytest

import spirad as sd
from spirad.tracebacks import internal_file
from tests.support.archs import exactly, test_archs

ROWS = []


def row(kind, pattern, caret=False, warns=None):
    """Register a bad program: it raises `kind` whose message matches `pattern` (a regex), or,
    with `warns`, emits that warning class with a message matching `pattern` (then `kind`, if
    not None, is what it raises afterwards)."""
    def deco(fn):
        ROWS.append(pytest.param(fn, kind, pattern, caret, warns, id=fn.__name__))
        return fn
    return deco


# -- compile errors: kernel code ------------------------------------------------------------------
@row(NameError, r'Name "undefined_thing" is not defined; assign it before', caret=True)
def undefined_name(arch):
    x = sd.field(sd.f32, shape=4)

    @sd.kernel
    def k():
        for i in x:
            x[i] = undefined_thing + 1  # noqa: F821
    k()


@row(SyntaxError, r"Negative indices are not supported in Taichi kernels", caret=True)
def negative_vector_slice(arch):
    x = sd.field(sd.i32, shape=2)

    @sd.kernel
    def k(i: sd.i32):
        v = sd.Vector([i, i + 1, i + 2])
        x[0] = v[:-1].sum()
    k(0)


@row(SyntaxError, r"Every argument of ndrange should be a scalar or a tuple/list like "
                  r"\(begin, end\)", caret=True)
def ndrange_entry_of_three(arch):
    @sd.kernel
    def k():
        for i in sd.ndrange((1, 2, 3)):
            pass
    k()


@row(TypeError, r"Every argument of ndrange should be an integer scalar or a tuple/list of "
                r"\(int, int\)", caret=True)
def ndrange_float_bounds(arch):
    @sd.kernel
    def k():
        for i in sd.ndrange((1.1, 10.5)):
            pass
    k()


@row(SyntaxError, r"Ndrange for loop with number of the loop variables not equal to the "
                  r"dimension of the ndrange is not supported: loop over 2 dimension", caret=True)
def ndrange_too_few_names(arch):
    @sd.kernel
    def k():
        for i in sd.ndrange(4, 4):
            pass
    k()


@row(SyntaxError, r"cannot call np\.sin inside a kernel: numpy functions run on the host.*use sd\.sin",
     caret=True)
def numpy_sin(arch):
    x = sd.field(sd.f32, shape=4)

    @sd.kernel
    def k():
        for i in x:
            x[i] = np.sin(x[i])
    k()


@row(SyntaxError, r"cannot call np\.arctan2 .*use sd\.atan2", caret=True)
def numpy_arctan2(arch):
    x = sd.field(sd.f32, shape=4)

    @sd.kernel
    def k():
        for i in x:
            x[i] = np.arctan2(x[i], 1.0)
    k()


@row(SyntaxError, r"cannot call np\.linalg\.norm inside a kernel.*sd\.sin, sd\.exp", caret=True)
def numpy_without_counterpart(arch):
    x = sd.field(sd.f32, shape=4)

    @sd.kernel
    def k():
        for i in x:
            x[i] = np.linalg.norm(x[i])
    k()


@row(SyntaxError, r"cannot call open \(builtin_function_or_method 'open'\) inside a kernel",
     caret=True)
def builtin_call(arch):
    x = sd.field(sd.f32, shape=4)

    @sd.kernel
    def k():
        for i in x:
            open("f")
    k()


@row(SyntaxError, r"kernels cannot call kernels; make the callee a @sd.func", caret=True)
def kernel_calls_kernel(arch):
    x = sd.field(sd.f32, shape=4)

    @sd.kernel
    def inner():
        x[0] = 1.0

    @sd.kernel
    def k():
        inner()
    k()


@row(TypeError, r"unsupported annotation np\.ndarray; annotate array parameters with "
                r"sd\.types\.ndarray\(\)", caret=True)
def numpy_annotation(arch):
    @sd.kernel
    def k(a: np.ndarray):
        for i in a:
            a[i] = 1.0
    k(np.zeros(3, np.float32))


@row(TypeError, r"unsupported annotation np\.float32; use sd\.f32", caret=True)
def numpy_scalar_annotation(arch):
    @sd.kernel
    def k(a: np.float32):
        pass
    k(1.0)


@row(TypeError, r"argument 'a' of kernel k needs a type annotation", caret=True)
def missing_annotation(arch):
    @sd.kernel
    def k(a):
        pass
    k(1.0)


@row(ValueError, r"not enough values to unpack \(expected at least 2, got 1\)", caret=True)
def starred_too_few(arch):
    x = sd.field(sd.f32, shape=4)

    @sd.kernel
    def k():
        a, b, *c = (1.0,)
        x[0] = a
    k()


@row(ValueError, r"cannot unpack 3 values into 2 targets", caret=True)
def unpack_too_many(arch):
    x = sd.field(sd.f32, shape=4)

    @sd.kernel
    def k():
        a, b = 1.0, 2.0, 3.0
        x[0] = a + b
    k()


@row(TypeError, r"cannot unpack a run-time scalar into 2 targets", caret=True)
def unpack_scalar(arch):
    x = sd.field(sd.f32, shape=4)

    @sd.kernel
    def k():
        a, b = x[0]
        x[1] = a + b
    k()


TABLE = [1.0, 2.0, 3.0]


@row(TypeError, r"TABLE is a Python list: a kernel indexes it only with compile-time constants.*"
                r"sd\.field.*sd\.static\(range\(3\)\)", caret=True)
def python_list_runtime_index(arch):
    x = sd.field(sd.f32, shape=3)

    @sd.kernel
    def k():
        for i in range(3):
            x[i] = TABLE[i]
    k()


@row(IndexError, r"list index 5 is out of range: TABLE has 3 element", caret=True)
def python_list_constant_index(arch):
    x = sd.field(sd.f32, shape=3)

    @sd.kernel
    def k():
        x[0] = TABLE[5]
    k()


@row(IndexError, r"index \(2,\) is out of range for shape \(2,\)", caret=True)
def vector_local_index(arch):
    x = sd.field(sd.f32, shape=3)

    @sd.kernel
    def k():
        v = sd.Vector([1.0, 2.0])
        x[0] = v[2]
    k()


@row(TypeError, r"TUPLE is a Python tuple: a kernel indexes it only with compile-time constants",
     caret=True)
def python_tuple_runtime_index(arch):
    x = sd.field(sd.f32, shape=3)

    @sd.kernel
    def k(j: sd.i32):
        x[0] = TUPLE[j]
    k(0)


TUPLE = (1.0, 2.0)


@row(SyntaxError, r"unsupported Python syntax in a kernel: With; remove the with-block", caret=True)
def with_block(arch):
    @sd.kernel
    def k():
        with open("f"):
            pass
    k()


@row(SyntaxError, r"Try; remove the try-block", caret=True)
def try_block(arch):
    x = sd.field(sd.f32, shape=3)

    @sd.kernel
    def k():
        try:
            x[0] = 1.0
        except Exception:
            pass
    k()


@row(SyntaxError, r"Raise; kernels cannot raise exceptions", caret=True)
def raise_statement(arch):
    @sd.kernel
    def k():
        raise ValueError("no")
    k()


@row(SyntaxError, r"range\(\) with run-time bounds is only allowed as a for-loop iterator", caret=True)
def list_comprehension(arch):
    x = sd.field(sd.f32, shape=3)
    n = sd.field(sd.i32, shape=())

    @sd.kernel
    def k():
        x[0] = [j for j in range(n[None])][0]  # a run-time iterable (a constant range unrolls)
    k()


@row(SyntaxError, r"Delete; remove the del statement", caret=True)
def del_statement(arch):
    @sd.kernel
    def k():
        for i in range(2):
            del i
    k()


@row(TypeError, r"bit operation & needs integers, got f32; convert first, e\.g\. sd\.cast", caret=True)
def bitop_on_float(arch):
    x = sd.field(sd.f32, shape=3)

    @sd.kernel
    def k():
        x[0] = x[1] & 1
    k()


@row(TypeError, r"field 'x' has 1 dimension\(s\) but is indexed with 2", caret=True)
def field_index_count(arch):
    x = sd.field(sd.f32, shape=3)

    @sd.kernel
    def k():
        for i in x:
            x[i, 0] = 1.0
    k()


@row(sd.SpiradAutodiffError, r"'y' is read here at an index that another iteration of the "
                             r"parallel loop writes", caret=True)
def parallel_read_after_write(arch):
    y = sd.field(sd.f32, shape=8, needs_grad=True)

    @sd.kernel
    def k():
        for i in range(1, 8):
            y[i] = y[i - 1] + 1.0
    k.grad()


@row(sd.SpiradAutodiffError, r"this kernel reads 'a' and also overwrites it", caret=True)
def reads_and_overwrites(arch):
    a = sd.field(sd.f32, shape=4, needs_grad=True)

    @sd.kernel
    def k():
        for i in a:
            v = a[i]
            a[i] = v * v
    k()
    k.grad()


@row(SyntaxError, r"a @sd\.func may only return as its last statement", caret=True)
def func_early_return(arch):
    x = sd.field(sd.f32, shape=3)

    @sd.func
    def f(v):
        if v > 0:
            return v
        return -v

    @sd.kernel
    def k():
        x[0] = f(x[1])
    k()


@row(SyntaxError, r"Kernel has a return type but does not have a return statement", caret=True)
def missing_return(arch):
    @sd.kernel
    def k() -> sd.f32:
        pass
    k()


@row(sd.SpiradAutodiffError, r"field 'w' has no gradient: create it with needs_grad=True.*"
                             r"\(Taichi: Gradient w\.grad has not been placed, check whether "
                             r"`needs_grad=True`\)", caret=True)
def grad_of_field_without_grad_in_kernel(arch):
    w = sd.field(sd.f32, shape=3)

    @sd.kernel
    def k():
        w.grad[0] = 1.0
    k()


@row(TypeError, r"ndarray 'a' was created without needs_grad=True", caret=True)
def grad_of_ndarray_without_grad_in_kernel(arch):
    @sd.kernel
    def k(a: sd.types.ndarray()):
        a.grad[0] = 1.0
    k(sd.ndarray(sd.f32, 3))


# -- Python-side errors ---------------------------------------------------------------------------
@row(IndexError, r"index \(8,\) is out of range for field x of shape \(8,\)")
def field_store_out_of_range(arch):
    x = sd.field(sd.f32, shape=8)
    x[8] = 1.0


@row(IndexError, r"index \(2, 0\) is out of range for field grid of shape \(2, 3\)")
def field_read_out_of_range(arch):
    grid = sd.field(sd.f32, shape=(2, 3))
    return grid[2, 0]


@row(IndexError, r"field x of shape \(3,\) needs 1 indices, got 2")
def field_index_arity(arch):
    x = sd.field(sd.f32, shape=3)
    x[1, 2] = 0.0


@row(TypeError, r"field x is indexed with integers, got 1\.5")
def field_float_index(arch):
    x = sd.field(sd.f32, shape=3)
    return x[1.5]


@row(IndexError, r"index \(-1,\) is out of range for ndarray of shape \(3,\)")
def ndarray_negative_index(arch):
    a = sd.ndarray(sd.f32, 3)
    return a[-1]


@row(ValueError, r"from_numpy: array of shape \(4,\) does not match field shape \(3,\)")
def from_numpy_shape(arch):
    x = sd.field(sd.f32, shape=3)
    x.from_numpy(np.zeros(4, np.float32))


@row(ValueError, r"from_numpy: float array into i32 field; convert it explicitly")
def from_numpy_float_into_int(arch):
    x = sd.field(sd.i32, shape=3)
    x.from_numpy(np.zeros(3, np.float32))


@row(ValueError, r"values in \[4294967296, 4294967296\] do not fit i32")
def fill_does_not_fit(arch):
    x = sd.field(sd.i32, shape=3)
    x.fill(2**32)


@row(TypeError, r"kernel k takes 1 argument\(s\) \(n\), got 2", caret=True)
def kernel_argument_count(arch):
    @sd.kernel
    def k(n: sd.i32):
        pass
    k(1, 2)


@row(TypeError, r"argument 'n' of k is i32 but got the float 1\.5; pass an int", caret=True)
def kernel_float_for_int(arch):
    @sd.kernel
    def k(n: sd.i32):
        pass
    k(1.5)


@row(ValueError, r"argument 'n' = 1099511627776 does not fit i32; annotate it with a wider type",
     caret=True)
def kernel_int_overflow(arch):
    @sd.kernel
    def k(n: sd.i32):
        pass
    k(2**40)


@row(TypeError, r"argument 'a' of k must be an sd\.ndarray, a numpy array or a torch tensor, "
                r"got list", caret=True)
def ndarray_param_given_list(arch):
    @sd.kernel
    def k(a: sd.types.ndarray()):
        pass
    k([1.0, 2.0])


@row(TypeError, r"must be C-contiguous", caret=True)
def ndarray_param_given_strided_bools(arch):  # bool arrays are copied as u1 (Quadrants)
    @sd.kernel
    def k(a: sd.types.ndarray()):
        pass
    k(np.zeros(6, bool)[::2])


@row(TypeError, r"is not C-contiguous .*np\.ascontiguousarray", caret=True)
def ndarray_param_not_contiguous(arch):
    @sd.kernel
    def k(a: sd.types.ndarray()):
        pass
    k(np.zeros((4, 4), np.float32)[:, 1])


@row(TypeError, r"argument 'a' must have dtype f32 \(f32\), got float64|must have dtype float32",
     caret=True)
def ndarray_param_dtype(arch):
    @sd.kernel
    def k(a: sd.types.ndarray(dtype=sd.f32)):
        pass
    k(np.zeros(3, np.float64))


@row(ValueError, r"init\(\) got unknown keyword argument\(s\): no_such_option")
def init_unknown_option(arch):
    sd.init(arch=arch, no_such_option=1)


@row(sd.SpiradArchError, r"unknown arch 'tpu'; use sd\.cpu, sd\.vulkan")
def init_unknown_arch(arch):
    sd.init(arch="tpu")


@row(TypeError, r"i32 is not supported for field with `needs_grad=True` or `needs_dual=True`: "
                r"gradients need a float dtype")
def int_field_with_grad(arch):
    sd.field(sd.i32, shape=3, needs_grad=True)


@row(TypeError, r"unsupported dtype <class 'str'>; use sd\.f32")
def field_bad_dtype(arch):
    sd.field(str, shape=3)


@row(ValueError, r"shape \(-1,\) has a negative extent")
def field_negative_shape(arch):
    sd.field(sd.f32, shape=-1)


@row(sd.SpiradAutodiffError, r"the Tape's loss must be created with needs_grad=True")
def tape_loss_without_grad(arch):
    loss = sd.field(sd.f32, shape=())
    with sd.ad.Tape(loss=loss):
        pass


@row(sd.SpiradAutodiffError, r"the Tape's loss must be a 0-d field or ndarray \(one element\), "
                             r"got shape \(3,\)")
def tape_loss_not_scalar(arch):
    loss = sd.field(sd.f32, shape=3, needs_grad=True)
    with sd.ad.Tape(loss=loss):
        pass


@row(SyntaxError, r"@sd\.func f can only be called from a kernel or func")
def func_called_from_python(arch):
    @sd.func
    def f():
        pass
    f()


@row(ValueError, r"field x belongs to a previous sd\.init\(\); create it again")
def field_after_reinit(arch):
    x = sd.field(sd.f32, shape=3)
    sd.init(arch=arch)
    x.fill(1.0)


@row(IndexError, r"index out of range in kernel k .*field 'x' of shape \(4,\) indexed with 4 on "
                 r"axis 0.*sd\.init\(debug=True\)", caret=True)
def kernel_index_out_of_range_debug(arch):
    sd.init(arch=arch, debug=True)  # the named bounds check is debug's (also in the release run)
    x = sd.field(sd.f32, shape=4)

    @sd.kernel
    def k():
        for i in x:
            x[i] = x[i + 1]
    k()
    sd.sync()


@row(sd.SpiradAdStackOverflow, r"holds 4 entries; this launch needs \d+.*The capacity comes from "
                               r"sd\.init\(ad_stack_size=4\): raise it \(at least \d+\)", caret=True)
def adstack_overflow_forced(arch):
    sd.init(arch=arch, ad_stack_size=4)
    x = sd.field(sd.f32, shape=4, needs_grad=True)
    y = sd.field(sd.f32, shape=4, needs_grad=True)

    @sd.kernel
    def k(n: sd.i32):
        for i in x:
            c = x[i]
            for j in range(n):
                c = sd.sin(c)
            y[i] = c
    k(10)
    k.grad(10)
    sd.sync()


@row(sd.SpiradAdStackOverflow, r"holds 4 entries.*The capacity comes from "
                               r"sd\.init\(default_ad_stack_size=4\), which sizes stacks whose loop "
                               r"bounds the compiler cannot express: raise it", caret=True)
def adstack_overflow_default(arch):
    sd.init(arch=arch, default_ad_stack_size=4)
    x = sd.field(sd.f32, shape=4, needs_grad=True)
    y = sd.field(sd.f32, shape=4, needs_grad=True)

    @sd.kernel
    def k(n: sd.i32):
        for i in x:
            c = x[i]
            j = 0
            while j < n:
                c = sd.sin(c)
                j += 1
            y[i] = c
    k(10)
    k.grad(10)
    sd.sync()


# -- warnings: programs that run, but probably not as meant ---------------------------------------
@row(None, r"assignment may lose precision: i32 <- f32 \(the value is truncated toward zero\)",
     warns=sd.SpiradWarning)
def narrowing_local(arch):
    out = sd.field(sd.i32, shape=2)

    @sd.kernel
    def k():
        v = 0
        v = 1.5
        out[0] = v
    k()
    assert out[0] == 1


@row(None, r"assignment may lose precision: i32 <- f32", warns=sd.SpiradWarning)
def narrowing_field_store(arch):
    counts = sd.field(sd.i32, shape=2)

    @sd.kernel
    def k():
        counts[1] = 2.7
    k()
    assert counts[1] == 2


@row(None, r"atomic add may lose precision: f32 <- f64", warns=sd.SpiradWarning)
def narrowing_atomic(arch):
    if not sd.runtime.state.backend().capabilities().get("f64", True):
        pytest.skip("no f64 on this device")
    acc = sd.field(sd.f32, shape=())

    @sd.kernel
    def k(v: sd.f64):
        acc[None] += v
    k(0.5)


@row(None, r"k\.grad\(\) computed nothing: no field or ndarray that kernel k reads or writes has a "
           r"gradient.*needs_grad=True", warns=sd.SpiradWarning)
def grad_with_nothing_to_differentiate(arch):
    x = sd.field(sd.f32, shape=4)
    y = sd.field(sd.f32, shape=4)

    @sd.kernel
    def k():
        for i in x:
            y[i] = x[i] * 2.0
    k()
    k.grad()


@row(ValueError, r"field 'x' has no gradient: create it with needs_grad=True, place x\.grad")
def grad_of_field_without_one(arch):
    x = sd.field(sd.f32, shape=4)
    x.grad.fill(0)


@pytest.mark.parametrize("bad,kind,pattern,caret,warns", ROWS)
@test_archs(exactly("cpu", "vulkan"))
def test_bad_program(arch, bad, kind, pattern, caret, warns):
    if warns is not None:
        with pytest.warns(warns, match=pattern) as rec:
            if kind is None:
                bad(arch)
            else:
                with pytest.raises(kind):
                    bad(arch)
        w = next(r for r in rec if issubclass(r.category, warns))
        assert not internal_file(w.filename), f"the warning points into spirad: {w.filename}"
        return
    with pytest.raises(kind, match=pattern) as ei:
        bad(arch)
    e = ei.value
    assert isinstance(e, sd.SpiradError), type(e).__mro__
    assert f"{type(e).__module__}.{type(e).__qualname__}".startswith("spirad.Spirad")
    frames = traceback.extract_tb(e.__traceback__)
    inside = [f"{f.filename}:{f.lineno} {f.name}" for f in frames if internal_file(f.filename)]
    assert not inside, "spirad's own frames in the traceback:\n" + "\n".join(inside)
    assert frames and frames[-1].filename == __file__  # ends in the user's code
    if caret:
        assert "^" in str(e) and __file__ in str(e), str(e)


def test_enough_bad_programs():
    assert len(ROWS) >= 40


# -- what a terminal shows ------------------------------------------------------------------------
def _python(code, tmp_path=None, stdin=False, env=None):
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    e = {k: v for k, v in os.environ.items() if k != "SPIRAD_DEBUG"}
    e.update({"PYTHONPATH": root, **(env or {})})
    if stdin:
        return subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True,
                              env=e, timeout=120)
    script = tmp_path / "user_script.py"
    script.write_text(code)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=e,
                          timeout=120)


def test_uncaught_compile_error_shows_user_frames_only(tmp_path):
    r = _python("import spirad as sd\n"
                "sd.init(arch=sd.cpu)\n"
                "x = sd.field(sd.f32, shape=4)\n"
                "@sd.kernel\n"
                "def k():\n"
                "    for i in x:\n"
                "        x[i] = x[i] + undefined\n"
                "def main():\n"
                "    k()\n"
                "main()\n", tmp_path)
    assert r.returncode == 1
    err = r.stderr
    assert "spirad.SpiradNameError: " in err and "kernel_ir" not in err, err
    frames = [ln for ln in err.splitlines() if ln.startswith('  File "')]
    assert len(frames) == 2 and all("user_script.py" in ln for ln in frames), err  # <module>, main
    assert "x[i] = x[i] + undefined" in err and "^^^^^^^^^" in err


def test_uncaught_error_with_spirad_debug_shows_every_frame(tmp_path):
    r = _python("import spirad as sd\nsd.init(arch=sd.cpu)\nx = sd.field(sd.f32, shape=4)\n"
                "x[4] = 1.0\n", tmp_path, env={"SPIRAD_DEBUG": "1"})
    assert "spirad.SpiradBoundsError: index (4,) is out of range for field x" in r.stderr
    assert "spirad/data/field.py" in r.stderr, r.stderr


def test_kernel_from_stdin_says_why_there_is_no_source():
    r = _python("import spirad as sd\nsd.init(arch=sd.cpu)\n@sd.kernel\ndef k():\n    pass\nk()\n",
                stdin=True)
    assert r.returncode == 1
    assert "spirad.SpiradSyntaxError: cannot read the source of k (defined in <stdin>)" in r.stderr
    assert "piped to `python -`" in r.stderr and "Put the code in a .py file" in r.stderr
    assert 'File "/' not in r.stderr, r.stderr  # no spirad frame (only <stdin>)


def test_gpu_without_any_gpu_gives_every_reason():
    env = {"VK_ICD_FILENAMES": "/nonexistent/icd.json", "SPIRAD_CUDA_EMULATE": "0",
           "SPIRAD_AMDGPU_EMULATE": "0", "SPIRAD_METAL_EMULATE": "0"}
    r = _python("import spirad as sd\nsd.init(arch=sd.gpu)\n", stdin=True, env=env)
    assert r.returncode == 1
    err = r.stderr
    assert "spirad.SpiradArchError: arch=gpu: no GPU backend is available on this machine" in err
    for arch in ("cuda", "amdgpu", "metal", "vulkan"):
        assert f"\n  {arch}: " in err, err
    assert "vkCreateInstance" in err or "Vulkan" in err
    assert "python -m spirad" in err
