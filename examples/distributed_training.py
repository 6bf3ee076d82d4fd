"""Data-parallel training with torch.distributed, where each rank runs spirad kernels.

When one machine (or one process) is not enough, scale the way PyTorch users already do: every
rank computes the model on its shard of the batch with a spirad kernel wrapped as a
torch.autograd.Function (`spirad.interop.autograd`), and `DistributedDataParallel` all-reduces
(averages) the gradients over the gloo backend. With equal shards the result is the one of a
single process on the whole batch, which `--world-size 1` computes.

    python examples/distributed_training.py                   # 2 processes on the CPU
    python examples/distributed_training.py --world-size 1    # the same training, one process
    python examples/distributed_training.py --arch vulkan --steps 50 --out w.npy

The model: y = sum_j w[j] * tanh(X[:, j] * s[j]) with parameters w and s, fitted to data made
from known parameters; the kernel loops over features with a run-time trip count.
"""
import argparse
import gc
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import spirad as sd
import spirad.interop.autograd as sdt


@sd.kernel
def predict(X: sd.types.ndarray(ndim=2), w: sd.types.ndarray(ndim=1), s: sd.types.ndarray(ndim=1),
            out: sd.types.ndarray(ndim=1)):
    for i in out:
        acc = 0.0
        for j in range(w.shape[0]):
            acc += w[j] * sd.tanh(X[i, j] * s[j])
        out[i] = acc


class Model(torch.nn.Module):
    def __init__(self, features):
        super().__init__()
        self.w = torch.nn.Parameter(torch.full((features,), 0.1, dtype=torch.float64))
        self.s = torch.nn.Parameter(torch.ones(features, dtype=torch.float64))
        self.predict = sdt.kernel_function(predict, outputs={"out": lambda X, **_: (X.shape[0],)})

    def forward(self, X):
        return self.predict(X, self.w, self.s)


def make_data(batch, features, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (batch, features))
    w_true, s_true = rng.uniform(-1, 1, features), rng.uniform(0.5, 1.5, features)
    y = (w_true * np.tanh(X * s_true)).sum(axis=1)
    return torch.from_numpy(X), torch.from_numpy(y)


def worker(rank, world, port, args):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    sd.init(arch=args.arch, default_fp=sd.f64)
    X, y = make_data(args.batch, args.features)
    shard = slice(rank * args.batch // world, (rank + 1) * args.batch // world)
    X, y = X[shard].contiguous(), y[shard].contiguous()
    model = torch.nn.parallel.DistributedDataParallel(Model(args.features))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    losses = []
    for _ in range(args.steps):
        opt.zero_grad()
        loss = torch.mean((model(X) - y) ** 2)
        loss.backward()            # spirad's adjoint, then DDP's all-reduce of the gradients
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)     # the mean loss over all ranks, for printing only
        losses.append(total.item() / world)
    if rank == 0:
        params = torch.cat([model.module.w, model.module.s]).detach().numpy()
        print(f"world size {world}: loss {losses[0]:.6f} -> {losses[-1]:.6f} in {args.steps} steps")
        if args.out:
            np.save(args.out, params)
    # DDP's reducer holds the process group: drop it while the interpreter is alive, then tear
    # gloo down once every rank is here. A group (or its worker threads) left to interpreter
    # finalization can abort the process ("terminate called without an active exception").
    del model, opt
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arch", default="cpu")
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--features", type=int, default=8)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--out", default="", help="save the trained parameters (.npy) here")
    args = p.parse_args(argv)
    if args.batch % args.world_size:
        p.error("--batch must be a multiple of --world-size (equal shards)")
    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(worker, args=(args.world_size, free_port(), args), nprocs=args.world_size, join=True)


if __name__ == "__main__":
    main()
