"""Where the GPU tool chain comes from, and the cache that makes repeated assembly free.

    find_ptxas()        `ptxas`: the configured path, the pip package nvidia-cuda-nvcc-cu12
                        (site-packages/nvidia/cuda_nvcc/bin), $CUDA_HOME/bin, PATH
    find_libdevice()    `libdevice.10.bc`: the configured path, the same pip package
                        (nvidia/cuda_nvcc/nvvm/libdevice), $CUDA_HOME/nvvm/libdevice
    find_rocm_bitcode() directory with ocml.bc / ockl.bc: the configured path, Debian's
                        rocm-device-libs (/usr/lib/<multiarch>/amdgcn/bitcode), $ROCM_PATH
    find_lld()          `ld.lld` that links LLVM 22 code objects: the configured path, ld.lld-22
                        (Debian lld-22), /usr/lib/llvm-22/bin/ld.lld, $ROCM_PATH/llvm/bin/ld.lld

`configure(...)` sets the overrides (spirad's GPU backends pass SPIRAD_PTXAS, SPIRAD_LIBDEVICE,
SPIRAD_ROCM_BITCODE, SPIRAD_LLD and SPIRAD_CACHE_DIR from `spirad.options`; this module reads
no SPIRAD_* variable). Each finder returns a path or raises `ToolMissing` with the install hint.
`DeviceCache` stores outputs under a content address (sha256 of everything that determines
them: the input text, the target, the tool's identity): ~/.cache/spirad/device or
<cache_dir>/device.
"""
from __future__ import annotations

import glob
import hashlib
import os
import shutil
import site
import sysconfig


class ToolMissing(RuntimeError):
    """A GPU tool or device library is not installed; the message says how to install it."""


_PATHS: dict = {}  # `configure`: tool -> path given by the caller


def configure(ptxas=None, libdevice=None, rocm_bitcode=None, lld=None, cache_dir=None) -> None:
    """Overrides of the tools' locations and of the cache root (None: search / default)."""
    _PATHS.clear()
    _PATHS.update(ptxas=ptxas, libdevice=libdevice, rocm_bitcode=rocm_bitcode, lld=lld,
                  cache_dir=cache_dir)


def _site_dirs():
    dirs = [sysconfig.get_paths().get("purelib"), sysconfig.get_paths().get("platlib")]
    try:
        dirs += site.getsitepackages() + [site.getusersitepackages()]
    except AttributeError:  # virtualenvs with an old site module
        pass
    seen = []
    for d in dirs:
        if d and d not in seen and os.path.isdir(d):
            seen.append(d)
    return seen


def _first(candidates):
    for c in candidates:
        if c and os.path.exists(c):
            return os.path.abspath(c)  # not realpath: ld.lld-22 links to the generic `lld`
    return None


_CUDA_HINT = "pip install 'spirad[cuda]' (the nvidia-cuda-nvcc-cu12 wheel)"
_ROCM_HINT = "apt-get install rocm-device-libs lld-22 (or a ROCm install with $ROCM_PATH)"


def find_ptxas() -> str:
    cands = [_PATHS.get("ptxas")]
    cands += [os.path.join(d, "nvidia", "cuda_nvcc", "bin", "ptxas") for d in _site_dirs()]
    if os.environ.get("CUDA_HOME"):
        cands.append(os.path.join(os.environ["CUDA_HOME"], "bin", "ptxas"))
    cands.append(shutil.which("ptxas"))
    p = _first(cands)
    if p is None:
        raise ToolMissing(f"ptxas not found: {_CUDA_HINT}, or set SPIRAD_PTXAS")
    return p


def find_libdevice() -> str:
    cands = [_PATHS.get("libdevice")]
    cands += [os.path.join(d, "nvidia", "cuda_nvcc", "nvvm", "libdevice", "libdevice.10.bc")
              for d in _site_dirs()]
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda", "/usr/lib/cuda"):
        if home:
            cands.append(os.path.join(home, "nvvm", "libdevice", "libdevice.10.bc"))
    p = _first(cands)
    if p is None:
        raise ToolMissing(f"libdevice.10.bc not found: {_CUDA_HINT}, or set SPIRAD_LIBDEVICE")
    return p


def find_rocm_bitcode() -> str:
    cands = [_PATHS.get("rocm_bitcode")]
    cands += sorted(glob.glob("/usr/lib/*/amdgcn/bitcode"))
    for home in (os.environ.get("ROCM_PATH"), "/opt/rocm"):
        if home:
            cands += [os.path.join(home, "amdgcn", "bitcode"),
                      os.path.join(home, "lib", "llvm", "lib", "clang", "*", "lib", "amdgcn",
                                   "bitcode")]
    for c in cands:
        for d in (sorted(glob.glob(c)) if c and "*" in c else [c]):
            if d and os.path.exists(os.path.join(d, "ocml.bc")):
                return os.path.realpath(d)
    raise ToolMissing(f"the ROCm device libraries (ocml.bc) were not found: {_ROCM_HINT}, or set "
                      f"SPIRAD_ROCM_BITCODE")


def find_lld() -> str:
    cands = [_PATHS.get("lld"), shutil.which("ld.lld-22"), "/usr/lib/llvm-22/bin/ld.lld"]
    if os.environ.get("ROCM_PATH"):
        cands.append(os.path.join(os.environ["ROCM_PATH"], "llvm", "bin", "ld.lld"))
    p = _first(cands)
    if p is None:
        raise ToolMissing(f"ld.lld (LLVM 22) not found: {_ROCM_HINT}, or set SPIRAD_LLD")
    return p


def file_identity(path: str) -> str:
    """What identifies a tool or library version for the cache: path, size and mtime."""
    st = os.stat(path)
    return f"{path}:{st.st_size}:{int(st.st_mtime)}"


def cache_dir() -> str:
    root = _PATHS.get("cache_dir") or os.path.join(os.path.expanduser("~"), ".cache",
                                                              "spirad")
    return os.path.join(root, "device")


class DeviceCache:
    """Content-addressed files: `get(key)` -> bytes or None, `put(key, data)`. Keys are hashed;
    writes go through a temporary file and a rename, so concurrent test workers never see a
    partial file. An in-process dict answers repeats without touching the disk."""

    def __init__(self, root: str | None = None):
        self.root = root or cache_dir()
        self._mem: dict[str, bytes] = {}
        self.hits = self.misses = 0

    @staticmethod
    def key(*parts) -> str:
        h = hashlib.sha256()
        for p in parts:
            h.update(p if isinstance(p, bytes) else str(p).encode())
            h.update(b"\0")
        return h.hexdigest()

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key[:2], key)

    def get(self, key: str):
        v = self._mem.get(key)
        if v is None:
            try:
                with open(self._path(key), "rb") as f:
                    v = self._mem[key] = f.read()
            except OSError:
                self.misses += 1
                return None
        self.hits += 1
        return v

    def put(self, key: str, data: bytes) -> None:
        self._mem[key] = data
        path = self._path(key)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only cache directory: the in-process cache still works
