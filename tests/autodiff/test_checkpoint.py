"""`sd.ad.checkpointed`: n steps over a declared state, differentiated with k snapshots.

Each simulation is written twice, as DiffTaichi writes it (state indexed by time step, `x[t, i]`,
a full Tape of every launch) and in place (state of one step's size, `checkpointed`). The
arithmetic is the same, so the gradients must agree to float32 rounding of the atomic
accumulation order (1e-6 relative; on one thread bit for bit). The schedule (`spirad.ad.revolve`)
is checked against revolve's optimal count and a brute-force minimisation, and the snapshots held
against k."""
import numpy as np
import pytest

import spirad as sd
from kernel_ir.errors import SpiradAutodiffError, SpiradTypeError, SpiradValueError
from spirad.ad import revolve
from tests.support.archs import test_archs

RTOL = 1e-6


def simulate_schedule(n, k):
    """Run revolve.schedule(n, k) symbolically: (forward steps, most snapshots held, reversed)."""
    held, pos, advanced, reversed_, most = {}, 0, 0, [], 0
    for a in revolve.schedule(n, k):
        if isinstance(a, revolve.Takeshot):
            assert pos == a.index and a.slot not in held and 0 <= a.slot < k
            held[a.slot] = a.index
            most = max(most, len(held))
        elif isinstance(a, revolve.Restore):
            assert held[a.slot] == a.index
            pos = a.index
        elif isinstance(a, revolve.Advance):
            assert pos == a.start < a.stop
            advanced += a.stop - a.start
            pos = a.stop
        elif isinstance(a, revolve.Reverse):
            assert pos == a.index, "a step is reversed from the state before it"
            reversed_.append(a.index)
            pos = None
        else:
            del held[a.slot]
    assert not held
    return advanced, most, reversed_


@pytest.mark.parametrize("k", range(1, 8))
def test_schedule_is_optimal_and_holds_at_most_k(k):
    for n in range(1, 45):
        advanced, most, reversed_ = simulate_schedule(n, k)
        assert reversed_ == list(range(n - 1, -1, -1))
        assert most <= k
        assert advanced == revolve.optimal_forward_steps(n, k) == \
            revolve.brute_force_forward_steps(n, k), (n, k)


def test_schedule_at_scale():
    advanced, most, reversed_ = simulate_schedule(10_000, 32)
    assert advanced == revolve.optimal_forward_steps(10_000, 32) == 32_860 and most == 32
    assert len(reversed_) == 10_000
    assert revolve.optimal_forward_steps(100, 1) == 99 * 100 // 2  # one snapshot: quadratic
    assert revolve.optimal_forward_steps(50, 50) == 49             # enough: each step once


def expected_forward_steps(n, k):
    """What a region runs untaped: revolve's count, the last step (run untaped in the forward
    sweep so the loss can read the final state), and again from the last snapshot of the
    forward sweep to step n-1 at the start of the reverse pass."""
    acts = list(revolve.schedule(n, k))
    first = next(i for i, a in enumerate(acts) if isinstance(a, revolve.Reverse))
    last = [a.index for a in acts[:first] if isinstance(a, revolve.Takeshot)][-1]
    return revolve.optimal_forward_steps(n, k) + 1 + (n - 1 - last)


# -- mass-spring -------------------------------------------------------------------------------
N, S = 6, 8
RNG = np.random.RandomState(3)
X0 = RNG.rand(N, 2).astype(np.float32)
A_ = RNG.randint(0, N, S)
B_ = (A_ + 1 + RNG.randint(0, N - 1, S)) % N
# one spring: (end a, end b, rest length, stiffness), one field, so that each kernel binds few
# buffers (Metal allows 8 per kernel, the adjoint's status and two stack heaps included)
SP = np.stack([A_, B_, 0.3 + 0.2 * RNG.rand(S), 5 + RNG.rand(S)], 1).astype(np.float32)
DT, DAMP = 0.01, 0.99


