import time, sys, spirad as sd, numpy as np
from spirad import offline_cache as oc
sd.init(arch=sys.argv[1])
x = sd.field(sd.f32, shape=16, needs_grad=True)
@sd.kernel
def k(n: sd.i32, a: sd.types.ndarray()):
    for i in x:
        s = x[i]
        for j in range(n):
            s = sd.sin(s) * 1.1
        a[i] = s
a = sd.ndarray(sd.f32, 16, needs_grad=True)
x.from_numpy(np.linspace(0,1,16).astype(np.float32))
t=time.perf_counter(); k(3, a); t1=time.perf_counter(); a.grad.fill(1); k.grad(3,a); t2=time.perf_counter()
print("fwd %.1f ms adj %.1f ms"%((t1-t)*1e3, (t2-t1)*1e3), oc.stats, a.to_numpy()[:3], x.grad.to_numpy()[:3])
