"""User errors: each is a SpiradError subclass (a compile error is never a RuntimeError; only the
failures a launch reports at run time are, as Quadrants' are), quotes the kernel's source line
with a `^` caret under the offending code, and says what to do instead."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import spirad as sd
from tests.support.archs import has_capability, test_archs

x = sd.field(sd.f32, shape=4)  # placeholder; each test re-creates fields after init
xi = x
v3 = x


def _fields():
    global x, xi, v3
    x = sd.field(sd.f32, shape=4)
    xi = sd.field(sd.i32, shape=4)
    v3 = sd.Vector.field(3, sd.f32, shape=4)


@sd.kernel
def undefined_name():
    for i in x:
        x[i] = not_defined_anywhere + 1


@sd.kernel
def with_block():
    for i in x:
        with open("f"):
            pass


@sd.kernel
def list_comp():
    for i in x:
        x[i] = [j for j in range(i)][0]  # a run-time iterable (a constant range unrolls)


@sd.kernel
def lambda_expr():
    for i in x:
        f = lambda q: q  # noqa: E731
        x[i] = f(1)


@sd.kernel
def try_block():
    for i in x:
        try:
            x[i] = 1
        except Exception:
            pass


@sd.kernel
def calls_print():
    for i in x:
        print(i, flush=True)


@sd.kernel
def vector_into_scalar():
    for i in x:
        x[i] = v3[i]


@sd.kernel
def bitop_on_float():
    for i in x:
        xi[i] = xi[i] & 1.5


@sd.kernel
def wrong_index_count():
    for i in x:
        x[i, 0] = 1


@sd.kernel
def float_index():
    for i in x:
        x[i] = x[0.5]


@sd.kernel
def unknown_attribute():
    for i in x:
        x[i] = x.no_such_attribute


@sd.kernel
def string_value():
    for i in x:
        x[i] = "abc"


@sd.kernel
def break_in_parallel():
    for i in x:
        if i > 2:
            break


@sd.kernel
def kernel_returns():
    for i in x:
        x[i] = 1
    return 1


@sd.kernel
def parallel_race():
    s = 0.0
    for i in x:
        s = x[i] - s  # (s * x[i] would be a reduction: an atomic multiply)
    x[0] = s


@sd.kernel
def data_dependent_parallel_bound():
    for i in range(sd.atomic_add(xi[0], 1)):
        x[i] = 1


@sd.kernel
def for_else():
    for i in x:
        for j in range(2):
            pass
        else:
            pass


@sd.kernel
def is_compare():
    for i in x:
        x[i] = x[i] is None


@sd.kernel
def invert_float():
    for i in x:
        x[i] = ~x[i]


@sd.kernel
def bad_cast():
    for i in x:
        x[i] = sd.cast(x[i], "float")


@sd.kernel
def redefine_annotated():
    for i in x:
        q: sd.f32 = 1.0
        q: sd.f32 = 2.0


@sd.kernel
def iterate_scalar():
    for i in 3:
        pass


@sd.kernel
def starred_call():
    for i in x:
        x[i] = sd.max(*i)  # a run-time value cannot be spread


@sd.kernel
def fstring():
    for i in x:
        x[i] = len(f"{i}")


@sd.kernel
def block_scoped_name():
    for i in x:
        if i > 0:
            inner = 1.0
        x[i] = inner


CASES = [  # kernel, error class, text of the quoted source line, what the message must say
    (undefined_name, sd.SpiradNameError, "x[i] = not_defined_anywhere + 1", "not defined"),
    (block_scoped_name, sd.SpiradNameError, "x[i] = inner", "assign it before this line"),
    (with_block, sd.SpiradSyntaxError, 'with open("f"):', "With"),
    (list_comp, sd.SpiradSyntaxError, "[j for j in range(i)]", "only allowed as a for-loop iterator"),
    (lambda_expr, sd.SpiradSyntaxError, "f = lambda q: q", "@sd.func"),
    (try_block, sd.SpiradSyntaxError, "try:", "cannot raise or catch"),
    (calls_print, sd.SpiradSyntaxError, "print(i, flush=True)", "sep= and end= only"),
    (vector_into_scalar, sd.SpiradTypeError, "x[i] = v3[i]", "vector"),
    (bitop_on_float, sd.SpiradTypeError, "xi[i] & 1.5", "needs integers"),
    (wrong_index_count, sd.SpiradTypeError, "x[i, 0] = 1", "indexed with 2"),
    (float_index, sd.SpiradTypeError, "x[0.5]", "indices must be integers"),
    (unknown_attribute, sd.SpiradSyntaxError, "x.no_such_attribute", "no attribute"),
    (string_value, sd.SpiradTypeError, 'x[i] = "abc"', "expected a number"),
    (break_in_parallel, sd.SpiradSyntaxError, "break", "outermost (parallel) loop"),
    (kernel_returns, sd.SpiradSyntaxError, "return 1", "return type annotation"),
    (parallel_race, sd.SpiradSyntaxError, "s = x[i] - s", "iterations would race"),
    (data_dependent_parallel_bound, sd.SpiradSyntaxError,
     "for i in range(sd.atomic_add(xi[0], 1)):", "field / ndarray elements and local variables"),
    (for_else, sd.SpiradSyntaxError, "for j in range(2):", "not supported"),
    (is_compare, sd.SpiradSyntaxError, "x[i] is None", "Operator \"is\""),
    (invert_float, sd.SpiradTypeError, "~x[i]", "integer"),
    (bad_cast, sd.SpiradTypeError, 'sd.cast(x[i], "float")', "sd.f32"),
    (redefine_annotated, sd.SpiradSyntaxError, "q: sd.f32 = 2.0", "already defined"),
    (iterate_scalar, sd.SpiradSyntaxError, "for i in 3:", "range()"),
    (starred_call, sd.SpiradSyntaxError, "sd.max(*i)", "*args"),
    (fstring, sd.SpiradTypeError, 'f"{i}"', "can only be printed"),
]


def _assert_quotes(err, line_text):
    msg = str(err)
    assert isinstance(err, sd.SpiradError) and not isinstance(err, RuntimeError)
    assert line_text in msg, msg
    lines = msg.splitlines()
    k = next(n for n, ln in enumerate(lines) if not ln.startswith("File ") and line_text in ln)
    caret = lines[k + 1]
    assert set(caret.strip()) == {"^"}, msg
    # the caret sits under the quoted line's text
    start = caret.index("^")
    assert lines[k][start:start + len(caret.strip())].strip(), msg
    assert "test_errors.py" in msg


@test_archs()
@pytest.mark.parametrize("kernel,cls,line,says", CASES, ids=[c[0].fn.__name__ for c in CASES])
def test_compile_errors_quote_source(arch, kernel, cls, line, says):
    _fields()
    with pytest.raises(cls) as ei:
        kernel()
    _assert_quotes(ei.value, line)
    assert says in str(ei.value)


@test_archs()
def test_caret_underlines_the_expression(arch):
    _fields()
    with pytest.raises(sd.SpiradNameError) as ei:
        undefined_name()
    lines = str(ei.value).splitlines()  # Taichi's layout: a first empty line, then File ...
    assert lines[0] == "" and lines[1].startswith('File "')
    src, caret = lines[2], lines[3]
    start = caret.index("^")
    assert src[start:start + caret.count("^")] == "not_defined_anywhere"


@sd.kernel
def typed_args(n: sd.i32, a: sd.types.ndarray(dtype=sd.f32, ndim=1)):
    for i in a:
        a[i] = n


@test_archs()
def test_argument_errors_quote_the_parameter(arch):
    a = sd.ndarray(sd.f32, 3)
    # no f64 ndarray exists on a device without f64 (Metal refuses it at creation)
    f64_case = [((1, sd.ndarray(sd.f64, 3)), sd.SpiradTypeError, "a: sd.types.ndarray", "dtype")
                ] if has_capability(arch, "f64") else []
    for args, cls, param, says in f64_case + [
        ((1.5, a), sd.SpiradTypeError, "n: sd.i32", "pass an int"),
        (("1", a), sd.SpiradTypeError, "n: sd.i32", "must be a number"),
        ((2 ** 40, a), sd.SpiradValueError, "n: sd.i32", "sd.i64"),
        ((1, [0.0, 1.0]), sd.SpiradTypeError, "a: sd.types.ndarray", "a numpy array or a torch tensor"),
        ((1, np.zeros(3, np.float64)), sd.SpiradTypeError, "a: sd.types.ndarray", "dtype float32"),
        ((1, sd.ndarray(sd.f32, (3, 1))), sd.SpiradTypeError, "a: sd.types.ndarray", "dimension"),
        ((1,), sd.SpiradTypeError, "def typed_args", "takes 2 argument"),
    ]:
        with pytest.raises(cls) as ei:
            typed_args(*args)
        _assert_quotes(ei.value, param)
        assert says in str(ei.value)


@test_archs()
def test_host_side_value_errors(arch):
    _fields()
    for fn, says in [
        (lambda: x.from_numpy(np.zeros(5, np.float32)), "does not match"),
        (lambda: xi.from_numpy(np.array([0, 1, 2, 2 ** 40])), "do not fit"),
        (lambda: xi.from_numpy(np.zeros(4)), "astype"),
        (lambda: x[7], "out of range"),
        (lambda: xi.fill(2 ** 40), "do not fit"),
        (lambda: sd.field(sd.f32, shape="abc"), "shape"),
    ]:
        with pytest.raises(sd.SpiradError, match=says):
            fn()


@test_archs()
def test_stale_field_in_kernel_quotes_source(arch):
    _fields()
    old = x
    sd.init(arch=arch, debug=True)

    @sd.kernel
    def uses_old():
        old[0] = 1

    with pytest.raises(sd.SpiradValueError) as ei:
        uses_old()
    _assert_quotes(ei.value, "old[0] = 1")
    assert "previous sd.init" in str(ei.value)


@test_archs()
def test_internal_errors_are_runtime_errors(arch):
    """An IR invariant violation is a compiler bug: RuntimeError, not a user error."""
    from kernel_ir import dtypes as T
    from kernel_ir.builder import IRBuilder
    from kernel_ir.ops import Op
    b = IRBuilder()
    with pytest.raises(RuntimeError) as ei:
        b.binary(Op.ADD, b.const(1, T.i32), b.const(1.0, T.f32))
    assert not isinstance(ei.value, sd.SpiradError)


@test_archs()
def test_data_dependent_bound_workaround(arch):
    """The hint of the parallel-bound error works: a loop nested in `range(1)` is serial."""
    _fields()
    xi[0] = 3

    @sd.kernel
    def k():
        for _ in range(1):
            for i in range(xi[0]):
                x[i] = i + 1

    k()
    np.testing.assert_array_equal(x.to_numpy(), [1, 2, 3, 0])


@pytest.mark.parametrize("arch", ["cpu", "vulkan"])
def test_out_of_range_index_in_kernel_does_not_crash(arch, tmp_path):
    """Run in a child process: without bounds checks the failure mode is a segfault. With
    debug=True the store is skipped, the next host read raises SpiradValueError, and the runtime
    keeps working."""
    from tests.support.archs import arch_or_skip
    arch_or_skip(arch)
    code = textwrap.dedent(f"""
        import spirad as sd
        sd.init(arch="{arch}", debug=True)
        x = sd.field(sd.f32, shape=4, name="x")

        @sd.kernel
        def k(o: sd.i32):
            for i in x:
                x[i + o] = 1

        try:
            k(10_000_000)
            x.to_numpy()
        except sd.SpiradValueError as e:
            print("SpiradValueError", e)
        k(0)
        print("after", x.to_numpy().tolist())
    """)
    child = tmp_path / "oob_child.py"  # kernels need a real source file
    child.write_text(code)
    r = subprocess.run([sys.executable, str(child)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"child exited with {r.returncode}: {r.stderr[-2000:]}"
    assert "SpiradValueError" in r.stdout, r.stdout + r.stderr
    for part in ("kernel k", "field 'x'", "(4,)", "axis 0", "x[i + o] = 1"):
        assert part in r.stdout, r.stdout
    assert any(str(10_000_000 + i) in r.stdout for i in range(4)), r.stdout
    assert "after [1.0, 1.0, 1.0, 1.0]" in r.stdout, r.stdout


def _oob_error(run) -> str:
    """Run `run()` (launches, then a host read) and return the bounds error's message."""
    with pytest.raises(sd.SpiradValueError) as ei:
        run()
    msg = str(ei.value)
    assert "index out of range" in msg and "sd.init(debug=True)" in msg, msg
    return msg