def mass_spring(n, k=None):
    """loss, d loss / d springs, d loss / d x0, final x, the region (None: full tape);
    k=None: the DiffTaichi form (x[t, i], a full Tape), else checkpointed with k snapshots."""
    timed = k is None
    x = sd.Vector.field(2, sd.f32, shape=(n + 1, N) if timed else N, needs_grad=True)
    v = sd.Vector.field(2, sd.f32, shape=(n + 1, N) if timed else N, needs_grad=True)
    f = sd.Vector.field(2, sd.f32, shape=(n, N) if timed else N, needs_grad=True)
    sp = sd.Vector.field(4, sd.f32, shape=S, needs_grad=True)  # parameters: read, never written
    x0 = sd.Vector.field(2, sd.f32, shape=N, needs_grad=True)
    loss = sd.field(sd.f32, (), needs_grad=True)
    sp.from_numpy(SP)
    x0.from_numpy(X0)

    if timed:
        @sd.kernel
        def init():
            for i in range(N):
                x[0, i] = x0[i]
                v[0, i] = sd.Vector([0.0, 0.0])

        @sd.kernel
        def clear(t: sd.i32):
            for i in range(N):
                f[t, i] = sd.Vector([0.0, 0.0])

        @sd.kernel
        def force(t: sd.i32):
            for s in range(S):
                a, b = sd.cast(sp[s][0], sd.i32), sd.cast(sp[s][1], sd.i32)
                d = x[t, b] - x[t, a]
                le = d.norm()
                fs = sp[s][3] * (le - sp[s][2]) / le * d
                f[t, a] += fs
                f[t, b] -= fs

        @sd.kernel
        def advance(t: sd.i32):
            for i in range(N):
                v[t + 1, i] = v[t, i] * DAMP + DT * (f[t, i] + sd.Vector([0.0, -1.0]))
                x[t + 1, i] = x[t, i] + DT * v[t + 1, i]

        @sd.kernel
        def compute_loss():
            for i in range(N):
                loss[None] += x[n, i][0] * x[n, i][1] + v[n, i][0]

        with sd.ad.Tape(loss=loss):
            init()
            for t in range(n):
                clear(t)
                force(t)
                advance(t)
            compute_loss()
        region, final = None, x.to_numpy()[n]
    else:
        @sd.kernel
        def init():
            for i in range(N):
                x[i] = x0[i]
                v[i] = sd.Vector([0.0, 0.0])

        @sd.kernel
        def clear():
            for i in range(N):
                f[i] = sd.Vector([0.0, 0.0])

        @sd.kernel
        def force():
            for s in range(S):
                a, b = sd.cast(sp[s][0], sd.i32), sd.cast(sp[s][1], sd.i32)
                d = x[b] - x[a]
                le = d.norm()
                fs = sp[s][3] * (le - sp[s][2]) / le * d
                f[a] += fs
                f[b] -= fs

        @sd.kernel
        def advance():
            for i in range(N):
                v[i] = v[i] * DAMP + DT * (f[i] + sd.Vector([0.0, -1.0]))
                x[i] = x[i] + DT * v[i]

        @sd.kernel
        def compute_loss():
            for i in range(N):
                loss[None] += x[i][0] * x[i][1] + v[i][0]

        def step():
            clear()
            force()
            advance()

        with sd.ad.Tape(loss=loss):
            init()
            region = sd.ad.checkpointed(step, state=[x, v], steps=n, snapshots=k)
            compute_loss()
        final = x.to_numpy()
    return loss[None], sp.grad.to_numpy(), x0.grad.to_numpy(), final, region


@test_archs()
def test_mass_spring_matches_full_tape(arch):
    n, k = 12, 3
    loss, gsp, gx0, final, _ = mass_spring(n)
    loss_c, gsp_c, gx0_c, final_c, region = mass_spring(n, k)
    assert loss_c == loss
    np.testing.assert_array_equal(final_c, final)  # the reverse pass puts the primals back
    assert np.abs(gsp).max() > 1e-4 and np.abs(gx0).max() > 1e-2
    np.testing.assert_allclose(gsp_c, gsp, rtol=RTOL, atol=RTOL * np.abs(gsp).max())
    np.testing.assert_allclose(gx0_c, gx0, rtol=RTOL, atol=RTOL * np.abs(gx0).max())
    st = region.stats
    assert st.max_held == k and st.taped_steps == n
    assert st.forward_steps == expected_forward_steps(n, k)
    assert st.snapshot_bytes == 2 * N * 2 * 4  # x and v (no step draws random numbers)
    # copies at their peak: k snapshots, one recorded step's saved x (the update overwrites what
    # the force kernel read), the final x, v, f put back at the end: O(k), whatever n is
    assert k * st.snapshot_bytes < st.peak_bytes <= (k + 2) * st.snapshot_bytes + N * 2 * 4


