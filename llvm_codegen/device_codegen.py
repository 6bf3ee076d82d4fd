"""LLVM IR of a GPU target -> device code: PTX (+ a cubin from `ptxas`) or an AMDGPU code object.

    code = build(llvm_ir, target, symbols)   # DeviceCode(target, ptx / hsaco, cubin); cached

Steps (`llvm_codegen.target` says what each target needs):

    NVPTX   parse -> link libdevice.10.bc -> internalize everything but the kernels -> O3 with the
            NVPTX TargetMachine (its pipeline runs NVVMReflect, which folds libdevice's
            `__nvvm_reflect` queries) -> PTX -> `ptxas -arch=sm_XX` (an assembly error is a
            `DeviceBuildError`; the cubin is kept for a device of that exact arch)
    AMDGPU  parse -> link ocml.bc + ockl.bc and the `__oclc_*` control constants that ocml reads
            (set here: no finite-only / unsafe math / denormal flushing, correctly rounded
            sqrt, the target's wavefront size, ISA and code-object ABI version) ->
            internalize -> O3 with the AMDGPU TargetMachine -> ELF object ->
            `ld.lld -shared --no-undefined` -> HSA code object

Every result is stored in the `DeviceCache` (`device_libs`) under the hash of the IR text, the
target and the tools' identities, so a kernel that compiles again (another test, another
process) costs one file read. Only `llvm_codegen` and the standard library are used: no IR.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
import threading
from dataclasses import dataclass

import llvmlite.binding as llvm

from . import device_libs
from .target import Target

_lock = threading.Lock()
_machines: dict = {}
_cache = None
_initialized = False
CACHE_VERSION = "spirad-device-1"


class DeviceBuildError(RuntimeError):
    """Device code failed to build (LLVM, ptxas or ld.lld rejected it): a compiler bug."""


@dataclass(frozen=True)
class DeviceCode:
    target: str          # Target.name
    kind: str            # 'ptx' | 'hsaco'
    image: bytes         # PTX text (NUL-terminated for cuModuleLoadData) or the code object
    cubin: bytes = b""   # NVPTX: ptxas' output for target.cpu
    symbols: tuple = ()


def device_cache() -> device_libs.DeviceCache:
    global _cache
    if _cache is None:
        _cache = device_libs.DeviceCache()
    return _cache


def _init():
    global _initialized
    if not _initialized:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _initialized = True


def target_machine(target: Target):
    with _lock:
        tm = _machines.get(target.name)
        if tm is None:
            _init()
            t = llvm.Target.from_triple(target.triple)
            tm = _machines[target.name] = t.create_target_machine(cpu=target.cpu, opt=3,
                                                                  reloc="pic", codemodel="default")
        return tm



def data_layout(target: Target) -> str:
    """The target's data layout string (from its TargetMachine)."""
    return str(target_machine(target).target_data)


_pieces: dict = {}
_defined: dict = {}
LIB_PREFIXES = ("__nv_", "__ocml_", "__ockl_")


def _defined_names(path: str) -> frozenset:
    """Names of the functions the library at `path` defines (parsed once per process)."""
    with _lock:
        names = _defined.get(path)
    if names is None:
        with open(path, "rb") as f:
            lib = llvm.parse_bitcode(f.read())
        names = frozenset(fn.name for fn in lib.functions if not fn.is_declaration)
        with _lock:
            _defined[path] = names
    return names