@test_archs(debug_only="the named bounds check (index, axis, line) is debug=True's")
def test_oob_field_store_load_atomic(arch):
    f = sd.field(sd.f32, shape=(3, 4), name="grid")
    out = sd.field(sd.f32, shape=3, name="out")
    cnt = sd.field(sd.i32, shape=4, name="cnt")

    @sd.kernel
    def store(o: sd.i32):
        for i in out:
            f[i, i + o] = 2.0

    @sd.kernel
    def load(o: sd.i32):
        for i in out:
            out[i] = f[i + o, 0] + 1.0

    @sd.kernel
    def atomic(o: sd.i32):
        for i in out:
            sd.atomic_add(cnt[i * o], 1)

    msg = _oob_error(lambda: (store(2), f.to_numpy()))
    assert "kernel store" in msg and "field 'grid' of shape (3, 4)" in msg, msg
    assert "indexed with 4 on axis 1" in msg and "f[i, i + o] = 2.0" in msg, msg
    # the bad store (i = 2 -> f[2, 4], inside the buffer's bytes) was skipped
    np.testing.assert_array_equal(f.to_numpy(), [[0, 0, 2, 0], [0, 0, 0, 2], [0, 0, 0, 0]])

    f.fill(5.0)
    msg = _oob_error(lambda: (load(-2), out.to_numpy()))
    assert "kernel load" in msg and "indexed with -" in msg and "on axis 0" in msg, msg
    np.testing.assert_array_equal(out.to_numpy(), [1, 1, 6])  # bad loads read 0

    msg = _oob_error(lambda: (atomic(2), cnt.to_numpy()))
    assert "field 'cnt' of shape (4,)" in msg and "indexed with 4" in msg, msg
    np.testing.assert_array_equal(cnt.to_numpy(), [1, 0, 1, 0])

    # the runtime keeps working: in-range launches raise nothing
    atomic(1)
    load(0)
    np.testing.assert_array_equal(cnt.to_numpy(), [2, 1, 2, 0])
    np.testing.assert_array_equal(out.to_numpy(), [6, 6, 6])