def test_mass_spring_bit_equal_on_one_thread():
    sd.init(arch=sd.cpu, cpu_max_num_threads=1)
    full = mass_spring(9)
    for k in (1, 2, 9, 20):
        ck = mass_spring(9, k)
        for a, b in zip(full[:4], ck[:4]):
            np.testing.assert_array_equal(a, b)
        st = ck[4].stats
        assert st.max_held <= k and st.forward_steps == expected_forward_steps(9, k)


def test_against_central_differences():
    """The gradient is the loss's derivative (float64 central differences of a numpy model)."""
    sd.init(arch=sd.cpu, default_fp=sd.f64)
    n = 10
    x = sd.field(sd.f64, shape=4, needs_grad=True)
    y = sd.field(sd.f64, shape=4, needs_grad=True)
    c = sd.field(sd.f64, shape=2, needs_grad=True)
    loss = sd.field(sd.f64, (), needs_grad=True)

    @sd.kernel
    def step_a():
        for i in x:
            y[i] = sd.sin(x[i]) * c[0] + c[1] * x[i]

    @sd.kernel
    def step_b():
        for i in x:
            x[i] = y[i] * 0.9 + 0.05

    @sd.kernel
    def compute_loss():
        for i in x:
            loss[None] += x[i] * x[i]

    def ref(cv, x0):
        xv = x0.copy()
        for _ in range(n):
            xv = (np.sin(xv) * cv[0] + cv[1] * xv) * 0.9 + 0.05
        return np.sum(xv * xv)

    x0 = np.array([0.1, 0.5, -0.3, 1.2])
    cv = np.array([0.8, 0.3])
    x.from_numpy(x0)
    c.from_numpy(cv)
    with sd.ad.Tape(loss=loss):
        sd.ad.checkpointed(lambda: (step_a(), step_b()), state=[x], steps=n, snapshots=2)
        compute_loss()
    assert abs(loss[None] - ref(cv, x0)) < 1e-12
    eps = 1e-6
    for j in range(2):
        e = np.eye(2)[j] * eps
        fd = (ref(cv + e, x0) - ref(cv - e, x0)) / (2 * eps)
        assert abs(c.grad[j] - fd) < 1e-7 * max(1, abs(fd))
    for j in range(4):
        e = np.eye(4)[j] * eps
        fd = (ref(cv, x0 + e) - ref(cv, x0 - e)) / (2 * eps)
        assert abs(x.grad[j] - fd) < 1e-7 * max(1, abs(fd))


# -- particles with a dynamic inner loop and an MPM-like grid -------------------------------------
P, G = 8, 4
P0 = np.stack([np.linspace(0.1, 0.85, P), np.linspace(-0.2, 0.3, P)], 1).astype(np.float32)
W0 = np.array([0.7, 0.4], np.float32)


