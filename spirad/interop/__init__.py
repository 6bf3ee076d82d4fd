"""spirad inside a Python workflow: numpy / torch arrays as kernel arguments and DLPack
(`arrays`), kernels as torch.autograd Functions (`autograd`, imports torch when used)."""
