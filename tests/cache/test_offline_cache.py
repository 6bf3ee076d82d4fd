"""The offline compile cache: a second process loads instead of compiling (and computes the same
results), corrupt and foreign entries are ignored and rewritten, keys change with the closure
values and funcs a kernel depends on, `init(offline_cache=False)` turns it off."""
import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import spirad as sd
from spirad.compile import offline_cache
from tests.support.archs import SPIRV_ARCHS, arch_or_skip, exactly, test_archs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = '''
import json, os, sys
import numpy as np
import spirad as sd
from spirad.compile import offline_cache

SCALE = float(os.environ.get("SCALE", "1.5"))
sd.init(arch=sys.argv[1])
x = sd.field(sd.f32, shape=8, needs_grad=True)

@sd.func
def damp(s):
    return sd.sin(s) * SCALE

@sd.kernel
def k(n: sd.i32, a: sd.types.ndarray()):
    for i in x:
        s = x[i]
        for _ in range(n):     # dynamic loop: the adjoint has an adstack
            s = damp(s)
        a[i] = s

a = sd.ndarray(sd.f32, 8, needs_grad=True)
x.from_numpy(np.linspace(0, 1, 8).astype(np.float32))
k(3, a)
a.grad.fill(1.0)
k.grad(3, a)
print(json.dumps({"stats": offline_cache.stats, "a": a.to_numpy().tolist(),
                  "gx": x.grad.to_numpy().tolist()}))
'''


def _reference(scale, n=3):
    x = np.linspace(0, 1, 8)
    s, d = x.copy(), np.ones(8)
    for _ in range(n):
        d = d * np.cos(s) * scale
        s = np.sin(s) * scale
    return s, d


