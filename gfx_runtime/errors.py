"""The runtimes' own exception types.

Runtimes never import the compiler or the user API (architecture §1), so they cannot raise spirad's
user errors. They raise these instead; the backend glue in `spirad.backends` maps them to the
user-facing classes (`GfxUnavailable` -> `GfxUnavailable`, `GfxDeviceError` ->
`GfxDeviceError`) with the same message. Anything else a runtime raises is a bug.
"""
from __future__ import annotations


class GfxError(Exception):
    """Base of every error a gfx runtime reports on purpose."""


class GfxUnavailable(GfxError):
    """No usable device: a missing loader or driver, no device with what spirad needs."""


class GfxDeviceError(GfxError):
    """A device limit, memory exhaustion, a lost device, or use of a freed / closed object."""
