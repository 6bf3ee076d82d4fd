"""numpy arrays and torch tensors as kernel arguments; DLPack in and out of `sd.ndarray`.

Why: users keep their data in numpy / PyTorch and expect to pass it to a kernel as it is (as in
Taichi), without writing `from_numpy` / `to_numpy` around every launch.

A `types.ndarray()` parameter accepts, besides an `sd.ndarray`, any C-contiguous, writeable
numpy array or object with `__dlpack__` on the CPU (a torch CPU tensor) whose dtype is one of
float32 / float64 / int32 / int64 / uint32. The kernel sees it through an *alias*: an `Ndarray`
over the caller's memory where the backend computes in host memory (`BackendBase.host_storage`:
the CPU, the interpreter; the kernel writes straight into the caller's array), or over a device
buffer of the same size that is filled before every launch and copied back after a launch that
may write it (GPU backends). Aliases are kept per kernel and argument position while the caller
passes the same array, so the launch plan is reused (`launch.same_args`) and a numpy argument
costs about what an `sd.ndarray` does. Each launch counts as a host write of the alias (its
generation is bumped): the caller may have changed the data, and adstack sizes read from it must
be evaluated again.

GPU arrays of other libraries (a torch CUDA / ROCm tensor, CuPy, Numba: anything with
`__cuda_array_interface__` or `__dlpack__` on a GPU) are used in place on the backend of the
same device (CUDA: both protocols; AMDGPU: DLPack's ROCm device): the alias is an `Ndarray` over
the producer's memory (`BackendBase.foreign_storage`), nothing is copied. Stream ordering, per
launch: a `__cuda_array_interface__` names the producer's stream, which the launch waits for
(an event, no host wait) and which then waits for the launch; a DLPack producer is asked for its
capsule again with our stream (`__dlpack__(stream=...)`), so it orders our stream after its
work. Our stream is a blocking stream, so work on the legacy default stream (PyTorch's unless
told otherwise) is ordered with it both ways anyway. An array on a GPU this backend does not
compute on is an error naming the device.

Out of `sd.ndarray`: `spirad.data.dlpack_export`.

A numpy array has no `.grad`: `kernel.grad` treats it as a constant. A torch tensor that
requires grad is differentiable as Taichi has it: the launch allocates `tensor.grad`
(`torch.zeros_like`) when it is None and binds it as the argument's gradient, so `kernel.grad`
accumulates into it. For gradients through torch.autograd, see `spirad.interop.autograd`.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from kernel_ir import dtypes as T
from kernel_ir.errors import SpiradArgumentValueError, SpiradTypeError, SpiradValueError
from llvm_codegen.device_runtime import dlpack as DL

from ..runtime import guard as _guard
from ..runtime import state as _state
from ..data.ndarray import Ndarray
from ..tracebacks import warn_user
from ..data.dlpack_export import DL_TO_NP as _DL_TO_NP

_NP_TO_DTYPE = {np.dtype(np.float32): T.f32, np.dtype(np.float64): T.f64,
                np.dtype(np.int32): T.i32, np.dtype(np.int64): T.i64, np.dtype(np.uint32): T.u32}
_ACCEPTED = "float32, float64, int32, int64 or uint32"


_GPU_DEVICES = {DL.CUDA: "CUDA", DL.ROCM: "ROCm", DL.CUDA_MANAGED: "CUDA managed"}


def _detached(obj):
    """A tensor that requires grad read through `detach()` (same memory)."""
    if getattr(obj, "requires_grad", False) and hasattr(obj, "detach"):
        return obj.detach()
    return obj


class DeviceArray:
    """Another library's GPU array as a backend binds it: device address, numpy dtype, shape,
    the `flags` / `strides` that `element_type` checks, and how to keep it ordered and alive.

    `kind` 'cai' (`__cuda_array_interface__`: `stream` is the producer's, or None; `owner` the
    object) or 'dlpack' (`owner` the consumed capsule's `DL.Imported`)."""

    def __init__(self, kind, ptr, dtype, shape, strides, read_only, stream, owner, where):
        self.kind, self.ptr, self.dtype, self.shape = kind, int(ptr), np.dtype(dtype), tuple(shape)
        self.ndim = len(self.shape)
        self.strides = strides
        self.stream, self.owner, self.where = stream, owner, where
        contiguous = strides is None or _c_contiguous(self.shape, strides, self.dtype.itemsize)
        self.flags = SimpleNamespace(c_contiguous=contiguous, writeable=not read_only)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def same_memory(self, other: "DeviceArray") -> bool:
        return (self.ptr, self.dtype, self.shape) == (other.ptr, other.dtype, other.shape)


def _c_contiguous(shape, strides, itemsize) -> bool:
    want = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != want:
            return False
        want *= n
    return True


def _cuda_array_interface(obj):
    try:
        return obj.__cuda_array_interface__
    except AttributeError:
        return None
    except Exception:  # noqa: BLE001 - e.g. torch refuses a CPU tensor with a RuntimeError
        return None


def _dlpack_device(obj):
    f = getattr(obj, "__dlpack_device__", None)
    if f is None or not hasattr(obj, "__dlpack__"):
        return None
    try:
        dev = f()
        return int(dev[0]), int(dev[1])
    except Exception:  # noqa: BLE001 - not a usable exporter: host_array says why
        return None


def _from_cai(cai, obj) -> DeviceArray:
    if cai.get("mask") is not None:
        raise SpiradTypeError("a masked __cuda_array_interface__ array cannot be a kernel argument")
    ptr, read_only = cai["data"]
    dtype = np.dtype(cai["typestr"])
    shape = tuple(int(s) for s in cai["shape"])
    strides = cai.get("strides")
    strides = None if strides is None else tuple(int(s) for s in strides)
    stream = cai.get("stream") if int(cai.get("version", 0)) >= 3 else None
    if stream is None:
        stream = torch_stream(obj)
    return DeviceArray("cai", ptr or 0, dtype, shape, strides, bool(read_only), stream, obj,
                       "CUDA")  # the object owns the memory: kept alive with the alias


def _from_dlpack(obj, stream, where) -> DeviceArray:
    try:
        try:
            cap = obj.__dlpack__(stream=stream, max_version=(1, 0))
        except TypeError:
            cap = obj.__dlpack__(stream=stream)
        imp = DL.consume(cap)
    except (BufferError, RuntimeError, TypeError, ValueError) as e:
        raise SpiradTypeError(f"cannot take {type(obj).__name__} through DLPack ({e})") from None
    code = imp.dtype[:2]
    if imp.dtype[2] != 1 or code not in _DL_TO_NP:
        imp.release()
        raise SpiradTypeError(f"{type(obj).__name__} has DLPack dtype {imp.dtype}; kernels take "
                              f"{_ACCEPTED}")
    dtype = np.dtype(_DL_TO_NP[code])
    strides = None if imp.strides is None else tuple(s * dtype.itemsize for s in imp.strides)
    return DeviceArray("dlpack", imp.ptr, dtype, imp.shape, strides, imp.read_only,
                       torch_stream(obj), imp, where)


def torch_stream(obj):
    """The handle of PyTorch's current stream on `obj`'s device when `obj` is a torch GPU
    tensor, else None. torch's `__cuda_array_interface__` is version 2, which names no stream,
    so a launch would be ordered only with the legacy default stream (the backend's stream is
    a blocking stream); under `with torch.cuda.stream(s):` torch's work runs on `s`. Read at
    every launch (the current stream may change between launches): the launch waits for it
    (`order_after`, an event) and it waits for the launch (`order_before`), as for a CUDA array
    interface v3 producer stream (docs/gpu.md)."""
    if type(obj).__module__.split(".")[0] != "torch" or not getattr(obj, "is_cuda", False):
        return None
    import sys
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    return int(torch.cuda.current_stream(obj.device).cuda_stream)


def device_array(obj):
    """A `DeviceArray` for another library's GPU array that the current backend computes on in
    place, None for anything else (host arrays: `host_array`). A GPU array on another device
    than this backend's is an error that says what to do."""
    obj = _detached(obj)
    cai = _cuda_array_interface(obj)
    dev = None if cai is not None else _dlpack_device(obj)
    if cai is None and (dev is None or dev[0] not in _GPU_DEVICES):
        return None
    be = _state.backend()
    mine = be.dlpack_device()
    where = "CUDA" if cai is not None else _GPU_DEVICES[dev[0]]
    ok = (mine[0] == DL.CUDA) if cai is not None else (
        mine[0] == dev[0] or {mine[0], dev[0]} == {DL.CUDA, DL.CUDA_MANAGED})
    if not ok:
        raise SpiradTypeError(f"{type(obj).__name__} lives in {where} device memory, which "
                              f"arch={be.name} cannot compute on in place; move it to the CPU "
                              f"(tensor.cpu()) or use the arch of its device")
    return _from_cai(cai, obj) if cai is not None else _from_dlpack(obj, be.dlpack_stream(), where)


def host_array(obj) -> np.ndarray | None:
    """A numpy view of `obj` when it is a numpy array or a host DLPack exporter (a torch CPU
    tensor), else None. A tensor that requires grad is read through `detach()` (same memory)."""
    if type(obj) is np.ndarray:
        return obj
    if isinstance(obj, np.ndarray):
        return np.asarray(obj)
    if not hasattr(obj, "__dlpack__"):
        return None
    obj = _detached(obj)
    try:
        return np.from_dlpack(obj)
    except (BufferError, RuntimeError, TypeError, ValueError) as e:
        where = getattr(obj, "device", None)
        raise SpiradTypeError(f"cannot read {type(obj).__name__} (device {where}) as host memory "
                              f"through DLPack ({e}); move it to the CPU first "
                              f"(tensor.cpu())") from None


def element_type(arr: np.ndarray, ann_dtype, what: str, element_dim=None, name=None,
                 ndim=None, kind="array"):
    """(spirad dtype, element shape, ndarray shape) of host array `arr` for a parameter annotated
    with element type `ann_dtype` (None: any scalar type; `element_dim` 1 / 2: its last axes
    are a vector / matrix element); a clear error when it does not fit. A kernel argument passes
    its parameter's `name` and `ndim` and the array's `kind` ('numpy array', 'torch tensor'):
    its errors are then Taichi's (`spirad.data.arg_texts`)."""
    from ..data.field import resolve_dtype
    dt = _NP_TO_DTYPE.get(arr.dtype)
    if dt is None:
        hint = " (bools: pass arr.astype(np.uint32))" if arr.dtype == np.bool_ else ""
        raise SpiradTypeError(f"{what} has dtype {arr.dtype}; kernels take {_ACCEPTED}{hint}")
    comp = ()
    if ann_dtype is not None:
        want, comp = resolve_dtype(ann_dtype)
        if name is not None:
            from ..data.arg_texts import external_mismatch
            bad = external_mismatch(what, name, arr, want, comp, ndim)
            if bad is not None:
                raise bad
        if want != dt and not (comp and name is not None):  # a vector / matrix element of a
            # host array passed to a kernel has the array's scalar type (Taichi's: numpy /
            # torch arguments are not checked against the annotation's)
            msg = (f"{what} must have dtype {want.np.name} ({ann_dtype}), got {arr.dtype}; "
                   f"convert it (arr.astype(...)) or change the annotation")
            if name is None:
                raise SpiradTypeError(msg)
            raise SpiradArgumentValueError(f"Invalid value for argument {name} - required array "
                                           f"has dtype={want}, array with dtype={dt} is "
                                           f"provided: {msg}")
        if tuple(arr.shape[arr.ndim - len(comp):]) != tuple(comp) or arr.ndim < len(comp):
            raise SpiradTypeError(f"{what} of shape {arr.shape} must end with the element shape "
                                  f"{comp} of {ann_dtype}")
    elif element_dim:
        if arr.ndim <= element_dim:
            raise SpiradTypeError(f"{what} of shape {arr.shape} has no room for element_dim="
                                  f"{element_dim} element axes")
        comp = tuple(arr.shape[arr.ndim - element_dim:])
    fortran = kind == "numpy array" and arr.flags.f_contiguous  # copied (KernelArrays._entry)
    if not arr.flags.c_contiguous and not fortran:  # Taichi's ValueError and text
        taichi = "Non contiguous tensors are not supported" if kind == "torch tensor" else \
            "Non contiguous numpy arrays are not supported"
        raise SpiradArgumentValueError(f"{taichi}: {what} is not C-contiguous (strides "
                                       f"{arr.strides}); pass np.ascontiguousarray(x) or "
                                       f"tensor.contiguous()")
    if not arr.flags.writeable:
        raise SpiradTypeError(f"{what} is read-only; pass a writeable copy (arr.copy())")
    return dt, comp, tuple(arr.shape[:arr.ndim - len(comp)])


def alias(arr, dt, comp, shape):
    """An `Ndarray` for host array `arr`: over its memory on host-memory backends, else over a
    new device buffer (the caller copies); for a `DeviceArray`, over the producer's memory.
    Returns (ndarray, zero_copy)."""
    from ..data.field import check_elements
    check_elements(shape, comp, "an array argument", ndarray=True)
    be = _state.backend()
    if isinstance(arr, DeviceArray):
        storage = be.foreign_storage(arr.ptr, arr.nbytes, arr)
        if storage is None:
            raise RuntimeError(f"backend {be.name} reports a GPU device but binds no foreign memory")
        be.order_after(arr.stream)
        return Ndarray._alias(storage, dt, shape, comp_shape=comp), True
    raw = arr.reshape(-1).view(np.uint8) if arr.size else np.zeros(8, np.uint8)
    storage = be.host_storage(raw)
    zero_copy = storage is not None
    if not zero_copy:
        storage = be.allocate_ndarray(raw.nbytes)
    nd = Ndarray._alias(storage, dt, shape, comp_shape=comp)  # `raw` views (keeps alive) `arr`
    return nd, zero_copy


def _kind(obj) -> str:
    """How a message names a user's array: 'numpy array', 'torch tensor', else its type."""
    mod = type(obj).__module__.split(".")[0]
    return {"numpy": "numpy array", "torch": "torch tensor"}.get(mod, type(obj).__name__)


class _Entry:
    """One argument position's alias while the caller keeps passing the same array
    (`grad_arr`: the host memory of a torch tensor's `.grad`, bound as the alias's gradient)."""
    __slots__ = ("obj", "arr", "nd", "zero_copy", "ptr", "epoch", "grad_arr", "leaf", "device",
                 "narrow")

    def __init__(self, obj, arr, nd, zero_copy, ptr, epoch, grad_arr=None, narrow=False):
        self.obj, self.arr, self.nd, self.zero_copy, self.ptr, self.epoch = \
            obj, arr, nd, zero_copy, ptr, epoch
        self.narrow = narrow  # a float64 host array computed in float32 (a device without f64)
        # a torch tensor (requires_grad may change later: checked at every launch)
        self.leaf = obj if hasattr(obj, "requires_grad") else None
        self.grad_arr = grad_arr
        self.device = isinstance(arr, DeviceArray)  # GPU memory (asked at every launch)


def _tensor_ptr(obj):
    """What an alias depends on besides the object, read at every call: a numpy array's shape,
    strides and dtype (changed in place by `a.shape = ...`); a tensor's data, shape, strides
    and dtype (resized, re-pointed or transposed in place: `t.t_()`) and its `.grad`."""
    if type(obj) is np.ndarray:
        return (obj.shape, obj.strides, obj.dtype)
    if not hasattr(obj, "data_ptr"):
        return None
    g = getattr(obj, "grad", None)
    return (obj.data_ptr(), tuple(obj.shape), tuple(obj.stride()), obj.dtype,
            None if g is None else g.data_ptr())


def _refresh(dev: DeviceArray, obj) -> bool:
    """Per launch, for a GPU array used before: read its interface again (the memory may have
    moved) and order our stream after the producer's work since; False when it moved."""
    be = _state.backend()
    obj = _detached(obj)
    if dev.kind == "cai":
        now = _from_cai(_cuda_array_interface(obj), obj)
        if not now.same_memory(dev):
            return False
        dev.stream = now.stream
        be.order_after(now.stream)
        return True
    now = _from_dlpack(obj, be.dlpack_stream(), dev.where)  # the producer orders our stream
    dev.stream = now.stream  # torch: its current stream now (`torch_stream`)
    same = now.same_memory(dev)
    now.owner.release()  # the first capsule's import keeps the memory alive
    return same


def _stale_grad(t) -> bool:
    """No `.grad` yet, or one left from before the tensor was re-pointed (`t.data = ...`)."""
    g = t.grad
    return g is None or g.shape != t.shape or g.dtype != t.dtype


def _wants_grad(obj, ann) -> bool:
    """A torch tensor that requires grad gets a gradient unless annotated needs_grad=False."""
    return bool(getattr(obj, "requires_grad", False)) and ann.needs_grad is not False and \
        hasattr(obj, "data_ptr")


def _overlap(x, y) -> bool:
    """Do two arguments' arrays share memory (host arrays, or GPU arrays' address ranges)?"""
    if isinstance(x, DeviceArray) or isinstance(y, DeviceArray):
        if not (isinstance(x, DeviceArray) and isinstance(y, DeviceArray)):
            return False  # host and device memory
        return bool(x.nbytes and y.nbytes and x.ptr < y.ptr + y.nbytes and y.ptr < x.ptr + x.nbytes)
    return bool(x.size and y.size and np.shares_memory(x, y, max_work=1 << 16))


class KernelArrays:
    """Per kernel: converts foreign arguments of `types.ndarray()` parameters to aliases."""

    def __init__(self):
        self.entries: dict = {}
        self.leaves = False  # some argument was a torch tensor that requires grad
        self.narrowed: set = set()  # argument positions warned of a float64 -> float32 copy

    @staticmethod
    def _warn_narrow(kernel, obj, index: int) -> None:
        """Once per kernel and argument: a float64 host array runs in float32 on this device."""
        be = _state.backend()
        why = "Metal has no 64-bit floats" if be.name == "metal" else \
            f"the {be.name} device has no 64-bit floats"
        name = kernel._annotations()[index][0]
        warn_user(f"argument '{name}' of {kernel.fn.__name__}: the float64 {_kind(obj)} is "
                  f"converted to float32 when it is copied to {be.name} device memory ({why}), "
                  f"and back to float64 after launches that write it: its values lose precision "
                  f"(float32 keeps about 7 significant digits); pass a float32 array to compute "
                  f"in float32 explicitly")

    def check_writes(self, kernel, args, writes) -> None:
        """Refuse a launch that writes a torch leaf tensor requiring grad while grad mode is on:
        torch refuses in-place changes to those (the gradient of what was computed from the
        old values would be wrong); under `torch.no_grad()` (optimizer updates) it is allowed."""
        if not self.leaves:
            return
        self.leaves = False
        for w in writes:
            if w[0] != "ndarray" or w[2] is not False or w[1] >= len(args):
                continue
            obj = args[w[1]]
            if getattr(obj, "requires_grad", False) and getattr(obj, "is_leaf", False):
                import torch
                from ..recording.tape import Tape
                # under a Tape spirad differentiates the launch itself (Taichi's torch loss)
                if torch.is_grad_enabled() and Tape.active is None:
                    name = kernel._annotations()[w[1]][0]
                    err = kernel._arg_error(
                        SpiradValueError,
                        f"argument '{name}' of {kernel.fn.__name__} is a torch leaf tensor that "
                        f"requires grad, and the kernel writes it: torch refuses in-place changes "
                        f"to such tensors (\"a leaf Variable that requires grad is being used in "
                        f"an in-place operation\"). Write the results into another tensor, or "
                        f"update it under `with torch.no_grad():` as optimizers do", w[1])
                    from .. import options
                    if options.get("SPIRAD_TORCH_LEAF_WRITES") != "warn":
                        raise err
                    import warnings
                    from kernel_ir.errors import SpiradWarning
                    warnings.warn(f"{err}\n(SPIRAD_TORCH_LEAF_WRITES=warn: written as Taichi "
                                  f"does)", SpiradWarning, stacklevel=4)

    def convert(self, kernel, args, indices) -> tuple:
        """(`args` with every foreign array at `indices` replaced by its alias, the (index,
        entry) pairs a copying backend must copy back after the launch, or None)."""
        out = copies = None
        epoch = _state.state.epoch
        entries = self.entries
        changed = False
        for i in indices:
            obj = args[i]
            if isinstance(obj, Ndarray):
                continue
            first = None
            for j in indices:  # a loop, not next(<generator>): this runs at every launch
                if j >= i:
                    break
                if args[j] is obj:
                    first = j
                    break
            if first is not None:  # the same array again: the same alias (one buffer)
                out[i] = out[first]
                entries.pop(i, None)
                continue
            e = entries.get(i)
            if type(obj) is not np.ndarray and getattr(obj, "requires_grad", False) \
                    and hasattr(obj, "data_ptr") and _stale_grad(obj):
                import torch  # as Taichi does: a tensor that requires grad gets a gradient
                obj.grad = torch.zeros_like(obj)
            if e is None or e.obj is not obj or e.epoch != epoch or e.ptr != _tensor_ptr(obj) \
                    or (e.device and not _refresh(e.arr, obj)):
                e = entries[i] = self._entry(kernel, obj, i, epoch)
                changed = True
                if e.narrow and i not in self.narrowed:
                    self.narrowed.add(i)
                    self._warn_narrow(kernel, obj, i)
            e.nd.generation += 1  # the caller may have changed the data since the last launch
            if e.leaf is not None:
                self.leaves = True
            if not e.zero_copy:
                if e.arr.size:  # an empty array: nothing to copy (wgpu refuses empty writes)
                    # (bool arrays: as the 0/1 words u1 is stored in; float64 arrays on a
                    # device without f64: as float32)
                    a = e.arr
                    _state.backend().write(e.nd._storage(), a if a.dtype != np.bool_ and not
                                           e.narrow else a.astype(np.float32 if e.narrow else
                                                                  np.uint32))
                if e.grad_arr is not None and e.grad_arr.size:
                    _state.backend().write(e.nd.grad._storage(), e.grad_arr if not e.narrow
                                           else e.grad_arr.astype(np.float32))
                copies = (copies or []) + [(i, e)]
            elif e.device and e.arr.stream is not None:
                copies = (copies or []) + [(i, e)]  # the producer's stream follows the launch
            if out is None:
                out = list(args)
            out[i] = e.nd
        if changed:
            self._check_overlaps(kernel, args, indices)
        return (args if out is None else tuple(out)), copies

    def _check_overlaps(self, kernel, args, indices) -> None:
        """Different arrays over the same memory (views of one numpy array) cannot be told
        apart by the compiler: refused. (The same array twice is one buffer: `convert`.)"""
        arrs = [(i, self.entries[i].arr) for i in indices
                if i in self.entries and self.entries[i].obj is args[i]]
        for a in range(len(arrs)):
            for b in range(a + 1, len(arrs)):
                (i, x), (j, y) = arrs[a], arrs[b]
                if _overlap(x, y):
                    names = kernel._annotations()
                    raise kernel._arg_error(SpiradValueError, f"arguments '{names[i][0]}' and "
                                            f"'{names[j][0]}' of {kernel.fn.__name__} are "
                                            f"different arrays over the same memory (views of "
                                            f"one array); pass the array once per parameter, or "
                                            f"copies", j)

    @staticmethod
    def _entry(kernel, obj, index: int, epoch) -> _Entry:
        name, ann = kernel._annotations()[index]
        what = f"argument '{name}' of {kernel.fn.__name__}"
        try:
            arr = device_array(obj)
            if arr is None:
                arr = host_array(obj)
            if arr is None:
                raise SpiradTypeError(f"Invalid type for argument {name}, got {obj!r}: {what} "
                                      f"must be an sd.ndarray, a numpy array or a torch "
                                      f"tensor, got {type(obj).__name__}; fields go to "
                                      f"sd.template() parameters")
            if arr.dtype == np.bool_:  # a copy as u1 words, copied back after a write
                if not arr.flags.c_contiguous:
                    raise SpiradTypeError(f"{what} must be C-contiguous")
                dt, comp, shape = T.u1, (), tuple(arr.shape)
            else:
                dt, comp, shape = element_type(arr, ann.dtype, what, ann.element_dim, name,
                                               ann.ndim, _kind(obj))
            from ..data.field import resolve_dtype
            from_array = ann.dtype is None or (comp and dt != resolve_dtype(ann.dtype)[0])
            narrow = dt == T.f64 and from_array and not isinstance(arr, DeviceArray) \
                and not _state.backend().capabilities().get("f64", True)
            if ann.ndim is not None and ann.ndim != len(shape):  # Taichi's ValueError and text
                raise SpiradArgumentValueError(
                    f"Invalid value for argument {name} - required array has ndim={ann.ndim}, "
                    f"array with {arr.ndim} dimensions is provided: {what} must have "
                    f"{ann.ndim} dimension(s), got {len(shape)} (shape {shape})")
        except SpiradTypeError as err:
            raise kernel._arg_error(type(err), str(err), index) from None
        if dt == T.u1:
            nd, zero_copy = Ndarray(T.u1, shape), False
        elif not arr.flags.c_contiguous:  # a Fortran-ordered numpy array (Taichi's transposes):
            # a C-ordered buffer, copied in before each launch and back after one that writes it
            nd, zero_copy = Ndarray._alias(_state.backend().allocate_ndarray(max(arr.nbytes, 8)),
                                           dt, shape, comp_shape=comp), False
        elif narrow:  # no f64 on the device (Metal): an f32 copy, converted at each copy
            nd, zero_copy = Ndarray._alias(_state.backend().allocate_ndarray(max(arr.size * 4, 8)),
                                           T.f32, shape, comp_shape=comp), False
        else:
            nd, zero_copy = alias(arr, dt, comp, shape)
        grad_arr = None
        if _wants_grad(obj, ann) and dt.is_float:
            grad_arr = device_array(obj.grad) if isinstance(arr, DeviceArray) else \
                host_array(obj.grad)
            gdt, gcomp, gshape = element_type(grad_arr, ann.dtype, f"{what}.grad", ann.element_dim)
            if (gdt, gcomp, gshape) != (dt, comp, shape):
                raise kernel._arg_error(SpiradTypeError, f"{what}.grad must have the tensor's "
                                        f"dtype and shape", index)
            if narrow:
                nd.grad = Ndarray._alias(_state.backend().allocate_ndarray(max(arr.size * 4, 8)),
                                         T.f32, shape, comp_shape=comp)
            else:
                nd.grad = alias(grad_arr, dt, comp, shape)[0]
        if not arr.flags.c_contiguous:
            warn_user(f"{what}: the Fortran-ordered numpy array is copied to a C-ordered buffer "
                      f"before every launch and back after launches that write it; pass "
                      f"np.ascontiguousarray(x) to avoid the copies")
        elif not zero_copy:
            warn_user(f"{what}: the {_kind(obj)} is copied to "
                      f"{_state.backend().name} device memory before every launch and back "
                      f"after launches that write it; keep the data in an sd.ndarray (or "
                      f"sd.from_dlpack it once) to avoid the copies")
        return _Entry(obj, arr, nd, zero_copy, _tensor_ptr(obj), epoch, grad_arr, narrow)


def copy_out(entries, args, writes) -> None:
    """After a launch on a copying backend: copy every written foreign argument (and written
    gradient) back; order the producer's stream of a GPU argument after the launch."""
    written = {(w[1], w[2]) for w in writes if w[0] == "ndarray"}
    for index, e in entries:
        if isinstance(e.arr, DeviceArray):  # in place: the producer's stream follows the launch
            _state.backend().order_before(e.arr.stream)
            continue
        if (index, False) in written:
            e.arr[...] = e.nd._view()
        if e.grad_arr is not None and (index, True) in written:
            e.grad_arr[...] = e.nd.grad._view()


@_guard.locked
def from_dlpack(obj, dtype=None, needs_grad: bool = False) -> Ndarray:
    """`sd.from_dlpack`: an `sd.ndarray` for a DLPack exporter (numpy array, torch tensor) or
    any numpy array or `__cuda_array_interface__` array: sharing its memory on host-memory
    backends and, for GPU arrays, on the backend of their device; a copy of a host array on GPU
    backends. `dtype`: a vector / matrix element type whose shape ends the array's shape.
    `needs_grad`: give it a zeroed `.grad` (spirad's memory; `torch.from_dlpack(nd.grad)` reads
    it without a copy on the CPU and on CUDA / AMDGPU) so it can be differentiated
    (`kernel.grad`, `sd.ad.Tape`)."""
    arr = device_array(obj)
    if arr is None:
        arr = host_array(obj)
    if arr is None:
        raise SpiradTypeError(f"sd.from_dlpack takes an object with __dlpack__ (a numpy array, a "
                              f"torch tensor), got {type(obj).__name__}")
    dt, comp, shape = element_type(arr, dtype, "sd.from_dlpack's array")
    if dt == T.f64:
        from ..data.ndarray import _check_f64
        _check_f64(T.f64, "sd.from_dlpack: an ndarray")
    nd, zero_copy = alias(arr, dt, comp, shape)
    if not zero_copy:
        warn_user(f"sd.from_dlpack: the {_kind(obj)} was copied to "
                  f"{_state.backend().name} device memory (later changes to it are not seen); "
                  f"the CPU backend shares its memory")
    if not zero_copy and arr.size:
        _state.backend().write(nd._storage(), arr)
    if needs_grad:
        if not dt.is_float:
            raise SpiradTypeError(f"needs_grad=True requires a float dtype, got {dt}")
        nbytes = max(arr.nbytes, 8)
        nd.grad = Ndarray._alias(_state.backend().allocate_ndarray(nbytes), dt, shape, comp_shape=comp)
    return nd


__all__ = ["KernelArrays", "alias", "copy_out", "from_dlpack", "host_array", "device_array"]
