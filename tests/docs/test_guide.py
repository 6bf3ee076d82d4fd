"""Every ```python block of every page in docs/ runs, in page order, as one script per page.

A page's blocks share one namespace, after a prelude (`import numpy as np`, `import spirad as sd`,
`sd.init(arch=sd.cpu)`); every `sd.init(arch=...)` in a block is run with `arch=sd.cpu` (CI has no
GPU; the GPU paths have their own tests). A block fenced ```python no-ci is shown, not run: use it
for what cannot run here (a `torchrun` launch line, another machine's arch). Each page runs in its
own process, so a page cannot break another (or the test process)."""
import glob
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, "docs")
PRELUDE = "import numpy as np\nimport spirad as sd\nsd.init(arch=sd.cpu)\n"
GUIDE = ("index.md", "language.md", "autodiff.md", "backends.md", "interop.md", "cache.md",
         "errors_and_environment.md", "reliability.md")
_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
_INIT_ARCH = re.compile(r"sd\.init\(\s*arch\s*=\s*(sd\.\w+|\"\w+\"|'\w+')")


def blocks(text: str) -> list:
    """The code of the blocks that run: fenced ```python exactly (not ```python no-ci)."""
    return [code for info, code in _FENCE.findall(text) if info.strip() == "python"]


def script(text: str) -> str:
    return PRELUDE + "\n\n".join(_INIT_ARCH.sub("sd.init(arch=sd.cpu", b) for b in blocks(text))


def pages() -> list:
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(DOCS, "*.md")))


def test_the_guide_pages_exist_and_have_code():
    for name in GUIDE:
        with open(os.path.join(DOCS, name)) as f:
            assert blocks(f.read()), f"docs/{name} has no ```python block"


def test_block_extraction_and_arch_rewrite():
    text = ("x\n```python\na = 1\nsd.init(arch=sd.vulkan)\n```\n```python no-ci\nboom()\n```\n"
            "```bash\nls\n```\n```python\nb = a\n```\n")
    assert blocks(text) == ["a = 1\nsd.init(arch=sd.vulkan)\n", "b = a\n"]
    assert "sd.init(arch=sd.cpu)" in script(text).split(PRELUDE)[1] and "boom" not in script(text)


@pytest.mark.parametrize("page", pages())
def test_page_code_runs(page, tmp_path):
    with open(os.path.join(DOCS, page)) as f:
        code = script(f.read())
    path = tmp_path / (page[:-3].replace("-", "_") + "_page.py")  # kernels need a source file
    path.write_text(code)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               MPLBACKEND="Agg")
    r = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, f"docs/{page}:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