def _piece(path: str, target: Target, name: str):
    """The device library at `path` cut down to function `name` and what it calls (the rest
    internalized and dropped by GlobalDCE), as a fresh module. Cut once per function and target
    and kept as bitcode, in memory and in the device cache, so a program links and optimizes a
    few functions, not all of libdevice; pieces that share a helper each carry an internal copy."""
    key = (path, target.name, name)
    with _lock:
        bc = _pieces.get(key)
    disk = device_cache().key(CACHE_VERSION, "piece", device_libs.file_identity(path),
                              target.name, name, llvm.llvm_version_info)
    if bc is None:
        bc = device_cache().get(disk)
    if bc is None:
        with open(path, "rb") as f:
            lib = llvm.parse_bitcode(f.read())
        lib.triple = target.triple
        lib.data_layout = data_layout(target)
        for fn in lib.functions:
            if not fn.is_declaration:  # the kept one external: ocml's are linkonce (discardable)
                fn.linkage = "external" if fn.name == name else "internal"
        for g in lib.global_variables:
            if not g.is_declaration:
                g.linkage = "internal"
        mpm = llvm.create_new_module_pass_manager()
        mpm.add_global_dead_code_eliminate_pass()
        mpm.run(lib, llvm.create_pass_builder(target_machine(target),
                                              llvm.create_pipeline_tuning_options(speed_level=0)))
        bc = lib.as_bitcode()
        device_cache().put(disk, bc)
    with _lock:
        _pieces[key] = bc
    return llvm.parse_bitcode(bc)


def _link_libraries(mod, target: Target, libs):
    """Link the library pieces of every device-library function `mod` calls, until none is left
    undefined (an ocml piece may call ockl)."""
    linked = set()
    while True:
        needed = sorted(f.name for f in mod.functions if f.is_declaration
                        and f.name.startswith(LIB_PREFIXES) and f.name not in linked)
        if not needed:
            return
        for name in needed:
            linked.add(name)
            for path in libs:
                if name in _defined_names(path):
                    mod.link_in(_piece(path, target, name))
                    break


def _oclc_constants(target: Target) -> str:
    gfx = target.cpu[3:]
    wave64 = 1 if gfx.startswith("9") else 0  # gfx9 (CDNA): wave64; gfx10+/gfx11 (RDNA): wave32
    isa = int(gfx[:-2]) * 1000 + int(gfx[-2], 16) * 10 + int(gfx[-1], 16) if len(gfx) == 3 else \
        int(gfx[:2]) * 1000 + int(gfx[2], 16) * 10 + int(gfx[3], 16)
    consts = {"__oclc_finite_only_opt": ("i8", 0), "__oclc_unsafe_math_opt": ("i8", 0),
              "__oclc_daz_opt": ("i8", 0), "__oclc_correctly_rounded_sqrt32": ("i8", 1),
              "__oclc_wavefrontsize64": ("i8", wave64), "__oclc_ISA_version": ("i32", isa),
              "__oclc_ABI_version": ("i32", 500)}
    lines = [f'target triple = "{target.triple}"']
    lines += [f"@{k} = addrspace(4) constant {t} {v}" for k, (t, v) in consts.items()]
    return "\n".join(lines) + "\n"


def _tool_ids(target: Target) -> tuple:
    if target.arch == "nvptx":
        return (device_libs.file_identity(device_libs.find_libdevice()),
                device_libs.file_identity(device_libs.find_ptxas()), llvm.llvm_version_info)
    d = device_libs.find_rocm_bitcode()
    return (device_libs.file_identity(os.path.join(d, "ocml.bc")),
            device_libs.file_identity(os.path.join(d, "ockl.bc")),
            device_libs.file_identity(device_libs.find_lld()), llvm.llvm_version_info)


def optimized_module(llvm_ir: str, target: Target, symbols):
    """Parse, link the device library, internalize all but `symbols`, O3. Returns the module."""
    tm = target_machine(target)
    mod = llvm.parse_assembly(llvm_ir)
    mod.triple = target.triple
    mod.data_layout = str(tm.target_data)
    if target.arch == "nvptx":
        libs = [device_libs.find_libdevice()]
    else:
        d = device_libs.find_rocm_bitcode()
        libs = [os.path.join(d, "ocml.bc"), os.path.join(d, "ockl.bc")]
    needs_lib = any(f.is_declaration and f.name.startswith(LIB_PREFIXES) for f in mod.functions)
    if needs_lib:
        _link_libraries(mod, target, libs)
        if target.arch == "amdgpu":
            consts = llvm.parse_assembly(_oclc_constants(target))
            consts.data_layout = mod.data_layout
            mod.link_in(consts)
    keep = set(symbols)
    for f in mod.functions:
        if not f.is_declaration and f.name not in keep:
            f.linkage = "internal"
    for g in mod.global_variables:
        if not g.is_declaration:
            g.linkage = "internal"
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod


def _run(cmd, what):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise DeviceBuildError(f"{what} failed ({' '.join(cmd)}):\n{r.stderr.strip()}")


def _assemble_ptx(ptx: bytes, sm: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="spirad-ptx-") as d:
        src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "wb") as f:
            f.write(ptx)
        _run([device_libs.find_ptxas(), f"-arch={sm}", "-o", out, src], "ptxas")
        with open(out, "rb") as f:
            return f.read()


def _link_hsaco(obj: bytes) -> bytes:
    with tempfile.TemporaryDirectory(prefix="spirad-amdgpu-") as d:
        src, out = os.path.join(d, "k.o"), os.path.join(d, "k.hsaco")
        with open(src, "wb") as f:
            f.write(obj)
        _run([device_libs.find_lld(), "-shared", "--no-undefined", "-o", out, src], "ld.lld")
        with open(out, "rb") as f:
            return f.read()


def build(llvm_ir: str, target: Target, symbols, require_assembly: bool = True) -> DeviceCode:
    """The device code of one program for `target` (cached by content). NVPTX: without
    `require_assembly` a missing `ptxas` only leaves `cubin` empty (the driver JIT-compiles the
    PTX)."""
    return build_many([(llvm_ir, target, symbols)], require_assembly)[0]


def build_many(items, require_assembly: bool = True) -> list:
    """`build` for several (llvm_ir, target, symbols): the LLVM steps one after another (LLVM's
    context is shared), the external assemblers / linkers concurrently."""
    from concurrent.futures import ThreadPoolExecutor
    cache = device_cache()
    out, todo = [], []
    for llvm_ir, target, symbols in items:
        symbols = tuple(symbols)
        if target.arch == "nvptx" and not require_assembly:
            try:
                device_libs.find_ptxas()
            except device_libs.ToolMissing:
                out.append(_ptx_only(llvm_ir, target, symbols))
                continue
        key = cache.key(CACHE_VERSION, target, symbols, _tool_ids(target), llvm_ir)
        blob = cache.get(key)
        if blob is not None:
            out.append(_unpack(target, blob, symbols))
            continue
        try:
            mod = optimized_module(llvm_ir, target, symbols)
            tm = target_machine(target)
            image = tm.emit_assembly(mod).encode() if target.arch == "nvptx" else \
                tm.emit_object(mod)
        except RuntimeError as e:
            if isinstance(e, (DeviceBuildError, device_libs.ToolMissing)):
                raise
            raise DeviceBuildError(f"LLVM rejected the {target.name} module: {e}") from e
        todo.append((len(out), key, target, symbols, image))
        out.append(None)

    def finish(job):
        i, key, target, symbols, image = job
        if target.arch == "nvptx":
            code = DeviceCode(target.name, "ptx", image + b"\0", _assemble_ptx(image, target.cpu),
                              symbols)
        else:
            code = DeviceCode(target.name, "hsaco", _link_hsaco(image), b"", symbols)
        cache.put(key, _pack(code))
        return i, code
    if len(todo) > 1:
        with ThreadPoolExecutor(len(todo)) as pool:
            done = list(pool.map(finish, todo))
    else:
        done = [finish(j) for j in todo]
    for i, code in done:
        out[i] = code
    return out


def _ptx_only(llvm_ir, target, symbols) -> DeviceCode:
    mod = optimized_module(llvm_ir, target, symbols)
    return DeviceCode(target.name, "ptx", target_machine(target).emit_assembly(mod).encode() + b"\0",
                      b"", symbols)


def _pack(code: DeviceCode) -> bytes:
    head = f"{code.kind}\n{len(code.image)}\n".encode()
    return head + code.image + code.cubin


def _unpack(target: Target, blob: bytes, symbols) -> DeviceCode:
    kind, n, rest = blob.split(b"\n", 2)
    n = int(n)
    return DeviceCode(target.name, kind.decode(), rest[:n], rest[n:], symbols)
