"""Stand-in for Taichi's `tests/test_utils.py`, written for spirad's harness
(scripts/taichi_tests.py): the `test(...)` decorator Taichi's tests use, and `approx`.

`test(arch=, exclude=, require=, **init_options)` parametrizes a test over the archs the harness
runs (environment variable SPIRAD_TAICHI_ARCHS, default "cpu,vulkan") that the test admits;
conftest.py's fixture calls `ti.init(arch, **init_options)` before it and skips it where a
required `ti.extension` is missing. `ti.gpu` in `arch=` stands for every GPU arch.
"""
import os

import platform

import pytest

import taichi as ti

GPU_ARCHS = ("vulkan", "metal", "cuda", "amdgpu")


def wanted_archs():
    return [a.strip() for a in os.environ.get("SPIRAD_TAICHI_ARCHS", "cpu,vulkan").split(",")
            if a.strip()]


def _as_list(x):
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _expand(archs):
    out = []
    for a in archs:
        out.extend(GPU_ARCHS if a == "gpu" else [a])
    return out


def test(arch=None, exclude=None, require=None, **options):
    archs = wanted_archs()
    if arch is not None:
        allowed = _expand(_as_list(arch))
        archs = [a for a in archs if a in allowed]
    excluded = set()
    for e in _as_list(exclude):
        if isinstance(e, (list, tuple)) and len(e) == 2:  # (arch, platform): on that system only
            if e[1] == platform.system():
                excluded.update(_expand([e[0]]))
            continue
        a = e[0] if isinstance(e, (list, tuple)) else e
        excluded.update(_expand([a]))
    archs = [a for a in archs if a not in excluded]
    required = _as_list(require)

    def deco(fn):
        fn.__ti_test__ = True
        if not archs:
            return pytest.mark.skip(reason="no wanted arch admitted by the test")(fn)
        params = [(a, dict(options, _require=required)) for a in archs]
        return pytest.mark.parametrize("req_arch,req_options", params,
                                       ids=[f"arch={a}" for a in archs])(fn)
    return deco


def get_rel_eps():
    return 1e-4 if ti.lang.impl.current_cfg().arch == "metal" else 1e-6


def approx(expected, **kwargs):
    if isinstance(expected, bool):
        class _Truth:
            def __eq__(self, other):
                return bool(expected) == bool(other)
        return _Truth()
    kwargs["rel"] = max(kwargs.get("rel", 1e-6), get_rel_eps())
    return pytest.approx(expected, **kwargs)


def allclose(x, y, **kwargs):
    return x == approx(y, **kwargs)


def torch_op(*, output_shapes=((1,),)):
    """Wrap kernel `f(*inputs, *outputs)` as a torch.autograd function (the helper Taichi's
    tests use): forward runs `f` into fresh float64 outputs; backward seeds the outputs'
    `.grad`, zeroes the inputs' and runs `f.grad`, so the kernel's adjoint fills them."""
    import torch

    def wrap(f):
        class Op(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *inputs):
                outs = tuple(torch.zeros(s, dtype=torch.double, requires_grad=True)
                             for s in output_shapes)
                f(*inputs, *outs)
                ctx.save_for_backward(*inputs, *outs)
                return outs

            @staticmethod
            def backward(ctx, *grads):
                saved = ctx.saved_tensors
                ins, outs = saved[:len(saved) - len(grads)], saved[len(saved) - len(grads):]
                for x in ins:
                    if x.grad is not None:
                        x.grad.zero_()
                for o, g in zip(outs, grads):
                    o.grad = g
                f.grad(*ins, *outs)
                return tuple(x.grad for x in ins)

        return lambda *args: Op.apply(*args)
    return wrap


def make_temp_file(*args, **kwargs):
    """A fresh temporary file's name (Taichi's helper: test_image_io writes images there)."""
    import tempfile
    fd, name = tempfile.mkstemp(*args, **kwargs)
    os.close(fd)
    return name
