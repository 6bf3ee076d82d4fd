"""The offline compile cache: compiled programs on disk, so a new process loads instead of compiling.

Why: most of a kernel's first call is code generation (LLVM's O3 and machine code, SPIR-V
emission and validation); a training script run again, or each rank of a torch.distributed job,
would pay it again for every kernel.

What an entry holds: the program's task list (the IR after all passes — for adjoint programs the
reverse-mode program, whose adstack sizing and sizer bytecode are derived from it) and the
backend's compiled form (`BackendBase.export_program`: LLVM object code, SPIR-V modules).

The key (sha256) covers everything the program depends on: the kernel's file, position and
source and those of the funcs and plain helpers it calls, the values the frontend can read while
compiling it — globals, closures, default arguments, attributes of modules, classes and objects,
template arguments (`frontend.deps`: by value; fields by id and layout), dataclass arguments
(their ndarrays by signature, other members as template arguments) — the argument signature, the
program kind (forward, adjoint, forward mode), the arch and the backend's
`cache_features` (device, CPU features, compile flags), the init options that change code
(`affects_code` in `options.INIT_OPTIONS`: `InitValues.code_key`), and
the build of spirad (its version and the size and time of every source file, so an edited
compiler never loads stale code). A kernel whose dependencies cannot be described
(`deps.describe` is None), that reads a field of a previous `init()`, returns values or prints,
is not cached. A loaded program may bind only the fields its description names (and spirad's
internal fields, by name), each with the same dtype and shape (else it is a miss): a field's
identity is never carried from one `init()` to another.

Entries live in `init(offline_cache_file_path=)`, else `$SPIRAD_CACHE_DIR`, else
`$XDG_CACHE_HOME/spirad`, else `~/.cache/spirad`; one file per program: magic (with the format
version), HMAC-SHA256 of the payload under a per-user key, payload (a pickle of a dict holding
its own key, build and format). The key is 32 random bytes in `.key` in the directory, created
with mode 0600; a key file that is not a regular file of this user with mode 0600 disables the
cache (a shared, writable directory cannot make spirad load what another user wrote). Entries are
unpickled only after the HMAC matches, and then by an unpickler that accepts only spirad's own
IR and program classes, so no file spirad did not write can run code. A file that is truncated,
corrupt, signed with another key, from another build or format or for another key is ignored
and rewritten by the compile that follows. Writes go to a temporary file renamed into place, so
concurrent processes never read half an entry.

Size: the directory is kept under `init(offline_cache_max_size_of_files=)` bytes, else
`$SPIRAD_CACHE_MAX_SIZE` (bytes, or with a K / M / G suffix), else 1 GiB: after a store the least
recently used entries (a hit refreshes an entry's time) are removed until it fits. `clear()`
(`sd.clear_cache()`) removes every entry; `size()` gives (bytes, entries).

`init(offline_cache=False)` or the environment variable SPIRAD_OFFLINE_CACHE=0 turns the cache
off (tests that patch the compiler do).
"""
from __future__ import annotations

import dataclasses
import hashlib
import hmac
import io
import os
import pickle
import stat
import tempfile

from .._version import __version__ as VERSION  # noqa: E402 - spirad's version
FORMAT = 2
MAGIC = b"SPIRAD-OFFLINE-CACHE-%d\n" % FORMAT
_DIGEST = 32
_KEY_FILE = ".key"
DEFAULT_MAX_BYTES = 1 << 30
_PACKAGES = ("spirad", "kernel_ir", "passes", "sizer", "spirv_codegen", "llvm_codegen", "gfx_runtime", "shaders")
_build = None
_keys: dict = {}  # cache directory -> its HMAC key (None: the key file is not trusted)
stats = {"hits": 0, "misses": 0, "stores": 0, "rejected": 0, "evicted": 0}  # this process


def cache_dir(state=None) -> str:
    """The cache directory: `init(offline_cache_file_path=)`, $SPIRAD_CACHE_DIR, else the
    user's cache directory."""
    if state is None:
        from ..runtime.state import current
        state = current()
    from .. import options
    d = state.options.offline_cache_file_path or options.get("SPIRAD_CACHE_DIR")
    if d:
        return os.fspath(d)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "spirad")


