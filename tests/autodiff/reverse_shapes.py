"""The kernels of tests/autodiff/test_reverse_soundness.py, written once: the test loads this
module under spirad and under the float64 stand-in for `sd` (tests/support/random_grad_programs.
reference_sd), whose run is the oracle for central differences. `sd` is injected by the loader;
the module is never imported on its own."""
# ruff: noqa: F821 (sd is injected)

ND = sd.types.ndarray()


# -- 1. a local assigned before a `break`, read by a store a later trip overwrites ---------------
@sd.kernel
def k_break_store(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        for j in range(n):
            w = v
            if j >= 4:
                break
            v = v + 0.163
            y[i] = sd.sin(w)             # the last store (j = 3) wins


# -- 2. a local computed before a `continue` -------------------------------------------------------
@sd.kernel
def k_continue_local(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = 0.5
        u = x[i]
        for j in range(n):
            t = 0.613 * v
            if j % 2 == 1:
                continue
            v = t
            v = v + u
        y[i] = v


# -- 3. a `while` on a counter: a load in the loop's head used after its exit check ---------------
@sd.kernel
def k_while_head(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        j = 0
        while j < n:
            w = v
            v = sd.sin(v) * 1.1 + 0.2
            y[i] = w * w + v           # overwritten every trip
            j += 1


# -- 4. `break` in an inner loop, `continue` in the outer one, locals crossing both ----------------
@sd.kernel
def k_nested_jumps(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        acc = 0.0
        for j in range(n):
            a = v * 0.7
            if j % 3 == 2:
                continue
            for q in range(n):
                b = a
                if q >= j:
                    break
                a = sd.tanh(a + 0.1 * q)
                acc += b * v
            v = a + 0.05
        y[i] = acc + v


# -- 5. a `break` on data (far from its threshold), the breaking trip's local read after the loop -
@sd.kernel
def k_break_data(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        last = 0.0
        for j in range(n):
            last = v
            if x[i] * (j + 1) > 1.5:
                break
            v = sd.cos(v) + 0.3 * x[i]
        y[i] = last * v


# -- 6. an integer local made a select (forward_stores), indexing a read-only array in the loop ----
@sd.kernel
def k_select_index(x: ND, y: ND, n: sd.i32, c: ND):
    for i in x:
        v = x[i]
        for j in range(n):
            k = j
            if k >= 3:
                k = k - 3
            if j == 5:
                continue
            v = sd.sin(v * c[k]) + x[k]
        y[i] = v


# -- 7. conditions over loop indices and reads of never-written data, recomputed in reverse -------
@sd.kernel
def k_recomputed(x: ND, y: ND, n: sd.i32, c: ND):
    for i in x:
        v = x[i]
        for j in range(n):
            m = c[(i + j) % 5] * 2.0       # a never-written array: recomputed, not stacked
            if (i + j) % 2 == 0:
                v = v * m
                if v > 100.0:              # never true here: a condition on data
                    break
            else:
                v = sd.sin(v) + m * 0.1
        y[i] = v


# -- 8. a product with a constant zero beside a live path, in a loop with `continue` ---------------
@sd.kernel
def k_zero_factor(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        dead = 0.0
        for j in range(n):
            dead = sd.exp(v) * 0.0
            if j == 1:
                continue
            v = sd.sin(v) + dead + 0.2
        y[i] = v + dead


# -- 9. an inlined func inside a loop with a jump; a loop-carried local stored after the loop ------
@sd.func
def blend(a, b, t):
    u = a * (1.0 - t)
    return u + b * t


@sd.kernel
def k_func_jump(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        w = 0.3
        for j in range(n):
            w2 = blend(v, w, 0.25)
            if j == n - 2:
                break
            w = v
            v = sd.sin(w2) + 0.1
        v = v * 2.0 + w                  # stored after the loop
        y[i] = v


# -- 10. `while True` with the break at the end, nested in a range with a `continue` ---------------
@sd.kernel
def k_while_true(x: ND, y: ND, n: sd.i32):
    for i in x:
        v = x[i]
        t = 0.0
        for j in range(n):
            if j == 2:
                continue
            k = 0
            while True:
                t = v
                v = sd.tanh(v * 1.3) + 0.1 * t
                k += 1
                if k > j or x[i] * k > 2.0:
                    break
            y[i] = v * t
        y[i] += v
