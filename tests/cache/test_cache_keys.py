"""The offline cache keys a program by every value its code depends on, never carries a field's
identity across `init()`, keeps the current source location, loads only entries this user's
spirad signed, and stays under its size cap (architecture §8; docs/cache.md). Each case runs in two
(or more) fresh processes sharing one cache directory."""
import glob
import json
import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

import spirad as sd
from spirad.compile import offline_cache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

VALUES = r'''
import json, os, sys
import numpy as np
import spirad as sd
from spirad.compile import offline_cache
import cfgpkg                         # a package: cfgpkg.sub.SCALE is read through two modules

S = float(os.environ["S"])
sd.init(arch=sys.argv[1])

class Params:
    scale = S

class Cfg:
    pass
cfg = Cfg()
cfg.scale = S

SCALE = S
def helper(v):                        # a plain Python helper reading a global
    return v * SCALE

def factory(s):
    @sd.kernel
    def closure_k(a: sd.types.ndarray()):
        for i in a:
            a[i] = i * s              # a closure cell
    return closure_k

@sd.func
def with_default(v, s=S):             # a default argument
    return v * s

class Tools:
    @staticmethod
    def twice(v):
        return v * SCALE

@sd.kernel
def class_attr(a: sd.types.ndarray()):
    for i in a:
        a[i] = i * Params.scale

@sd.kernel
def object_attr(a: sd.types.ndarray()):
    for i in a:
        a[i] = i * cfg.scale

@sd.kernel
def helper_k(a: sd.types.ndarray()):
    for i in a:
        a[i] = helper(i * 1.0)

@sd.kernel
def module_k(a: sd.types.ndarray()):
    for i in a:
        a[i] = i * cfgpkg.sub.SCALE

@sd.kernel
def default_k(a: sd.types.ndarray()):
    for i in a:
        a[i] = with_default(i * 1.0)

@sd.kernel
def method_k(a: sd.types.ndarray()):
    for i in a:
        a[i] = Tools.twice(i * 1.0)

out = {}
for k in (class_attr, object_attr, helper_k, module_k, default_k, method_k, factory(S)):
    a = np.zeros(4, np.float32)
    k(a)
    out[k.fn.__name__] = a.tolist()
print(json.dumps({"out": out, "stats": offline_cache.stats}))
'''


def _env(tmp_path, **kw):
    return dict(os.environ, SPIRAD_CACHE_DIR=str(tmp_path / "cache"),
                PYTHONPATH=str(tmp_path) + os.pathsep + ROOT + os.pathsep +
                os.environ.get("PYTHONPATH", ""), **kw)


def _run(tmp_path, script, *args, name="prog.py", expect_ok=True, **env):
    path = tmp_path / name
    path.write_text(script)
    r = subprocess.run([sys.executable, str(path), *args], env=_env(tmp_path, **env),
                       capture_output=True, text=True, timeout=300)
    if expect_ok:
        assert r.returncode == 0, r.stdout + r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])
    return r


def _write_pkg(tmp_path, s):
    pkg = tmp_path / "cfgpkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("from . import sub\n")
    (pkg / "sub.py").write_text(f"SCALE = {s}\n")


@pytest.mark.parametrize("arch", ["cpu", "vulkan"], ids=["arch=cpu", "arch=vulkan"])
def test_values_read_through_attributes_helpers_closures_defaults(tmp_path, arch):
    from tests.support.archs import arch_or_skip
    arch_or_skip(arch)
    for s, hits in ((2.0, 0), (3.0, 0), (2.0, 7)):
        _write_pkg(tmp_path, s)
        os.utime(tmp_path / "cfgpkg" / "sub.py", (0, 1_000_000 + s))
        got = _run(tmp_path, VALUES, arch, S=str(s))
        for name, a in got["out"].items():
            assert a == [s * i for i in range(4)], (s, name, a)  # never the other run's value
        assert got["stats"]["hits"] == hits, got["stats"]


REINIT = r'''
import json, sys
import numpy as np
import spirad as sd
sd.init(arch=sys.argv[1])
x = sd.field(sd.f32, shape=4)

@sd.kernel
def k(s: sd.f32):
    for i in x:
        x[i] = s

k(1.0)
sd.init(arch=sys.argv[1])
y = sd.field(sd.f32, shape=4)          # a new field with x's id and layout
try:
    k(2.0)                            # x belongs to the previous init()
    err = None
except sd.SpiradValueError as e:
    err = str(e)
print(json.dumps({"err": err, "y": y.to_numpy().tolist()}))
'''