def particles(n, k=None, nsub=3):
    """Particles (x, v) scatter mass and momentum to a grid (atomic adds), blend their velocity
    with their cell's, then run `nsub + i` substeps of a non-linear ODE each: a loop whose trip
    count is known at launch, its values carried on the adstack. Returns loss, d/dw, d/dp0 and
    the final state."""
    timed = k is None
    p = sd.Vector.field(2, sd.f32, shape=(n + 1, P) if timed else P, needs_grad=True)
    grid = sd.Vector.field(2, sd.f32, shape=(n, G) if timed else G, needs_grad=True)
    pn = sd.Vector.field(2, sd.f32, shape=P, needs_grad=True)   # in place: the next state
    w = sd.field(sd.f32, 2, needs_grad=True)                     # controller weights
    p0 = sd.Vector.field(2, sd.f32, shape=P, needs_grad=True)
    loss = sd.field(sd.f32, (), needs_grad=True)
    w.from_numpy(W0)
    p0.from_numpy(P0)

    @sd.func
    def cell(x):
        return sd.max(0, sd.min(G - 1, sd.cast(sd.floor(x * G), sd.i32)))

    @sd.func
    def blend(q, g):
        return 0.8 * q[1] + 0.2 * g[1] / g[0]

    @sd.func
    def move(q, i: sd.i32, m: sd.i32):
        x = q[0]
        u = q[1]
        h = 0.05
        for s in range(m + i):                   # dynamic: the adstack keeps x and u
            u = u + h * (w[0] * sd.sin(3.0 * x) - w[1] * u * abs(u))
            x = x + h * u
        return sd.Vector([x, u])

    if timed:
        @sd.kernel
        def init():
            for i in range(P):
                p[0, i] = p0[i]

        @sd.kernel
        def clear(t: sd.i32):
            for c in range(G):
                grid[t, c] = sd.Vector([1e-3, 0.0])

        @sd.kernel
        def p2g(t: sd.i32):
            for i in range(P):
                grid[t, cell(p[t, i][0])] += sd.Vector([1.0, p[t, i][1]])

        @sd.kernel
        def g2p(t: sd.i32):
            for i in range(P):
                p[t, i][1] = blend(p[t, i], grid[t, cell(p[t, i][0])])

        @sd.kernel
        def substeps(t: sd.i32, m: sd.i32):
            for i in range(P):
                p[t + 1, i] = move(p[t, i], i, m)

        @sd.kernel
        def compute_loss():
            for i in range(P):
                loss[None] += p[n, i][0] * p[n, i][0] + 0.5 * p[n, i][1]

        with sd.ad.Tape(loss=loss):
            init()
            for t in range(n):
                clear(t)
                p2g(t)
                g2p(t)
                substeps(t, nsub)
            compute_loss()
        final = p.to_numpy()[n]
    else:
        @sd.kernel
        def init():
            for i in range(P):
                p[i] = p0[i]

        @sd.kernel
        def clear():
            for c in range(G):
                grid[c] = sd.Vector([1e-3, 0.0])

        @sd.kernel
        def p2g():
            for i in range(P):
                grid[cell(p[i][0])] += sd.Vector([1.0, p[i][1]])

        @sd.kernel
        def g2p():
            for i in range(P):
                p[i][1] = blend(p[i], grid[cell(p[i][0])])

        @sd.kernel
        def substeps(m: sd.i32):
            for i in range(P):
                pn[i] = move(p[i], i, m)

        @sd.kernel
        def commit():                              # p is read non-linearly by substeps
            for i in range(P):
                p[i] = pn[i]

        @sd.kernel
        def compute_loss():
            for i in range(P):
                loss[None] += p[i][0] * p[i][0] + 0.5 * p[i][1]

        def step(t):
            clear()
            p2g()
            g2p()
            substeps(nsub)
            commit()

        with sd.ad.Tape(loss=loss):
            init()
            region = sd.ad.checkpointed(step, state=[p], steps=n, snapshots=k)
            compute_loss()
        final = p.to_numpy()
        assert region.stats.max_held <= k
    return loss[None], w.grad.to_numpy(), p0.grad.to_numpy(), final


@test_archs()
def test_particles_with_dynamic_loop_match_full_tape(arch):
    n = 7
    loss, gw, gp0, final = particles(n)
    assert np.abs(gw).max() > 1e-3
    for k in (2, 4):
        loss_c, gw_c, gp0_c, final_c = particles(n, k)
        assert loss_c == pytest.approx(loss, rel=RTOL)
        np.testing.assert_allclose(final_c, final, rtol=RTOL, atol=1e-7)
        np.testing.assert_allclose(gw_c, gw, rtol=RTOL, atol=RTOL * np.abs(gw).max())
        np.testing.assert_allclose(gp0_c, gp0, rtol=RTOL, atol=RTOL * np.abs(gp0).max())