@sd.kernel
def nd_shift(a: sd.types.ndarray(dtype=sd.f32, ndim=2), o: sd.i32):
    for i, j in a:
        a[i, j + o] = 1.0


@sd.kernel
def nd_read(a: sd.types.ndarray(dtype=sd.f32, ndim=2), b: sd.types.ndarray(dtype=sd.f32, ndim=1)):
    for i in b:
        b[i] = a[i, i - 1]


@test_archs(debug_only="the named bounds check (index, axis, line) is debug=True's")
def test_oob_ndarray_2d_and_negative(arch):
    a = sd.ndarray(sd.f32, (2, 3))
    msg = _oob_error(lambda: (nd_shift(a, 1), a.to_numpy()))
    assert "kernel nd_shift" in msg and "ndarray 'a' of shape (2, 3)" in msg, msg
    assert "indexed with 3 on axis 1 (extent 3" in msg, msg
    np.testing.assert_array_equal(a.to_numpy(), [[0, 1, 1], [0, 1, 1]])  # row 1 untouched by row 0

    a.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = sd.ndarray(sd.f32, 2)
    msg = _oob_error(lambda: (nd_read(a, b), b.to_numpy()))
    assert "indexed with -1 on axis 1" in msg and "ndarray 'a' of shape (2, 3)" in msg, msg
    np.testing.assert_array_equal(b.to_numpy(), [0, 3])
    # a different shape for the same kernel: checks use the new extents
    a2 = sd.ndarray(sd.f32, (4, 5))
    nd_shift(a2, 0)
    np.testing.assert_array_equal(a2.to_numpy(), np.ones((4, 5)))
    msg = _oob_error(lambda: (nd_shift(a2, -1), a2.to_numpy()))
    assert "ndarray 'a' of shape (4, 5)" in msg and "indexed with -1 on axis 1" in msg, msg