def test_stale_field_after_init_raises_with_the_cache(tmp_path):
    for _ in range(2):  # the second process finds k's program in the cache
        got = _run(tmp_path, REINIT, "cpu")
        assert got["err"] and "previous sd.init()" in got["err"], got
        assert got["y"] == [0.0] * 4   # nothing written into the unrelated new field


BOUNDS = r'''
import sys
import numpy as np
import spirad as sd
sd.init(arch=sys.argv[1], debug=True)

@sd.kernel
def k(a: sd.types.ndarray()):
    for i in a:
        a[i + 1] = 1.0

try:
    k(np.zeros(4, np.float32))
    sd.sync()
except sd.SpiradValueError as e:
    print(str(e))
'''


def test_errors_of_cached_programs_name_the_current_file_and_line(tmp_path):
    first = _run(tmp_path, BOUNDS, "cpu", name="first.py", expect_ok=False)
    assert first.returncode == 0 and "first.py" in first.stdout, first.stdout + first.stderr
    moved = "\n\n\n" + BOUNDS  # the same kernel three lines lower, in another file
    second = _run(tmp_path, moved, "cpu", name="second.py", expect_ok=False)
    out = second.stdout
    assert second.returncode == 0 and "second.py" in out and "first.py" not in out, out
    line = moved.splitlines().index("        a[i + 1] = 1.0") + 1
    assert f"line {line}" in out or f":{line}" in out, out


class _Marker:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))  # code execution at unpickling: creates the file


def _forge(entry, marker, magic=offline_cache.MAGIC):
    import hashlib
    body = pickle.dumps({"x": _Marker(marker)})
    with open(entry, "wb") as f:  # a correct plain sha256: the old format's check passes
        f.write(magic + hashlib.sha256(body).digest() + body)


def test_entries_not_signed_with_this_users_key_never_run(tmp_path):
    got = _run(tmp_path, VALUES.replace("import cfgpkg", "cfgpkg = None").replace(
        "class_attr, object_attr, helper_k, module_k, default_k, method_k, factory(S)",
        "class_attr, helper_k"), "cpu", S="2.0")
    entries = glob.glob(str(tmp_path / "cache" / "*" / "*.bin"))
    assert len(entries) == 2 and got["stats"]["stores"] == 2
    marker = tmp_path / "pwned"
    for e in entries:
        _forge(e, str(marker))
    got = _run(tmp_path, VALUES.replace("import cfgpkg", "cfgpkg = None").replace(
        "class_attr, object_attr, helper_k, module_k, default_k, method_k, factory(S)",
        "class_attr, helper_k"), "cpu", S="2.0")
    assert not marker.exists()
    assert got["stats"]["rejected"] == 2 and got["stats"]["hits"] == 0
    assert got["out"]["class_attr"] == [0.0, 2.0, 4.0, 6.0]


def test_signed_payload_with_foreign_classes_is_refused(tmp_path, monkeypatch):
    """Defense in depth: even a correctly signed payload may only build spirad's IR classes."""
    monkeypatch.setenv("SPIRAD_CACHE_DIR", str(tmp_path))
    sd.init(arch=sd.cpu)
    secret = offline_cache._secret(str(tmp_path), True)
    marker = tmp_path / "pwned"
    body = pickle.dumps({"key": "k", "x": _Marker(str(marker))})
    raw = offline_cache.MAGIC + offline_cache._sign(secret, body) + body
    assert offline_cache._decode(raw, "k", secret) is None
    assert not marker.exists()


def test_key_file_of_another_mode_turns_the_cache_off(tmp_path, monkeypatch):
    d = tmp_path / "shared"
    monkeypatch.setenv("SPIRAD_CACHE_DIR", str(d))
    d.mkdir()
    (d / ".key").write_bytes(os.urandom(32))
    os.chmod(d / ".key", 0o644)   # readable by others: someone else may sign with it
    offline_cache._keys.pop(str(d), None)
    sd.init(arch=sd.cpu)

    @sd.kernel
    def k(a: sd.types.ndarray()):
        for i in a:
            a[i] = 1.0
    with pytest.warns(RuntimeWarning, match="0600"):
        k(np.zeros(2, np.float32))
    assert offline_cache.size() == (0, 0)
    offline_cache._keys.pop(str(d), None)