# -- how it composes ----------------------------------------------------------------------------
def _scalar_chain():
    x = sd.field(sd.f32, shape=3, needs_grad=True)
    y = sd.field(sd.f32, shape=3, needs_grad=True)
    c = sd.field(sd.f32, shape=(), needs_grad=True)
    loss = sd.field(sd.f32, (), needs_grad=True)
    x.from_numpy(np.array([0.2, 0.4, 0.6], np.float32))
    c[None] = 1.1

    @sd.kernel
    def half():
        for i in x:
            y[i] = sd.sin(x[i]) * c[None]

    @sd.kernel
    def other_half():
        for i in x:
            x[i] = y[i] + 0.1

    @sd.kernel
    def compute_loss():
        for i in x:
            loss[None] += x[i]

    return x, y, c, loss, half, other_half, compute_loss


def test_outside_a_tape_seed_and_call_grad():
    sd.init(arch=sd.cpu)
    x, y, c, loss, half, other_half, _ = _scalar_chain()
    xs = x.to_numpy().astype(np.float64)
    r = sd.ad.checkpointed(lambda t: (half(), other_half()), state=[x], steps=5, snapshots=2)
    x.grad.fill(1.0)
    r.grad()
    cv = 1.1  # reference: d sum(x_5) / d x_0 by the chain rule, x_{t+1} = sin(x_t) c + 0.1
    traj = [xs]
    for _ in range(5):
        traj.append(np.sin(traj[-1]) * cv + 0.1)
    g = np.ones(3)
    for t in range(4, -1, -1):
        g = g * np.cos(traj[t]) * cv
    np.testing.assert_allclose(x.grad.to_numpy(), g, rtol=1e-5)
    with pytest.raises(SpiradAutodiffError, match="already ran its reverse pass"):
        r.grad()


def test_custom_gradient_step_and_grad_check():
    """A grad_replaced function inside a step: its gradient runs at its place in each reversed
    step, seeing the values it left. And Tape(grad_check=...) re-runs the region."""
    sd.init(arch=sd.cpu)
    x, y, c, loss, half, other_half, compute_loss = _scalar_chain()

    @sd.ad.grad_replaced
    def first():
        half()

    @sd.ad.grad_for(first)
    def first_grad():
        half.grad()

    def step():
        first()
        other_half()

    with sd.ad.Tape(loss=loss, grad_check=[c]):
        sd.ad.checkpointed(step, state=[x], steps=6, snapshots=2)
        compute_loss()
    gc, gx = c.grad[None], x.grad.to_numpy()
    xs, cv = np.array([0.2, 0.4, 0.6]), 1.1
    traj = [xs]
    for _ in range(6):
        traj.append(np.sin(traj[-1]) * cv + 0.1)
    g, dc = np.ones(3), 0.0
    for t in range(5, -1, -1):
        dc += np.sum(g * np.sin(traj[t]))
        g = g * np.cos(traj[t]) * cv
    np.testing.assert_allclose(gx, g, rtol=1e-5)
    assert gc == pytest.approx(dc, rel=1e-5)


def test_random_numbers_are_redrawn_the_same():
    """A step drawing sd.random() into a field: recomputed steps must draw the same numbers
    (the launch counter is part of every snapshot)."""
    n = 6

    def run(k):
        sd.init(arch=sd.cpu)
        x = sd.field(sd.f32, shape=4, needs_grad=True)
        y = sd.field(sd.f32, shape=4, needs_grad=True)
        noise = sd.field(sd.f32, shape=4)
        loss = sd.field(sd.f32, (), needs_grad=True)
        x.from_numpy(np.array([0.1, 0.2, 0.3, 0.4], np.float32))

        @sd.kernel
        def draw():
            for i in noise:
                noise[i] = sd.random()

        @sd.kernel
        def push():
            for i in x:
                y[i] = sd.sin(x[i]) * (1.0 + noise[i])

        @sd.kernel
        def commit():
            for i in x:
                x[i] = y[i]

        @sd.kernel
        def compute_loss():
            for i in x:
                loss[None] += x[i]

        if k is None:  # the numbers drawn, and d loss / d x0 = prod over t of cos(x_t)(1 + r_t)
            xs, g = x.to_numpy().astype(np.float64), np.ones(4)
            for _ in range(n):
                draw()
                r = noise.to_numpy().astype(np.float64)
                g *= np.cos(xs) * (1 + r)
                xs = np.sin(xs) * (1 + r)
                push()
                commit()
            return g
        with sd.ad.Tape(loss=loss):
            r = sd.ad.checkpointed(lambda: (draw(), push(), commit()), state=[x], steps=n,
                                   snapshots=k)
            compute_loss()
        assert r.stats.snapshot_bytes == 4 * 4 + 4  # x and the launch counter
        return x.grad.to_numpy()

    want = run(None)
    for k in (1, 3):
        np.testing.assert_allclose(run(k), want, rtol=1e-5)


