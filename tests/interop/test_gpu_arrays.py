"""GPU arrays of other libraries in and out of kernels on CUDA / AMDGPU, zero-copy, with stream
ordering: `__cuda_array_interface__` (CUDA) and DLPack (kDLCUDA / kDLROCM).

Torch here is the CPU build, so "another library" is a stand-in: an object exposing the protocol
over memory that the emulated device addresses (host memory, as the emulation's device memory
is), with a producer stream of its own. Sharing is checked through that memory; ordering through
the emulated runtime's record of the events our stream waited for / signalled
(`EmuRuntime.stream_events`). The device check script (`scripts/cuda_device_check.py`) does the
same with a ctypes-made CUDA allocation on a GPU."""
import gc

import numpy as np
import pytest

import spirad as sd
from llvm_codegen.device_runtime import dlpack as DL
from tests.support.archs import EVERY_ARCH, exactly, test_archs

GPU = ("cuda", "amdgpu")
DEVICE = {"cuda": DL.CUDA, "amdgpu": DL.ROCM}
PRODUCER_STREAM = 0xABC0


@sd.kernel
def scale(a: sd.f32, x: sd.types.ndarray(), y: sd.types.ndarray()):
    for i in x:
        y[i] = a * x[i]


class CudaArray:
    """A CUDA array of another library (CuPy-like): `__cuda_array_interface__` v3."""

    def __init__(self, arr, stream=PRODUCER_STREAM):
        self.arr, self.stream = arr, stream

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.arr.shape, "typestr": self.arr.dtype.str, "version": 3,
                "data": (self.arr.ctypes.data, False), "strides": None, "stream": self.stream}


