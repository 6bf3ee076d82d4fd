"""Whether a light environment loop's SIMD lanes read memory as vectors: the second rule of
`work_estimate.worth_lanes`, for loops below `LANES_WORK`.

In lanes (`Task.lanes`, 32 on AVX-512) an access whose last index is the loop's own index plus
a uniform value and whose other indices are uniform (`spmd.consecutive`: Genesis' `[i, i_b]`
fields, the environment last) is one vector load or store for all lanes; one with a varying
index elsewhere is a gather or scatter, lane by lane, and a loop whose trips vary over the lanes
runs to the longest lane's with the rest masked. Measured loop by loop on Genesis' box, fields,
`n_envs` 256, one thread (docs/performance.md, glane2): 43 environment loops, all below
`LANES_WORK`, each in lanes alone; of those then tried against the serial task, the mass
matrix's factor and solve paid (`forward_dynamics.py:1098`, `:1827`: per block, triangular
loops over dofs with uniform trips, 31-38 % of their accesses consecutive, 2-3 % gathered;
`kernel_substep_dynamics` 50 -> 38 us), forward kinematics per tree, the contact forces, the
contact clamping and two constraint loops did not, and the loops that lost most in lanes
gathered more (the solver's constraint loops, `solver.py:3603` / `:5499` / `:5369`: 21-43 %
gathered, trips read per environment; `forward_dynamics.py:1772`: 25-36 % gathered).
The rule: the lanes' analysis accepts the body (`spmd.analyze`), no loop of it has varying
trips (`Control.loops`) and no varying top-level `continue`, its consecutive accesses are at
least `STREAM_RATIO` times its gathered ones (both weighed as `iteration_work`, trips
included), and its estimated work is at least `STREAM_WORK` (lighter loops gain less than the
range task costs, which also splits the kernel's serial task around it).
"""
from __future__ import annotations

from kernel_ir.nodes import Task
from kernel_ir.ops import GLOBAL_ACCESS, Op

STREAM_WORK = 1 << 12  # estimated body work (`iteration_work`) of a loop worth its lanes
STREAM_RATIO = 4       # consecutive accesses per gathered one, at least


def streams(loop, iteration_work) -> bool:
    """Whether the provably independent loop `loop` (kernel IR: a RANGE_FOR made parallel by
    passes/independent_loops) runs in lanes with vector accesses (the module's rule);
    `iteration_work`: `work_estimate.iteration_work`."""
    from llvm_codegen import spmd
    body = loop.blocks[0]
    if iteration_work(body) < STREAM_WORK:
        return False
    task = Task(kind="range", body=body, index=loop.arg.index, begin=loop.srcs[0],
                end=loop.srcs[1], serialised=True, lanes=True)
    an = spmd.analyze(task)
    if not an.ok or an.ctl.loops or an.ctl.top:
        return False

    def indices(n):
        return n.srcs if n.op == Op.GLOBAL_LOAD else n.srcs[:-1]

    def consecutive(n):
        return n.op in GLOBAL_ACCESS and spmd.consecutive(an.affine, an.varying, indices(n))

    def gathered(n):
        return n.op in GLOBAL_ACCESS and not consecutive(n) and \
            any(s in an.varying for s in indices(n))

    vec = iteration_work(body, lambda n: 1 if consecutive(n) else 0)
    gat = iteration_work(body, lambda n: 1 if gathered(n) else 0)
    return vec > 0 and vec >= STREAM_RATIO * gat