def enabled(state) -> bool:
    """On unless `init(offline_cache=False)` or SPIRAD_OFFLINE_CACHE=0."""
    from .. import options
    return state.options.offline_cache and options.get("SPIRAD_OFFLINE_CACHE")


def max_bytes(state=None) -> int:
    """The size cap: `init(offline_cache_max_size_of_files=)`, $SPIRAD_CACHE_MAX_SIZE, 1 GiB."""
    if state is None:
        from ..runtime.state import current
        state = current()
    v = state.options.offline_cache_max_size_of_files
    if v is None:
        from .. import options
        v = options.get("SPIRAD_CACHE_MAX_SIZE")
    if v is None or v == "":
        return DEFAULT_MAX_BYTES
    if isinstance(v, str):
        t = v.strip().upper().rstrip("B").rstrip("I")
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
        try:
            return int(float(t[:-1] if scale > 1 else t) * scale)
        except ValueError:
            from kernel_ir.errors import SpiradValueError
            raise SpiradValueError(f"SPIRAD_CACHE_MAX_SIZE={v!r}: give bytes, or a number with "
                                   f"K, M or G") from None
    return int(v)


def build_id() -> str:
    """spirad's version and a digest of its source files' sizes and modification times."""
    global _build
    if _build is None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
    """The state that changes generated code: the init options declared `affects_code`
    (`options.INIT_OPTIONS`) and the switches that do."""
    from .. import options
    return (state.options.code_key(), options.get("SPIRAD_VERIFY"),
            # an adjoint compiled under `warn` must not be loaded where the kernel is refused
            options.get("SPIRAD_AD_OVERWRITTEN_READS"),
            options.get("SPIRAD_INDEPENDENT_LOOPS"),  # serialised loops made parallel
            options.get("SPIRAD_ENV_LANES"))  # ... or in lanes


class CacheKey(str):
    """An offline-cache key (a hex digest) with the ids of the fields its description names:
    the only user fields a program loaded under it may bind."""
    fields: frozenset = frozenset()


def _key(digest: str, fields) -> CacheKey:
    k = CacheKey(digest)
    k.fields = frozenset(fields)
    return k


def forward_key(kernel, specs, state) -> CacheKey | None:
    """The key of `kernel`'s forward program for signature `specs`, or None (not cached)."""
    if not enabled(state):
        return None
    from ..frontend.deps import describe
    described = describe(kernel, [sp[1] for sp in specs if sp[0] == "template"], state,
                         [sp[1] for sp in specs if sp[0] == "struct"])
    if described is None:
        return None
    deps, fields = described
    # template and dataclass arguments are in `deps`; a dataclass's hidden ndarray arguments
    # (paths and indices) stay in the signature
    sig = tuple(("template",) if sp[0] == "template" else ("struct", sp[2]) if sp[0] == "struct"
                else sp for sp in specs)
    sig = tuple(tuple(x.name if hasattr(x, "is_float") else x for x in sp) for sp in sig)
    from ..runtime.state import backend
    be = backend()
    return _key(_digest(("forward", FORMAT, build_id(), state.arch, be.cache_features(),
                         _options(state), sig, deps)), fields)


def derived_key(parent: CacheKey | None, kind: str) -> CacheKey | None:
    """The key of a program derived from the forward program keyed `parent` (adjoint, forward
    mode): the forward key already covers signature (with needs_grad / needs_dual) and state."""
    return None if parent is None else _key(_digest((kind, str(parent))), parent.fields)


def _digest(parts) -> str:
    return hashlib.sha256(repr(_canonical(parts)).encode()).hexdigest()