def _kernels(n):
    out = []
    for c in range(n):
        def make(c):
            @sd.kernel
            def k(a: sd.types.ndarray()):
                for i in a:
                    a[i] = i + c
            return k
        out.append(make(float(c)))
    return out


def test_size_cap_evicts_least_recently_used_and_clear(tmp_path, monkeypatch):
    monkeypatch.setenv("SPIRAD_CACHE_DIR", str(tmp_path))
    sd.init(arch=sd.cpu)
    ks = _kernels(4)
    a = np.zeros(2, np.float32)
    ks[0](a)
    one, n = offline_cache.size()
    assert n == 1 and one > 0
    cap = int(2.5 * one)
    sd.init(arch=sd.cpu, offline_cache_max_size_of_files=cap)
    ks = _kernels(4)
    ks[1](a)
    import time
    time.sleep(0.02)
    sd.init(arch=sd.cpu, offline_cache_max_size_of_files=cap)
    ks = _kernels(4)
    ks[0](a)                          # a hit: k0 becomes the most recently used
    hits = offline_cache.stats["hits"]
    time.sleep(0.02)
    ks[2](a)                          # over the cap: k1, the least recently used, goes
    time.sleep(0.02)
    total, n = offline_cache.size()
    assert total <= cap and n == 2
    sd.init(arch=sd.cpu, offline_cache_max_size_of_files=cap)
    ks = _kernels(4)
    ks[0](a)
    ks[2](a)
    assert offline_cache.stats["hits"] == hits + 2   # k0 and k2 stayed
    assert sd.clear_cache() == 2
    assert offline_cache.size() == (0, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ks[3](a)                      # the cache works on after clear()
    assert offline_cache.size()[1] == 1


def test_size_cap_from_the_environment(monkeypatch):
    sd.init(arch=sd.cpu)
    monkeypatch.setenv("SPIRAD_CACHE_MAX_SIZE", "2M")
    assert offline_cache.max_bytes() == 2 << 20
    monkeypatch.setenv("SPIRAD_CACHE_MAX_SIZE", "12345")
    assert offline_cache.max_bytes() == 12345
    monkeypatch.delenv("SPIRAD_CACHE_MAX_SIZE")
    assert offline_cache.max_bytes() == offline_cache.DEFAULT_MAX_BYTES
    sd.init(arch=sd.cpu, offline_cache_max_size_of_files=777)
    assert offline_cache.max_bytes() == 777


STRUCTS = r'''
import dataclasses, json, os, sys, threading
import numpy as np
import spirad as sd
from spirad.compile import offline_cache

S, N = float(os.environ["S"]), int(os.environ["N"])
sd.init(arch=sys.argv[1])

@dataclasses.dataclass(frozen=True)
class Inner:
    v: object

@dataclasses.dataclass(frozen=True)
class State:
    pos: object
    inner: Inner
    acc: object
    scale: float
    lock: object          # never read by the kernel: not described

acc = sd.field(sd.f32, shape=())
st = State(pos=sd.ndarray(sd.f32, N, needs_grad=True), inner=Inner(sd.ndarray(sd.f32, N)),
           acc=acc, scale=S, lock=threading.Lock())

@sd.kernel
def k(s: State):
    for i in s.pos:
        s.inner.v[i] = s.pos[i] * s.pos[i] * s.scale
        s.acc[None] += s.pos[i]

st.pos.from_numpy(np.arange(N, dtype=np.float32))
k(st)
print(json.dumps({"v": st.inner.v.to_numpy().tolist(), "acc": float(acc[None]),
                  "stats": offline_cache.stats}))
'''


def test_dataclass_arguments_are_cached(tmp_path):
    """A kernel with a dataclass argument is stored and loaded by another process: its ndarrays
    by signature and, as a process's first launch is specialised on them, by their shapes
    (another size misses: passes/shape_specialise), its plain values by value (another one
    misses), members the kernel never reads not described (an uncacheable lock does not matter)."""
    for s, n, hits in ((2.0, 4, 0), (2.0, 6, 0), (3.0, 4, 0), (2.0, 4, 1), (2.0, 6, 1)):
        got = _run(tmp_path, STRUCTS, "cpu", S=str(s), N=str(n))
        assert got["v"] == [s * i * i for i in range(n)]
        assert got["acc"] == sum(range(n))
        assert got["stats"]["hits"] == hits and got["stats"]["stores"] == 1 - hits, got["stats"]


ENUMS = r'''
import enum, json, os, sys
import numpy as np
import spirad as sd
from spirad.compile import offline_cache

S = int(os.environ["S"])
sd.init(arch=sys.argv[1])

class Kind(enum.IntEnum):
    BOX = S
    SPHERE = 7

class Config:
    def __init__(self):
        self._n = S
    @property
    def n(self):
        return self._n

FLAG = np.bool_(S > 2)
cfg = Config()

@sd.kernel
def k(a: sd.types.ndarray()):
    for i in a:
        a[i] = Kind.BOX * 10 + cfg.n + (100 if sd.static(FLAG) else 0)

a = np.zeros(2, np.int32)
k(a)
print(json.dumps({"a": a.tolist(), "stats": offline_cache.stats}))
'''


def test_enum_constants_properties_and_numpy_scalars_are_cached(tmp_path):
    """Programs holding IntEnum constants load in another process (the IR keeps plain ints),
    and kernels reading properties and numpy scalars are described (by value)."""
    for s, hits in ((2, 0), (2, 1), (3, 0)):
        got = _run(tmp_path, ENUMS, "cpu", S=str(s))
        assert got["a"] == [s * 11 + (100 if s > 2 else 0)] * 2
        assert got["stats"]["hits"] == hits and got["stats"]["rejected"] == 0, got["stats"]


ORDER = r'''
import json, os, sys
import spirad as sd
from spirad.compile import offline_cache
sd.init(arch=sys.argv[1])
x = sd.field(sd.i32, shape=(2, 3), order=os.environ["ORDER"])

@sd.kernel
def fill():
    for i, j in x:
        x[i, j] = i * 10 + j

fill()
print(json.dumps({"x": x.to_numpy().tolist(), "hits": offline_cache.stats["hits"]}))
'''


@pytest.mark.parametrize("arch", ["cpu", "vulkan"], ids=["arch=cpu", "arch=vulkan"])
def test_field_layout_is_part_of_the_key(tmp_path, arch):
    """A program compiled for a field in C order is not loaded for the same field in Taichi's
    hierarchy order (`order="ji"`, spirad.data.snode_layout): the addresses differ."""
    want = [[0, 1, 2], [10, 11, 12]]
    assert _run(tmp_path, ORDER, arch, ORDER="ij")["x"] == want
    got = _run(tmp_path, ORDER, arch, ORDER="ji")
    assert got["x"] == want and got["hits"] == 0
    assert _run(tmp_path, ORDER, arch, ORDER="ji")["hits"] == 1  # its own entry is used


NDLAYOUT = r'''
import json, os, sys
import numpy as np
import spirad as sd
from spirad.compile import offline_cache
sd.init(arch=sys.argv[1])
layout = tuple(int(a) for a in os.environ["LAYOUT"].split(",")) if os.environ["LAYOUT"] else None
x = sd.tensor(sd.i32, (3, 3), backend=sd.Backend.NDARRAY, layout=layout)

@sd.kernel
def fill(x: sd.types.ndarray()):
    for i, j in x:
        x[i, j] = i * 10 + j

fill(x)
print(json.dumps({"x": x.to_numpy().tolist(), "hits": offline_cache.stats["hits"]}))
'''


@pytest.mark.parametrize("arch", ["cpu", "vulkan"], ids=["arch=cpu", "arch=vulkan"])
def test_ndarray_layout_is_part_of_the_key(tmp_path, arch):
    """A program compiled for a canonical ndarray is not loaded for one of the same dtype, rank
    and (square) storage shape stored in another axis order (`layout=`, spirad.data.ndarray):
    its accesses permute the indices."""
    want = [[0, 1, 2], [10, 11, 12], [20, 21, 22]]
    assert _run(tmp_path, NDLAYOUT, arch, LAYOUT="")["x"] == want
    got = _run(tmp_path, NDLAYOUT, arch, LAYOUT="1,0")
    assert got["x"] == want and got["hits"] == 0
    assert _run(tmp_path, NDLAYOUT, arch, LAYOUT="1,0")["hits"] == 1  # its own entry is used