def _run(tmp_path, arch, scale="1.5", hash_seed="1"):
    path = tmp_path / "prog.py"
    path.write_text(SCRIPT)
    env = dict(os.environ, SPIRAD_CACHE_DIR=str(tmp_path / "cache"), SCALE=scale,
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYTHONHASHSEED=hash_seed)
    r = subprocess.run([sys.executable, str(path), arch], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    s, d = _reference(float(scale))
    np.testing.assert_allclose(out["a"], s, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["gx"], d, rtol=1e-4, atol=1e-5)
    return out["stats"]


def _entries(tmp_path):
    return sorted(glob.glob(str(tmp_path / "cache" / "*" / "*.bin")))


@pytest.mark.parametrize("arch", ["cpu", "vulkan", "metal"],
                         ids=["arch=cpu", "arch=vulkan", "arch=metal"])
def test_second_process_loads_instead_of_compiling(tmp_path, arch):
    """Also under another string-hash seed: Metal's cache key holds a set of wgpu features,
    whose repr follows the seed (seeds 1 and 2 order them differently)."""
    arch_or_skip(arch)
    first = _run(tmp_path, arch)
    assert first["hits"] == 0 and first["stores"] == 2  # forward and adjoint
    assert len(_entries(tmp_path)) == 2
    second = _run(tmp_path, arch, hash_seed="2")
    assert second == {"hits": 2, "misses": 0, "stores": 0, "rejected": 0, "evicted": 0}


def test_corrupt_and_foreign_entries_are_ignored_and_rewritten(tmp_path):
    _run(tmp_path, "cpu")
    fwd, adj = _entries(tmp_path)
    with open(fwd, "r+b") as f:  # flip a byte in the payload: the digest no longer matches
        f.seek(-10, os.SEEK_END)
        b = f.read(1)
        f.seek(-10, os.SEEK_END)
        f.write(bytes([b[0] ^ 0xFF]))
    good_adj = open(adj, "rb").read()
    with open(adj, "wb") as f:
        f.write(open(fwd, "rb").read()[:40])  # truncated
    stats = _run(tmp_path, "cpu")
    assert stats["rejected"] == 2 and stats["stores"] == 2 and stats["hits"] == 0
    assert _run(tmp_path, "cpu")["hits"] == 2  # rewritten: valid again
    with open(fwd, "wb") as f:
        f.write(good_adj)  # a valid entry, but stored under another key: foreign
    stats = _run(tmp_path, "cpu")
    assert stats["rejected"] == 1 and stats["hits"] == 1 and stats["stores"] == 1


def test_closure_value_changes_the_key(tmp_path):
    _run(tmp_path, "cpu", scale="1.5")
    stats = _run(tmp_path, "cpu", scale="0.5")   # the results check SCALE=0.5 was compiled in
    assert stats["hits"] == 0 and stats["stores"] == 2
    assert _run(tmp_path, "cpu", scale="1.5")["hits"] == 2
    assert len(_entries(tmp_path)) == 4


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SPIRAD_CACHE_DIR", str(tmp_path))
    return tmp_path


def _key(kernel, *args):
    sd.init(arch=sd.cpu)
    args = kernel._foreign_args(args)[0]
    specs = kernel._signature(args, sd._state.current())[1]
    return offline_cache.forward_key(kernel, specs, sd._state.current())


def test_key_follows_funcs_fields_signature_and_options(cache_dir):
    def make(c, body):
        @sd.func
        def f(v):
            return v * c if body else v + c

        @sd.kernel
        def k(a: sd.types.ndarray()):
            for i in a:
                a[i] = f(a[i])
        return k

    a = np.zeros(3, np.float32)
    base = _key(make(2.0, True), a)
    assert base is not None and base == _key(make(2.0, True), a)
    assert base != _key(make(3.0, True), a)          # a closure value of a called func
    assert base != _key(make(2.0, False), a)         # the func's code
    assert base != _key(make(2.0, True), np.zeros(3))  # the signature (f64)
    sd.init(arch=sd.cpu, default_fp=sd.f64)
    k = make(2.0, True)
    specs = k._signature(k._foreign_args((a,))[0], sd._state.current())[1]
    refused = offline_cache.forward_key(k, specs, sd._state.current())
    assert refused != base  # init options
    from spirad import options
    options.set_default("SPIRAD_AD_OVERWRITTEN_READS", "warn")  # the Taichi alias's default
    try:  # an adjoint compiled with the warning is never loaded where the kernel is refused
        assert offline_cache.forward_key(k, specs, sd._state.current()) != refused
    finally:
        options.reset_default("SPIRAD_AD_OVERWRITTEN_READS")


def test_uncacheable_closure_and_off_switch(cache_dir):
    import threading
    obj = threading.Lock()  # a C object: nothing but its address describes it

    @sd.kernel
    def k(a: sd.types.ndarray()):
        for i in a:
            a[i] = 1.0 if obj is not None else 0.0

    assert _key(k, np.zeros(2, np.float32)) is None  # described only by its address: not cached

    @sd.kernel
    def ok(a: sd.types.ndarray()):
        for i in a:
            a[i] = 1.0

    sd.init(arch=sd.cpu, offline_cache=False)
    before = dict(offline_cache.stats)
    ok(np.zeros(2, np.float32))
    assert offline_cache.stats == before and not os.listdir(cache_dir)


@test_archs(archs=exactly("cpu"))
def test_hit_in_the_same_process_after_init_and_print_not_stored(arch, cache_dir):
    x = sd.field(sd.f32, shape=4)

    @sd.kernel
    def k(s: sd.f32):
        for i in x:
            x[i] = s * i

    @sd.kernel
    def p():
        print("hello")

    k(2.0)
    stores = offline_cache.stats["stores"]
    p()
    sd.sync()
    sd.init(arch=sd.cpu, debug=True)  # a new state (same options): in-memory programs gone
    x = sd.field(sd.f32, shape=4)   # k's closure now sees a field of the same id and layout
    hits = offline_cache.stats["hits"]
    k(3.0)
    np.testing.assert_array_equal(x.to_numpy(), [0, 3, 6, 9])
    assert offline_cache.stats["hits"] == hits + 1
    assert offline_cache.stats["stores"] == stores  # the print kernel p was never stored


def test_a_file_rewritten_in_the_same_process_is_a_new_key(cache_dir, tmp_path):
    import runpy
    path = tmp_path / "mod.py"
    body = ("import numpy as np\nimport spirad as sd\nsd.init(arch=sd.cpu)\n"
            "@sd.kernel\ndef k(a: sd.types.ndarray()):\n    for i in a:\n        a[i] = {}\n"
            "out = np.zeros(2, np.float32)\nk(out)\n")
    for value in (1.0, 2.0):
        path.write_text(body.format(value))
        os.utime(path, (0, 1_000_000 + value))  # a different mtime even within one tick
        assert runpy.run_path(str(path))["out"].tolist() == [value, value]


@test_archs(exclude=("cuda", "amdgpu"))  # their programs are not stored (export_program: None)
def test_a_hit_runs_no_backend_pass_again(arch, cache_dir, monkeypatch):
    """An entry stores the task list after the backend passes (`driver._program`) with the
    compiled program: a hit in a new state neither compiles nor runs those passes again (they
    were most of a hit's Python work), and computes the same."""
    from spirad.compile import driver
    x = sd.field(sd.f32, shape=8)
    y = sd.field(sd.f32, shape=())

    @sd.kernel
    def k(n: sd.i32):
        for i in x:
            for j in range(n):
                y[None] += x[i] * j  # promoted out of the serial loop: one atomic per thread

    x.from_numpy(np.arange(8, dtype=np.float32))
    k(3)
    assert y[None] == 84.0  # (0 + ... + 7) * (0 + 1 + 2)
    sd.init(arch=arch, debug=True)  # a new state, the same options: in-memory programs gone
    x = sd.field(sd.f32, shape=8)
    y = sd.field(sd.f32, shape=())

    def refuse(tl):
        raise AssertionError("a backend pass ran on an offline-cache hit")

    for name in ("promote_accumulators", "expand_math", "demote_atomics"):
        monkeypatch.setattr(driver, name, refuse)
    hits = offline_cache.stats["hits"]
    x.from_numpy(np.arange(8, dtype=np.float32) * 2)
    k(3)
    assert y[None] == 168.0
    assert offline_cache.stats["hits"] == hits + 1


def _counting_compiles(be, monkeypatch) -> list:
    """A list that gets an entry each time backend `be`'s class compiles a program (not loads
    one from the offline cache)."""
    compiles = []
    compile_ = type(be)._compile
    monkeypatch.setattr(type(be), "_compile",
                        lambda self, *a: (compiles.append(1), compile_(self, *a))[1])
    return compiles


@test_archs(archs=SPIRV_ARCHS)  # and metal: the SPIR-V backends place fields in root chunks
def test_a_hit_whose_fields_moved_within_their_chunk_reads_them_where_they_are(arch, cache_dir,
                                                                              monkeypatch):
    """Root offsets are not code (`spirv_codegen.buffers`): a stored module is loaded wherever
    its fields sit within their chunks, and reads and writes them there. Vulkan gives the
    offsets to the pipeline as specialization constants (a new pipeline per placement), Metal
    reads them from the arguments; a trip count read from a field goes through one."""
    from spirad.runtime import state as sd_state

    def declare(pad):
        a = sd.field(sd.f32, shape=pad)  # placed first: moves the kernel's fields
        a.fill(0.0)
        return sd.field(sd.i32, shape=()), sd.field(sd.f32, shape=64)

    n, x = declare(8)

    @sd.kernel
    def k(s: sd.f32):
        for i in x:
            v = x[i]
            for _ in range(n[None]):
                v = v * s + 1.0
            x[i] = v

    def run_and_count():
        be = sd_state.backend()
        compiles = _counting_compiles(be, monkeypatch)
        n[None] = 3
        x.from_numpy(np.arange(64, dtype=np.float32))
        k(2.0)
        np.testing.assert_array_equal(x.to_numpy(), np.arange(64) * 8.0 + 7.0)
        n[None] = 1
        k(0.5)  # the same program again, another trip count
        np.testing.assert_array_equal(x.to_numpy(), np.arange(64) * 4.0 + 4.5)
        slices = be.roots.by_key[x.id], be.roots.by_key[n.id]
        return len(compiles), tuple((sl.chunk.index, sl.offset) for sl in slices)

    compiled, first = run_and_count()
    assert compiled == 1
    for pad in (40, 1000):
        sd.init(arch=arch, debug=True)  # a new state, the same options
        n, x = declare(pad)
        hits = offline_cache.stats["hits"]
        compiled, where = run_and_count()
        assert compiled == 0 and offline_cache.stats["hits"] == hits + 1
        assert [c for c, _ in where] == [c for c, _ in first]  # the same chunks,
        assert where != first  # other offsets


@test_archs(archs=SPIRV_ARCHS)  # and metal: the SPIR-V backends place fields in root chunks
def test_a_hit_whose_fields_sit_in_other_root_chunks_is_compiled_again(arch, cache_dir,
                                                                         monkeypatch):
    """A stored SPIR-V program binds the root chunks its fields sat in when it was compiled
    (`SpirvBackend._map_inputs`). A hit in a state where a field sits in another chunk compiles
    the kernel again; one where they sit where they sat imports the stored modules."""
    from spirad.runtime import state as sd_state

    def declare(first_size):
        sd_state.backend().roots.limit = 8192  # root chunks of 8 KiB
        a = sd.field(sd.f32, shape=first_size)  # not read by the kernel: it moves x alone
        a.fill(0.0)  # placed now (first in the root)
        return a, sd.field(sd.f32, shape=1536)  # 6 KiB

    a, x = declare(1536)  # x in a second chunk

    @sd.kernel
    def k(s: sd.f32):
        for i in x:
            x[i] = x[i] * s + 1.0

    def run_and_count():
        be = sd_state.backend()
        compiles = _counting_compiles(be, monkeypatch)
        x.from_numpy(np.arange(1536, dtype=np.float32))
        k(2.0)
        np.testing.assert_array_equal(x.to_numpy(), np.arange(1536) * 2.0 + 1.0)
        return len(compiles), be.roots.by_key[x.id].chunk.index

    assert run_and_count() == (1, 1)
    for size, chunk, compiled in ((4, 0, 1), (1536, 1, 0)):
        sd.init(arch=arch, debug=True)  # a new state, the same options
        a, x = declare(size)
        hits = offline_cache.stats["hits"]
        assert run_and_count() == (compiled, chunk)
        assert offline_cache.stats["hits"] == hits + 1


def test_random_seed_is_part_of_the_key(cache_dir, monkeypatch):
    """`sd.random()` compiles `init(random_seed=)` into the kernel: a program stored under one
    seed is loaded under that seed only (it once was under any, repeating the old numbers)."""
    monkeypatch.setenv("SPIRAD_OFFLINE_CACHE", "1")

    def draw(seed):
        sd.init(arch=sd.cpu, random_seed=seed)
        x = sd.field(sd.f32, shape=16)

        @sd.kernel
        def k():
            for i in x:
                x[i] = sd.random()

        k()
        return x.to_numpy()

    first = draw(1)
    hits = offline_cache.stats["hits"]
    np.testing.assert_array_equal(draw(1), first)   # the same seed: loaded, the same numbers
    assert offline_cache.stats["hits"] == hits + 1
    other = draw(2)
    assert offline_cache.stats["hits"] == hits + 1  # another seed: compiled, not loaded
    assert not np.array_equal(other, first)


@test_archs(archs=exactly("metal"))
def test_a_metal_hit_is_not_checked_again(arch, cache_dir, monkeypatch):
    """Metal runs spirv-val and its profile's checks on every module it compiles (an invalid
    module could crash naga); an offline-cache entry passed them when it was stored, under the
    same cache features, so a hit does not run them again (~6 s of Genesis' box rebuilt from the
    cache, docs/metal.md). With validation on (`debug=True`, SPIRAD_VALIDATE_SPIRV) it still
    does."""
    import spirv_codegen
    from spirv_codegen import metal_check
    calls = []
    validate, check = spirv_codegen.validate, metal_check.check
    monkeypatch.setattr(spirv_codegen, "validate", lambda *a: (calls.append("val"), validate(*a))[1])
    monkeypatch.setattr(metal_check, "check", lambda *a: (calls.append("chk"), check(*a))[1])

    def fresh():
        sd.init(arch=arch)
        sd._state.backend().validate = False   # as outside tests (CI turns validation on)
        return sd.field(sd.f32, shape=8)

    x = fresh()

    @sd.kernel
    def k(s: sd.f32):
        for i in x:
            x[i] = s * i

    k(2.0)
    assert "val" in calls and "chk" in calls           # compiled: both checks ran
    x = fresh()                                         # a new state, the same options
    hits, n = offline_cache.stats["hits"], len(calls)
    k(3.0)
    np.testing.assert_array_equal(x.to_numpy(), np.arange(8) * 3.0)
    assert offline_cache.stats["hits"] == hits + 1
    assert len(calls) == n, "a stored module was validated again"