def _canonical(x):
    """`x` with every set in a fixed order, inside tuples, lists, dicts and dataclasses: the repr
    of a set of strings follows the process's string-hash seed, so a key holding one (the wgpu
    features in Metal's caps) differed in every process and a stored entry was never hit."""
    if isinstance(x, (set, frozenset)):
        return ("set", tuple(sorted((_canonical(v) for v in x), key=repr)))
    if isinstance(x, (tuple, list)):
        return type(x)(_canonical(v) for v in x)
    if isinstance(x, dict):
        return ("dict", tuple(sorted(((repr(_canonical(k)), _canonical(v)) for k, v in x.items()),
                                     key=lambda kv: kv[0])))
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__qualname__,
                tuple((f.name, _canonical(getattr(x, f.name))) for f in dataclasses.fields(x)))
    return x


def _path(key: str, state=None) -> str:
    return os.path.join(cache_dir(state), key[:2], key + ".bin")


# -- the per-user key ---------------------------------------------------------------------------
def _secret(d: str, create: bool):
    """This user's HMAC key for directory `d` (created on first store), or None: missing, or
    a key file that is not a regular file owned by this user with mode 0600 (then nothing is
    loaded from or stored in `d`; a warning says why once)."""
    if d in _keys:
        return _keys[d]
    path = os.path.join(d, _KEY_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        if not create:
            return None
        return _new_secret(d, path)
    except OSError as e:
        return _distrust(d, f"cannot open {path}: {e}")
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()) \
                or st.st_mode & 0o077:
            return _distrust(d, f"{path} is not a file of this user with mode 0600")
        secret = f.read()
    if len(secret) != 32:
        return _distrust(d, f"{path} is damaged; delete it (the cache is rebuilt)")
    _keys[d] = secret
    return secret


def _new_secret(d: str, path: str):
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                     0o600)
    except FileExistsError:  # another process created it just now
        return _secret(d, False)
    except OSError:
        return None  # a directory we cannot write: no cache
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(32))
    return _secret(d, False)


def _distrust(d: str, why: str):
    import warnings
    warnings.warn(f"spirad's offline compile cache in {d} is off: {why}", RuntimeWarning,
                  stacklevel=4)
    _keys[d] = None
    return None


def _sign(secret: bytes, body: bytes) -> bytes:
    return hmac.new(secret, body, hashlib.sha256).digest()


# -- entries -------------------------------------------------------------------------------------
_ALLOWED_PACKAGES = ("kernel_ir.", "spirv_codegen.", "sizer.", "llvm_codegen.")
_ALLOWED_BUILTINS = frozenset(("object", "set", "frozenset", "slice", "range", "complex",
                               "bytearray", "tuple", "list", "dict"))


class _Unpickler(pickle.Unpickler):
    """Accepts only classes defined in spirad's IR and code-generator packages (and plain
    builtin containers): a payload can build data, never call a function."""

    def find_class(self, module, name):
        if module == "builtins" and name in _ALLOWED_BUILTINS:
            return super().find_class(module, name)
        if module.startswith(_ALLOWED_PACKAGES) and "." not in name:
            obj = super().find_class(module, name)
            if isinstance(obj, type) and obj.__module__ == module:
                return obj
        raise pickle.UnpicklingError(f"offline cache: {module}.{name} is not allowed")


def load(key: str | None, state=None):
    """The payload stored under `key`, or None (missing, corrupt, foreign: counted as a miss)."""
    if key is None:
        return None
    d = cache_dir(state)
    path = _path(key, state)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        stats["misses"] += 1
        return None
    payload = _decode(raw, key, _secret(d, False))
    if payload is None:
        stats["rejected"] += 1
        stats["misses"] += 1
        return None
    stats["hits"] += 1
    try:
        os.utime(path)  # least recently used goes first when the cache is full
    except OSError:
        pass
    return payload


def _decode(raw: bytes, key: str, secret):
    if secret is None or not raw.startswith(MAGIC) or len(raw) < len(MAGIC) + _DIGEST:
        return None
    body = raw[len(MAGIC) + _DIGEST:]
    if not hmac.compare_digest(_sign(secret, body), raw[len(MAGIC):len(MAGIC) + _DIGEST]):
        return None
    try:
        payload = _Unpickler(io.BytesIO(body)).load()
    except Exception:  # noqa: BLE001 - an entry another version wrote: ignored
        return None
    if not isinstance(payload, dict) or payload.get("key") != key or \
            payload.get("build") != build_id() or payload.get("format") != FORMAT:
        return None
    return payload


