"""Device-runtime test programs used by more than one test module, written once.

`bound_kernels()` builds a parallel loop whose range is a field written on the device by a serial
task just before it (and by a kernel launched before that): the shape whose range is read on the
device (`device_ranges`, architecture §1) without a host round trip, checked by tests/backends
(the result on every GPU arch) and tests/gpu_llvm (no host wait on the LLVM GPU runtime)."""
import spirad as sd


def bound_kernels(size=1000):
    """(n, x, set_n, count_up): `set_n(v)` writes n; `count_up()` adds 1 to n, then to x[:n]."""
    n = sd.field(sd.i32, shape=())
    x = sd.field(sd.i32, shape=size)

    @sd.kernel
    def set_n(v: sd.i32):
        n[None] = v

    @sd.kernel
    def count_up():
        n[None] = n[None] + 1          # a serial task before the loop ...
        for i in range(n[None]):       # ... whose result the range reads on the device
            x[i] += 1

    return n, x, set_n, count_up
