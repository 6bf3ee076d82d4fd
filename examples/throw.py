"""Learn how to throw: a differentiable projectile simulation with drag and bounces, optimised by
gradient descent so that every ball ends its flight on its target.

Each of `--balls` balls starts at the same point with a learnable launch velocity; the kernel
simulates `--steps` time steps (a loop with a run-time trip count, so reverse mode keeps the
loop-carried position and velocity on the adstack), with quadratic air drag and bounces on the
ground (an `if` in the loop), and adds the squared distance between the final position and the
ball's target to the loss. `kernel.grad` gives d loss / d velocity; Adam (in numpy) updates the
velocities for `--iters` iterations, with a tqdm progress bar. Writes a PNG with the loss curve
and the final trajectories (matplotlib, Agg), and prints the loss at a few iterations. Then
replays the final throws with `sd.GUI` (Taichi's GUI API): in a window with `--show` (where there
is a display), and as frames plus an animated GIF with `--video DIR` (`sd.tools.VideoManager`).

    python examples/throw.py                          # cpu, 300 iterations
    python examples/throw.py --arch vulkan --iters 500 --balls 32 --out throw.png
    python examples/throw.py --show --video throw_video   # watch it; DIR/video.gif
"""
import argparse
import os

import numpy as np

import spirad as sd

G, DRAG, RESTITUTION, FRICTION = 9.81, 0.05, 0.6, 0.9


@sd.kernel
def simulate(v0: sd.types.ndarray(ndim=2), target: sd.types.ndarray(ndim=1), steps: sd.i32,
             dt: sd.f32, traj: sd.types.ndarray(ndim=3), loss: sd.types.ndarray(ndim=1)):
    for b in range(v0.shape[0]):
        px, py = 0.0, 1.0
        vx, vy = v0[b, 0], v0[b, 1]
        traj[b, 0, 0] = px
        traj[b, 0, 1] = py
        for t in range(steps):              # run-time trip count: the adstack is on
            speed = sd.sqrt(vx * vx + vy * vy + 1e-6)
            vx = vx - DRAG * speed * vx * dt
            vy = vy - (G + DRAG * speed * vy) * dt
            px = px + vx * dt
            py = py + vy * dt
            if py < 0.0:                    # bounce: reflect, lose energy
                py = -py
                vy = -RESTITUTION * vy
                vx = FRICTION * vx
            traj[b, t + 1, 0] = px
            traj[b, t + 1, 1] = py
        dx = px - target[b]
        loss[0] += (dx * dx + py * py) / v0.shape[0]


class Adam:
    def __init__(self, shape, lr):
        self.m, self.v, self.t, self.lr = np.zeros(shape), np.zeros(shape), 0, lr

    def step(self, x, g, b1=0.9, b2=0.999, eps=1e-8):
        self.t += 1
        self.m = b1 * self.m + (1 - b1) * g
        self.v = b2 * self.v + (1 - b2) * g * g
        mh, vh = self.m / (1 - b1 ** self.t), self.v / (1 - b2 ** self.t)
        lr = self.lr / (1 + self.t / 50)  # decaying step: settles instead of jittering
        return x - lr * mh / (np.sqrt(vh) + eps)


def train(arch="cpu", iters=300, balls=16, steps=200, dt=0.01, lr=0.1, progress=True, seed=0):
    """Returns (losses per iteration, final trajectories (balls, steps + 1, 2), targets)."""
    sd.init(arch=arch)
    rng = np.random.default_rng(seed)
    targets = np.linspace(1.0, 4.0, balls).astype(np.float32) + rng.uniform(-0.1, 0.1, balls).astype(np.float32)
    v0 = sd.ndarray(sd.f32, (balls, 2), needs_grad=True)
    vel = np.tile(np.array([1.0, 2.0]), (balls, 1))
    traj = np.zeros((balls, steps + 1, 2), np.float32)
    loss = sd.ndarray(sd.f32, 1, needs_grad=True)
    opt = Adam(vel.shape, lr)
    losses = []
    bar = range(iters)
    if progress:
        from tqdm import tqdm
        bar = tqdm(bar, desc=f"throw [{arch}]", unit="it")
    for _ in bar:
        v0.from_numpy(vel.astype(np.float32))
        loss.fill(0.0)
        simulate(v0, targets, steps, dt, traj, loss)
        v0.grad.fill(0.0)
        loss.grad.fill(1.0)
        simulate.grad(v0, targets, steps, dt, traj, loss)
        losses.append(float(loss.to_numpy()[0]))
        vel = opt.step(vel, v0.grad.to_numpy().astype(np.float64))
        if progress:
            bar.set_postfix(loss=f"{losses[-1]:.2e}")
    v0.from_numpy(vel.astype(np.float32))
    loss.fill(0.0)
    simulate(v0, targets, steps, dt, traj, loss)
    losses.append(float(loss.to_numpy()[0]))
    return np.array(losses), traj.copy(), targets


