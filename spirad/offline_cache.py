"""The offline compile cache: compiled programs on disk, so a new process loads instead of compiling.

Why: most of a kernel's first call is code generation (LLVM's O3 and machine code, SPIR-V
emission and validation); a training script run again, or each rank of a torch.distributed job,
would pay it again for every kernel.

What an entry holds: the program's task list (the IR after all passes — for adjoint programs the
reverse-mode program, whose adstack sizing and sizer bytecode are derived from it) and the
backend's compiled form (`BackendBase.export_program`: LLVM object code, SPIR-V modules).

The key (sha256) covers everything the program depends on: the kernel's source and the sources
of the funcs it calls, the values it reads from globals and closures (`frontend.deps`: fields
by identity and layout, numbers by value), the argument signature, the program kind (forward,
adjoint, forward mode), the arch and the backend's `cache_features` (device, CPU features,
compile flags), the init options that change code, and the build of spirad (its version and the
size and time of every source file, so an edited compiler never loads stale code). A kernel whose
dependencies cannot be described (`deps.describe` is None), or that returns values or prints, is
not cached. When a hit is loaded, every field its IR names must exist with the same dtype and
shape (else it is a miss).

Entries live in `$SPIRAD_CACHE_DIR`, else `$XDG_CACHE_HOME/spirad`, else `~/.cache/spirad`; one
file per program: magic, sha256 of the payload, payload (pickle of a dict holding its own key and
build). A file that is truncated, corrupt, from another build or for another key is ignored and
rewritten by the compile that follows. Writes go to a temporary file renamed into place, so
concurrent processes never read half an entry. `init(offline_cache=False)` or the environment
variable SPIRAD_OFFLINE_CACHE=0 turns the cache off (tests that patch the compiler do).
"""
from __future__ import annotations

import hashlib
import os
import pickle
import tempfile

from ._version import __version__ as VERSION  # noqa: E402 - spirad's version
MAGIC = b"SPIRAD-OFFLINE-CACHE-1\n"
_DIGEST = 32
_PACKAGES = ("spirad", "kernel_ir", "sizer", "spirv_codegen", "llvm_codegen", "gfx_runtime", "shaders")
_build = None
stats = {"hits": 0, "misses": 0, "stores": 0, "rejected": 0}  # this process (tests, benchmarks)


def cache_dir() -> str:
    d = os.environ.get("SPIRAD_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "spirad")


def enabled(state) -> bool:
    """On unless `init(offline_cache=False)` or SPIRAD_OFFLINE_CACHE=0."""
    return bool(state.options.get("offline_cache", True)) and \
        os.environ.get("SPIRAD_OFFLINE_CACHE", "1") != "0"


def build_id() -> str:
    """spirad's version and a digest of its source files' sizes and modification times."""
    global _build
    if _build is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        h = hashlib.sha256(VERSION.encode())
        for pkg in _PACKAGES:
            stack = [os.path.join(root, pkg)]
            while stack:
                entries = sorted(os.scandir(stack.pop()), key=lambda e: e.name)
                for e in entries:
                    if e.is_dir() and e.name != "__pycache__":
                        stack.append(e.path)
                    elif e.name.endswith((".py", ".json")):
                        st = e.stat()
                        h.update(f"{e.path[len(root):]}:{st.st_size}:{st.st_mtime_ns};".encode())
        _build = h.hexdigest()
    return _build


def _options(state) -> tuple:
    """The state that changes generated code."""
    o = state.options
    return (state.default_fp.name, state.default_ip.name, bool(state.debug),
            os.environ.get("SPIRAD_VERIFY") == "1",
            tuple(sorted((k, repr(o.get(k))) for k in ("ad_stack_size", "default_ad_stack_size",
                                                       "ad_stack_experimental_enabled",
                                                       "adstack_cache"))))


def forward_key(kernel, specs, state) -> str | None:
    """The key of `kernel`'s forward program for signature `specs`, or None (not cached)."""
    if not enabled(state):
        return None
    from .frontend.deps import describe
    deps = describe(kernel, [sp[1] for sp in specs if sp[0] == "template"])
    if deps is None:
        return None
    sig = tuple(sp if sp[0] != "template" else ("template",) for sp in specs)
    sig = tuple(tuple(x.name if hasattr(x, "is_float") else x for x in sp) for sp in sig)
    from .state import backend
    be = backend()
    return _digest(("forward", build_id(), state.arch, be.cache_features(), _options(state),
                    sig, deps))


def derived_key(parent: str | None, kind: str) -> str | None:
    """The key of a program derived from the forward program keyed `parent` (adjoint, forward
    mode): the forward key already covers signature (with needs_grad / needs_dual) and state."""
    return None if parent is None else _digest((kind, parent))


def _digest(parts) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _path(key: str) -> str:
    return os.path.join(cache_dir(), key[:2], key + ".bin")


def load(key: str | None):
    """The payload stored under `key`, or None (missing, corrupt, foreign: counted as a miss)."""
    if key is None:
        return None
    try:
        with open(_path(key), "rb") as f:
            raw = f.read()
    except OSError:
        stats["misses"] += 1
        return None
    payload = _decode(raw, key)
    if payload is None:
        stats["rejected"] += 1
        stats["misses"] += 1
        return None
    stats["hits"] += 1
    return payload


def _decode(raw: bytes, key: str):
    if not raw.startswith(MAGIC) or len(raw) < len(MAGIC) + _DIGEST:
        return None
    body = raw[len(MAGIC) + _DIGEST:]
    if hashlib.sha256(body).digest() != raw[len(MAGIC):len(MAGIC) + _DIGEST]:
        return None
    try:
        payload = pickle.loads(body)  # noqa: S301 - our own files, checked by digest and key
    except Exception:  # noqa: BLE001 - an entry another version wrote: ignored
        return None
    if not isinstance(payload, dict) or payload.get("key") != key or payload.get("build") != build_id():
        return None
    return payload


def store(key: str | None, payload: dict) -> None:
    """Write `payload` under `key` (atomically); a cache that cannot be written is skipped."""
    if key is None:
        return
    payload = dict(payload, key=key, build=build_id())
    try:
        body = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - something in the program does not pickle: not cached
        return
    path = _path(key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + hashlib.sha256(body).digest() + body)
        os.replace(tmp, path)
        stats["stores"] += 1
    except OSError:
        pass


def fields_match(tl, state) -> bool:
    """Every field a loaded task list names exists now with the same dtype and shape."""
    from kernel_ir.nodes import globals_used
    fields = state.field_map()
    for t in tl.tasks:
        reads, writes = globals_used(t.body)[:2]
        for ref in set(reads) | set(writes):
            if ref.kind != "field":
                continue
            f = fields.get(ref.key)
            if f is None or f.dtype != ref.dtype or (ref.shape is not None and
                                                     tuple(f.full_shape) != tuple(ref.shape) and
                                                     tuple(f.shape) != tuple(ref.shape)):
                return False
    return True