def store(key: str | None, payload: dict, state=None) -> None:
    """Write `payload` under `key` (atomically), then keep the directory under its size cap; a
    cache that cannot be written is skipped."""
    if key is None:
        return
    d = cache_dir(state)
    secret = _secret(d, True)
    if secret is None:
        return
    payload = dict(payload, key=str(key), build=build_id(), format=FORMAT)
    try:
        body = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - something in the program does not pickle: not cached
        return
    path = _path(key, state)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + _sign(secret, body) + body)
        os.replace(tmp, path)
        stats["stores"] += 1
    except OSError:
        return
    evict(max_bytes(state), state)


def _entries(d: str) -> list:
    """(mtime, bytes, path) of every entry in cache directory `d`."""
    out = []
    try:
        subs = [e for e in os.scandir(d) if e.is_dir(follow_symlinks=False) and len(e.name) == 2]
    except OSError:
        return out
    for sub in subs:
        try:
            for e in os.scandir(sub.path):
                if e.name.endswith(".bin") and e.is_file(follow_symlinks=False):
                    st = e.stat(follow_symlinks=False)
                    out.append((st.st_mtime_ns, st.st_size, e.path))
        except OSError:
            continue
    return out


def evict(limit: int, state=None) -> int:
    """Remove least recently used entries until the directory holds at most `limit` bytes of
    entries; returns how many were removed."""
    entries = _entries(cache_dir(state))
    total = sum(e[1] for e in entries)
    removed = 0
    for _, nbytes, path in sorted(entries):
        if total <= limit:
            break
        try:
            os.remove(path)
        except OSError:
            continue
        total -= nbytes
        removed += 1
    stats["evicted"] += removed
    return removed


def size(state=None) -> tuple:
    """(bytes, entries) of the cache directory's entries."""
    entries = _entries(cache_dir(state))
    return sum(e[1] for e in entries), len(entries)


def clear(state=None) -> int:
    """Remove every entry of the cache directory (`sd.clear_cache()`, `python -m spirad cache
    clear`); returns how many were removed. The per-user key stays."""
    removed = 0
    d = cache_dir(state)
    for _, _, path in _entries(d):
        try:
            os.remove(path)
            removed += 1
        except OSError:
            pass
    try:  # temporary files of writers that died, and the emptied subdirectories
        for sub in os.scandir(d):
            if sub.is_dir(follow_symlinks=False) and len(sub.name) == 2:
                for e in os.scandir(sub.path):
                    if e.name.startswith(".tmp-"):
                        os.remove(e.path)
                os.rmdir(sub.path)
    except OSError:
        pass
    return removed


def fields_match(tl, state, allowed=None) -> bool:
    """Every field a loaded task list names exists now with the same dtype and shape, and is
    one the key's description named (`allowed`: ids) or an internal field of the same name."""
    from kernel_ir.nodes import globals_used
    fields = state.field_map()
    internal = None
    for t in tl.tasks:
        reads, writes = globals_used(t.body)[:2]
        for ref in set(reads) | set(writes):
            if ref.kind != "field":
                continue
            f = fields.get(ref.key)
            if allowed is not None and ref.key not in allowed:
                if internal is None:
                    internal = _internal_fields(state)
                f = internal.get(ref.key)
                if f is None or f.name != ref.name:
                    return False
            if f is None or f.dtype != ref.dtype or (ref.shape is not None and
                                                     tuple(f.full_shape) != tuple(ref.shape) and
                                                     tuple(f.shape) != tuple(ref.shape)):
                return False
    return True


def _internal_fields(state) -> dict:
    """id -> Field of the fields spirad binds itself (random-number launch counter, assert flag)."""
    out = {}
    for f in (state.rng, getattr(state.asserts, "flag", None)):
        if f is not None:
            out[f.id] = f
    return out
