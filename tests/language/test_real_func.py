"""`sd.real_func` keeps Taichi's contract of a real function (typed parameters, an annotated
return value) and is refused at decoration without it (spirad/real_func.py); it runs inlined."""
import pytest

import spirad as sd


def test_real_func_needs_annotations():
    sd.init(arch="cpu")
    with pytest.raises(sd.TaichiSyntaxError, match="Argument 'a' of real function .* must be type annotated"):
        @sd.real_func
        def add(a, b: sd.i32) -> sd.i32:
            return a + b

    with pytest.raises(sd.TaichiCompilationError, match="return value must be annotated"):
        @sd.real_func
        def add2(a: sd.i32, b: sd.i32):
            return a + b

    @sd.real_func
    def store(x: sd.template(), v: sd.i32):  # no value returned: no return annotation needed
        x[None] = v

    @sd.real_func
    def add3(a: sd.i32, b: sd.i32) -> sd.i32:
        return a + b

    x = sd.field(sd.i32, shape=())

    @sd.kernel
    def k():
        store(x, add3(30, 2))

    k()
    assert x[None] == 32
