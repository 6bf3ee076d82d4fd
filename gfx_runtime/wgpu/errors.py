"""wgpu's own exceptions as the runtime's (`gfx_runtime.errors`), for buffer and runtime alike."""
from __future__ import annotations

from ..errors import GfxDeviceError


def wgpu_errors(method):
    """Report wgpu's own exceptions (validation, out of memory, lost device) as GfxDeviceError:
    the backend glue maps the runtime's errors to user errors, never wgpu's."""
    import functools

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except (GfxDeviceError, ValueError):
            raise
        except Exception as e:
            if type(e).__module__.split(".")[0] != "wgpu":
                raise
            raise GfxDeviceError(f"wgpu: {e}") from None
    return wrapper
