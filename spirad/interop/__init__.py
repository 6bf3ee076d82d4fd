"""spirad inside a Python workflow: numpy / torch arrays as kernel arguments and DLPack
(`arrays`), kernels as torch.autograd Functions (`autograd`) and torch custom ops for
torch.compile (`torch_op`, in `torch_library`), kernels as JAX functions (`jax`). The torch and
JAX modules import their framework when used, never when spirad is imported."""


def torch_op(kernel, outputs: dict, name: str | None = None):
    """`kernel` as a `torch.library` custom op usable under `torch.compile(fullgraph=True)`, its
    backward the adjoint kernel (`spirad.interop.torch_library`; imports torch)."""
    from .torch_library import torch_op as make
    return make(kernel, outputs, name)