# -- misuse -------------------------------------------------------------------------------------
def test_undeclared_carried_state_is_refused_at_the_read():
    sd.init(arch=sd.cpu)
    x = sd.field(sd.f32, shape=4, needs_grad=True)
    v = sd.field(sd.f32, shape=4, needs_grad=True)

    @sd.kernel
    def advance():
        for i in x:
            v[i] = v[i] * 0.9 + 0.1 * x[i]
            x[i] = x[i] + 0.1 * v[i]

    with pytest.raises(SpiradAutodiffError) as e:
        with sd.ad.Tape():
            sd.ad.checkpointed(advance, state=[x], steps=4, snapshots=2)
    msg = str(e.value)
    assert "'v'" in msg and "v[i] = v[i] * 0.9" in msg and "^" in msg and "state=[...]" in msg
    assert "step 1" in msg
    from spirad.recording.tape import Tape
    assert Tape.active is None
    sd.ad.checkpointed(advance, state=[x, v], steps=4, snapshots=2).grad()  # declared: fine


def test_scratch_written_before_read_is_not_state_but_an_accumulator_is():
    sd.init(arch=sd.cpu)
    x = sd.field(sd.f32, shape=4, needs_grad=True)
    acc = sd.field(sd.f32, shape=(), needs_grad=True)

    @sd.kernel
    def accumulate():
        for i in x:
            acc[None] += x[i]

    with pytest.raises(SpiradAutodiffError, match="acc"):
        sd.ad.checkpointed(accumulate, state=[x], steps=3, snapshots=2)
    sd.init(arch=sd.cpu)
    x = sd.field(sd.f32, shape=4, needs_grad=True)
    acc = sd.field(sd.f32, shape=(), needs_grad=True, name="acc")
    x.from_numpy(np.ones(4, np.float32))

    @sd.kernel
    def accumulate2():
        for i in x:
            acc[None] += x[i] * x[i]

    with sd.ad.Tape(loss=acc):
        r = sd.ad.checkpointed(accumulate2, state=[x, acc], steps=3, snapshots=2)
    assert acc[None] == 12.0 and r.stats.max_held <= 2
    np.testing.assert_array_equal(x.grad.to_numpy(), np.full(4, 6.0))


def test_argument_errors():
    sd.init(arch=sd.cpu)
    x = sd.field(sd.f32, shape=4, needs_grad=True)

    @sd.kernel
    def k():
        for i in x:
            x[i] = x[i] * 2.0

    with pytest.raises(SpiradValueError, match="snapshots must be at least 1"):
        sd.ad.checkpointed(k, state=[x], steps=4, snapshots=0)
    with pytest.raises(SpiradValueError, match="steps must be at least 0"):
        sd.ad.checkpointed(k, state=[x], steps=-1, snapshots=2)
    with pytest.raises(SpiradTypeError, match="steps must be an int"):
        sd.ad.checkpointed(k, state=[x], steps=2.0, snapshots=2)
    with pytest.raises(SpiradTypeError, match="fields or ndarrays"):
        sd.ad.checkpointed(k, state=[x, np.zeros(3)], steps=2, snapshots=2)
    with pytest.raises(SpiradTypeError, match="non-empty list"):
        sd.ad.checkpointed(k, state=[], steps=2, snapshots=2)
    with pytest.raises(SpiradValueError, match="listed twice"):
        sd.ad.checkpointed(k, state=[x, x], steps=2, snapshots=2)
    with pytest.raises(SpiradTypeError, match="step must be a function"):
        sd.ad.checkpointed(None, state=[x], steps=2, snapshots=2)
    with pytest.raises(SpiradTypeError, match="the step index or nothing"):
        sd.ad.checkpointed(lambda a, b: None, state=[x], steps=2, snapshots=2)

    def nested(t):
        sd.ad.checkpointed(k, state=[x], steps=2, snapshots=2)

    with pytest.raises(SpiradAutodiffError, match="cannot be nested"):
        sd.ad.checkpointed(nested, state=[x], steps=2, snapshots=2)
    r = sd.ad.checkpointed(k, state=[x], steps=2, snapshots=2)
    sd.init(arch=sd.cpu)
    with pytest.raises(SpiradValueError, match="previous sd.init"):
        r.grad()


