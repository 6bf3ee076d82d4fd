"""The offline compile cache keys a field's sparse layout: the same kernel source over a dense
field and then over a bitmasked one of the same shape (same ids) must compile again, else the
cached program (no activation, no struct-for condition) counts every cell."""
import os
import subprocess
import sys

SCRIPT = '''
import sys, spirad as sd
sd.init(arch=sd.cpu)
c = sd.field(sd.i32, shape=())
x = sd.field(sd.f32)
if sys.argv[1] == "sparse":
    sd.root.bitmasked(sd.i, 8).place(x)
else:
    sd.root.dense(sd.i, 8).place(x)

@sd.kernel
def k():
    x[3] = 1.0
    for i in x:
        c[None] += 1

k()
print(c[None])
'''


def test_sparse_layout_is_in_the_cache_key(tmp_path):
    script = tmp_path / "layout_script.py"
    script.write_text(SCRIPT)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, SPIRAD_CACHE_DIR=str(tmp_path / "cache"), SPIRAD_OFFLINE_CACHE="1",
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    got = [subprocess.run([sys.executable, str(script), mode], env=env, capture_output=True,
                          text=True, check=True).stdout.strip()
           for mode in ("dense", "sparse", "sparse", "dense")]
    assert got == ["8", "1", "1", "8"]
    assert any((tmp_path / "cache").rglob("*"))  # the runs did use the cache
