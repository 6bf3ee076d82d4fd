"""What kernels see of `sd.graph` (Quadrants' kernel graphs): `while sd.graph.do_while(flag):` in a
`@sd.kernel(graph=True)` kernel. Not supported yet: a compile error naming it (the loop's body
holds parallel loops, which spirad runs only at a kernel's top level). Write the loop on the
host: `while True: step(...); if flag[None] == 0: break`. The frontend learns of it through
`frontend/namespace_hooks.py` (it does not import `sd.graph`, which builds kernels)."""
from __future__ import annotations

from kernel_ir.errors import SpiradNotSupportedError

from ..frontend.namespace_hooks import refused_in_kernels


@refused_in_kernels("graph.do_while", "loop on the host")
def do_while(flag):
    raise SpiradNotSupportedError("sd.graph.do_while is only meaningful inside kernels (and not "
                                  "supported yet: loop on the host)")
