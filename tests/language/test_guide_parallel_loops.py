"""Every code block of the user guide page docs/parallel_loops.md runs as written, in order (the
blocks assert their own results and the errors they show), on the CPU and on Vulkan."""
import os
import re
import runpy

import pytest

from tests.support.archs import arch_or_skip

PAGE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "parallel_loops.md")
INIT = "sd.init(arch=sd.cpu)"


def page_blocks():
    with open(PAGE) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def test_page_has_blocks_and_one_init():
    blocks = page_blocks()
    assert len(blocks) >= 5
    assert sum(b.count(INIT) for b in blocks) == 1


@pytest.mark.parametrize("arch", ["cpu", "vulkan"], ids=["arch=cpu", "arch=vulkan"])
def test_guide_code_blocks_run(arch, tmp_path):
    arch_or_skip(arch)
    script = "\n\n".join(page_blocks()).replace(INIT, f"sd.init(arch=sd.{arch})")
    path = tmp_path / "parallel_loops_page.py"     # kernels need a file to read their source from
    path.write_text(script)
    runpy.run_path(str(path))