def test_ndarray_state_and_zero_steps():
    sd.init(arch=sd.cpu)
    a = sd.ndarray(sd.f32, 5, needs_grad=True)
    a.from_numpy(np.arange(5, dtype=np.float32))

    @sd.kernel
    def double(q: sd.types.ndarray()):
        for i in q:
            q[i] = q[i] * 2.0

    r = sd.ad.checkpointed(lambda: double(a), state=[a], steps=4, snapshots=2)
    np.testing.assert_array_equal(a.to_numpy(), np.arange(5) * 16.0)
    a.grad.fill(1.0)
    r.grad()
    np.testing.assert_array_equal(a.grad.to_numpy(), np.full(5, 16.0))
    np.testing.assert_array_equal(a.to_numpy(), np.arange(5) * 16.0)
    r0 = sd.ad.checkpointed(lambda: double(a), state=[a], steps=0, snapshots=2)
    r0.grad()
    assert r0.stats.forward_steps == 0


def test_regions_in_two_threads_equal_serial():
    """Each thread's Tape records its own region (Tape.active is per thread); results equal the
    serial ones."""
    import threading
    sd.init(arch=sd.cpu)
    chains = [_scalar_chain() for _ in range(2)]

    def run(t):
        x, y, c, loss, half, other_half, compute_loss = chains[t]
        x.from_numpy(np.array([0.2, 0.4, 0.6], np.float32) + t)
        with sd.ad.Tape(loss=loss, clear_gradients=False):
            sd.ad.checkpointed(lambda: (half(), other_half()), state=[x], steps=20, snapshots=3)
            compute_loss()
        return loss[None], c.grad[None], x.grad.to_numpy()

    serial = []
    for t in range(2):
        chains[t][2].grad.fill(0)
        chains[t][0].grad.fill(0)
        serial.append(run(t))
    out = [None, None]
    for t in range(2):
        chains[t][2].grad.fill(0)
        chains[t][0].grad.fill(0)
    threads = [threading.Thread(target=lambda t=t: out.__setitem__(t, run(t))) for t in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for a, b in zip(serial, out):
        assert a[0] == b[0] and a[1] == b[1]
        np.testing.assert_array_equal(a[2], b[2])


def test_kernels_and_methods_as_the_step():
    """The step may be a kernel (taking the step index or nothing) or a data_oriented method."""
    sd.init(arch=sd.cpu)

    @sd.data_oriented
    class Sim:
        def __init__(self):
            self.x = sd.field(sd.f32, shape=3, needs_grad=True)

        @sd.kernel
        def grow(self):
            for i in self.x:
                self.x[i] = self.x[i] * 1.5

    sim = Sim()
    sim.x.fill(1.0)
    r = sd.ad.checkpointed(sim.grow, state=[sim.x], steps=3, snapshots=2)
    sim.x.grad.fill(1.0)
    r.grad()
    np.testing.assert_allclose(sim.x.grad.to_numpy(), np.full(3, 1.5 ** 3))

    @sd.kernel
    def shift(t: sd.i32):
        for i in sim.x:
            sim.x[i] = sim.x[i] + t

    sim.x.fill(0.0)
    sd.ad.checkpointed(shift, state=[sim.x], steps=4, snapshots=2)
    np.testing.assert_array_equal(sim.x.to_numpy(), np.full(3, 0 + 1 + 2 + 3.0))