@test_archs(debug_only="the named bounds check (index, axis, line) is debug=True's")
def test_oob_error_surfaces_at_sync(arch):
    x = sd.field(sd.f32, shape=4, name="x")

    @sd.kernel
    def k(o: sd.i32):
        for i in x:
            x[i + o] = 1

    k(-1)
    with pytest.raises(sd.SpiradValueError, match="indexed with -1"):
        sd.sync()
    sd.sync()  # reported once
    np.testing.assert_array_equal(x.to_numpy(), [1, 1, 1, 0])


@pytest.mark.parametrize("arch", ["cpu", "vulkan"])
def test_no_bounds_check_code_without_debug(arch):
    """check_bounds=False compiles without checks: no status writes in the generated code; the
    default checks (no debug) record only STATUS_OUT_OF_BOUNDS; debug=True the full record."""
    from tests.support.archs import arch_or_skip
    arch_or_skip(arch)

    def compiled(**kw):
        sd.init(arch=arch, **kw)
        x = sd.field(sd.f32, shape=4, name="x")

        @sd.kernel
        def k(o: sd.i32):
            for i in x:
                x[i + o] = x[i] + 1

        k(0)
        return k.compile((0,)).program

    for kw, full, cheap in (({"check_bounds": False}, False, False), ({}, False, True),
                            ({"debug": True}, True, False)):
        p = compiled(**kw)
        if arch == "cpu":
            code = p.module.optimized_ir
            assert ("spirad.bounds.fail" in code) == full
            assert ("spirad.oob.fail" in code) == cheap
            assert (p.bounds is not None) == full
        else:
            from spirv_codegen import disassemble
            code = "".join(disassemble(t.words) for t in p.tasks)
            assert ("OpAtomicCompareExchange" in code) == (full or cheap)
            assert ("oob_k" in code) == cheap
    sd.init(arch=arch)