def plot(losses, traj, targets, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    a.semilogy(losses)
    a.set_xlabel("iteration")
    a.set_ylabel("loss (mean squared miss, m²)")
    a.set_title("loss")
    colors = plt.cm.viridis(np.linspace(0, 1, len(targets)))
    for k in range(len(targets)):
        b.plot(traj[k, :, 0], traj[k, :, 1], color=colors[k], lw=1)
        b.plot([targets[k]], [0], "x", color=colors[k])
    b.axhline(0, color="k", lw=0.5)
    b.set_xlabel("x (m)")
    b.set_ylabel("y (m)")
    b.set_title("final throws (x: targets)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def animate(traj, targets, dt, show=False, video_dir=None, res=(640, 320), stride=4):
    """Replay the throws with sd.GUI: balls, their trails and the targets, frame by frame, in a
    window (`show`; until it is closed) and / or into `video_dir` (PNG frames, video.gif)."""
    balls, steps = traj.shape[0], traj.shape[1] - 1
    x0, x1 = -0.3, max(float(targets.max()), float(traj[:, :, 0].max())) + 0.3
    scale = 1.0 / (x1 - x0)                       # metres -> window units, same scale for y
    aspect = res[0] / res[1]

    def to_gui(p):                                # world (x, y) -> [0, 1]^2, ground at 0.1
        return np.stack([(p[..., 0] - x0) * scale, p[..., 1] * scale * aspect + 0.1], -1)

    colors = np.array([sd.rgb_to_hex((0.9 * k / max(1, balls - 1), 0.35, 0.9 - 0.8 * k / max(1, balls - 1)))
                       for k in range(balls)])
    marks = to_gui(np.stack([targets, np.zeros_like(targets)], -1))
    gui = sd.GUI("throw: final launches", res, background_color=0xFFFFFF, show_gui=show)
    video = sd.tools.VideoManager(video_dir, framerate=25, automatic_build=False) if video_dir else None
    while True:
        for t in list(range(0, steps + 1, stride)) + [steps]:
            gui.line((0, 0.1), (1, 0.1), radius=1, color=0x000000)               # the ground
            gui.triangles(marks + [-0.008, -0.03], marks + [0.008, -0.03], marks,
                          color=colors)                                          # targets
            if t > 0:                                                            # trails
                seg = to_gui(traj[:, :t + 1])
                gui.lines(seg[:, :-1].reshape(-1, 2), seg[:, 1:].reshape(-1, 2), radius=1,
                          color=np.repeat(colors, t))
            gui.circles(to_gui(traj[:, t]), radius=5, color=colors)              # the balls
            gui.text(f"t = {t * dt:.2f} s", (0.02, 0.97), font_size=18, color=0x202020)
            if video is not None:
                video.write_frame(gui.get_image())
            gui.show()
            if not gui.running:
                return
        if video is not None:
            video.make_video(gif=True, mp4=False)
            print(f"wrote {os.path.abspath(video.get_output_filename('.gif'))}")
            video = None
        if not gui.show_gui:                      # off screen: one pass is all there is
            return


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arch", default="cpu")
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--balls", type=int, default=16)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--out", default="throw.png", help="the PNG to write")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--show", action="store_true", help="replay the throws in a window (sd.GUI)")
    p.add_argument("--video", default=None, metavar="DIR",
                   help="write the replay's frames and an animated GIF (DIR/video.gif)")
    args = p.parse_args(argv)
    losses, traj, targets = train(args.arch, args.iters, args.balls, args.steps, lr=args.lr,
                                  progress=not args.no_progress)
    marks = sorted({0, len(losses) // 10, len(losses) // 3, len(losses) - 1})
    print("loss: " + ", ".join(f"iter {i}: {losses[i]:.3e}" for i in marks))
    plot(losses, traj, targets, args.out)
    print(f"wrote {os.path.abspath(args.out)}")
    if args.show or args.video:
        animate(traj, targets, dt=0.01, show=args.show, video_dir=args.video)
    return losses


if __name__ == "__main__":
    main()