class DLPackGpuArray:
    """A GPU tensor of another library (torch-like): `__dlpack__` on `device`; records the
    stream each consumer passed."""

    def __init__(self, arr, device):
        self.arr, self.device, self.streams = arr, device, []

    def __dlpack_device__(self):
        return (self.device, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        code = {np.dtype(np.float32): (DL.FLOAT, 32), np.dtype(np.int32): (DL.INT, 32)}
        return DL.export(self.arr.ctypes.data, self.arr.shape, code[self.arr.dtype],
                         (self.device, 0), owner=self.arr,
                         versioned=max_version is not None and max_version >= (1, 0))


def _rt():
    return sd.runtime.state.backend().rt


@test_archs(archs=exactly("cuda", "amdgpu"))
def test_cuda_array_interface_in_place_and_ordered(arch):
    x = CudaArray(np.arange(8, dtype=np.float32))
    y = CudaArray(np.zeros(8, np.float32))
    if arch != "cuda":  # CUDA memory on an AMD GPU: a clear error, no silent copy
        with pytest.raises(sd.SpiradTypeError, match="CUDA device memory"):
            scale(2.0, x, y)
        return
    rt = _rt()
    rt.stream_events.clear()
    scale(2.0, x, y)
    entry = scale._arrays.entries[2]
    assert entry.nd._storage().ptr == y.arr.ctypes.data  # the kernel binds the producer's memory
    # our stream waited for the producer's (each argument), the producer's then waits for us
    assert rt.stream_events[:2] == [("wait", PRODUCER_STREAM)] * 2
    assert ("signal", PRODUCER_STREAM) in rt.stream_events[2:]
    sd.sync()
    np.testing.assert_array_equal(y.arr, 2 * np.arange(8))
    y.stream = None  # a producer with nothing in flight: nothing to wait for
    rt.stream_events.clear()
    scale(3.0, x, y)
    sd.sync()
    assert ("wait", None) not in rt.stream_events
    np.testing.assert_array_equal(y.arr, 3 * np.arange(8))
    y.arr = np.zeros(8, np.float32)  # the memory moved: a new alias, not the stale one
    scale(1.0, x, y)
    sd.sync()
    np.testing.assert_array_equal(y.arr, np.arange(8))


@test_archs(archs=exactly("cuda"))
def test_from_cuda_array_interface_keeps_the_owner_alive(arch):
    import weakref
    src = CudaArray(np.arange(4, dtype=np.float32))
    alive = weakref.ref(src)
    a = sd.from_dlpack(src)
    del src
    gc.collect()
    assert alive() is not None          # the alias holds the object that owns the memory
    np.testing.assert_array_equal(a.to_numpy(), np.arange(4))
    del a
    sd.sync()                           # released once queued work that used it has run
    gc.collect()
    assert alive() is None


@test_archs(archs=exactly("cuda", "amdgpu"))
def test_dlpack_gpu_tensor_in_place(arch):
    dev = DEVICE[arch]
    x = DLPackGpuArray(np.arange(6, dtype=np.float32), dev)
    y = DLPackGpuArray(np.zeros(6, np.float32), dev)
    scale(2.0, x, y)
    scale(2.0, x, y)                      # the same tensors: asked again, with our stream
    sd.sync()
    np.testing.assert_array_equal(y.arr, 2 * np.arange(6))
    assert y.streams == [_rt().stream] * 2
    a = sd.from_dlpack(y)                 # sd.from_dlpack: an ndarray over the same memory
    assert a._storage().ptr == y.arr.ctypes.data
    a[1] = 40.0
    sd.sync()
    assert y.arr[1] == 40.0
    other = {"cuda": DL.ROCM, "amdgpu": DL.CUDA}[arch]
    with pytest.raises(sd.SpiradTypeError, match="device memory"):
        scale(1.0, DLPackGpuArray(np.zeros(6, np.float32), other), y)


@test_archs(archs=exactly("cuda", "amdgpu"))
def test_sd_ndarray_out_through_dlpack_and_cai(arch):
    a = sd.ndarray(sd.f32, 5)
    scale(1.5, np.arange(5, dtype=np.float32), a)  # queued: not run yet
    rt = _rt()
    assert rt.pending()
    cap = a.__dlpack__(stream=0x77, max_version=(1, 0))
    assert ("signal", 0x77) in rt.stream_events        # the consumer's stream follows ours
    t = DL.consume(cap)
    assert t.device == (DEVICE[arch], 0) and t.shape == (5,) and t.ptr == a._storage().ptr
    import ctypes
    got = np.ctypeslib.as_array((ctypes.c_float * 5).from_address(t.ptr))  # zero-copy
    np.testing.assert_array_equal(got, 1.5 * np.arange(5))
    assert t.address in DL.exported()
    del cap
    t.release()
    assert t.address not in DL.exported()  # the consumer released it
    if arch == "cuda":
        cai = a.__cuda_array_interface__
        assert cai["data"][0] == a._storage().ptr and cai["stream"] == rt.stream
        assert cai["typestr"] == "<f4" and cai["shape"] == (5,) and cai["version"] == 3
    else:
        assert not hasattr(a, "__cuda_array_interface__")


@test_archs(archs=EVERY_ARCH, exclude=GPU)
def test_gpu_array_on_a_host_backend_is_an_error(arch):
    y = np.zeros(4, np.float32)
    with pytest.raises(sd.SpiradTypeError, match="cannot compute on in place"):
        scale(1.0, CudaArray(np.zeros(4, np.float32)), y)
    assert not hasattr(sd.ndarray(sd.f32, 2), "__cuda_array_interface__")


class TorchCudaTensor(CudaArray):
    """A torch CUDA tensor as spirad sees one: `__cuda_array_interface__` version 2 (no
    stream: torch's own), `is_cuda`, `device`, its class in torch's module (`torch_stream`)."""

    is_cuda = True
    device = "cuda:0"

    def __init__(self, arr):
        super().__init__(arr, None)

    @property
    def __cuda_array_interface__(self):
        cai = dict(super().__cuda_array_interface__)
        del cai["stream"]
        cai["version"] = 2
        return cai


class TorchRocmTensor(DLPackGpuArray):
    """A torch ROCm tensor: DLPack kDLROCM (torch reports `is_cuda` on ROCm too)."""

    is_cuda = True
    device_name = "cuda:0"


TorchCudaTensor.__module__ = TorchRocmTensor.__module__ = "torch"


@test_archs(archs=exactly("cuda", "amdgpu"))
def test_torch_tensors_ordered_with_torchs_current_stream(arch, monkeypatch):
    """torch names no stream in its `__cuda_array_interface__` (version 2): the launch waits for
    torch's *current* stream (read at each launch: `with torch.cuda.stream(s):` changes it),
    and that stream waits for the launch. Torch here is the CPU build, so its current stream is
    a stand-in (`torch.cuda.current_stream` patched); the order of the calls is the emulated
    runtime's record, the launch included. Unverified on a GPU (docs/gpu.md)."""
    import types

    import torch
    current = types.SimpleNamespace(cuda_stream=0x70C0)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: current)
    rt = _rt()
    launch = rt.launch

    def recorded(*a, **kw):
        rt.stream_events.append(("launch",))
        return launch(*a, **kw)

    monkeypatch.setattr(rt, "launch", recorded)
    if arch == "cuda":
        x = TorchCudaTensor(np.arange(8, dtype=np.float32))
        y = TorchCudaTensor(np.zeros(8, np.float32))
    else:
        x = TorchRocmTensor(np.arange(8, dtype=np.float32), DL.ROCM)
        y = TorchRocmTensor(np.zeros(8, np.float32), DL.ROCM)
        monkeypatch.setattr(TorchRocmTensor, "device", DL.ROCM, raising=False)
    for stream, a in ((0x70C0, 2.0), (0x5EC0, 3.0)):  # another current stream, then
        current.cuda_stream = stream
        rt.stream_events.clear()
        scale(a, x, y)
        ev = rt.stream_events
        first = ev.index(("launch",))
        if arch == "cuda":  # the launch after torch's queued work: an event we wait for
            assert ("wait", stream) in ev[:first]
        else:  # DLPack: torch makes our stream wait when asked for the capsule with it
            assert y.streams[-1] == rt.stream
        assert ("signal", stream) in ev[first + 1:]  # torch's later work after the launch
        sd.sync()
        np.testing.assert_array_equal(y.arr, a * np.arange(8))
